"""Engine features on a Qwen3-MoE model (tiny: layer 0 sparse, 8 experts top 2; layer 1 dense):
n > 1 completions, prefix caching (a cached prefix gives the tokens a full prefill gives), and
preemption by recompute (a KV cache too small for the batch) leave greedy outputs unchanged."""
import os
import sys

import pytest

from conftest import make_model
from nanovllm import LLM, SamplingParams

PROMPTS = [[1000 + 37 * i + j for i in range(40)] for j in range(6)]


@pytest.fixture(scope="module")
def moe_model(tmp_path_factory):
    return make_model(tmp_path_factory.mktemp("models") / "qwen3-moe-tiny", arch="qwen3_moe")


def greedy(llm, prompts, n=1, max_tokens=24):
    sp = SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=True, n=n)
    return llm.generate(prompts, sp, use_tqdm=False)


def test_greedy_matches_across_cache_and_preemption(moe_model):
    roomy = LLM(moe_model, num_kvcache_blocks=64, kvcache_block_size=16, max_model_len=256,
                enable_prefix_caching=False)
    ref = [r["token_ids"] for r in greedy(roomy, PROMPTS)]
    assert all(len(t) == 24 for t in ref)
    del roomy
    # 10 blocks of 16 for six sequences of 64 tokens: the scheduler must preempt; the prompts
    # share no prefix, so run them twice for prefix-cache hits on the second pass.
    tight = LLM(moe_model, num_kvcache_blocks=10, kvcache_block_size=16, max_model_len=256)
    assert [r["token_ids"] for r in greedy(tight, PROMPTS)] == ref
    assert [r["token_ids"] for r in greedy(tight, PROMPTS)] == ref
    stats = tight.stats()
    assert stats.preemptions > 0, stats
    assert stats.prefix_cache_hit_tokens > 0, stats


def test_n_completions(moe_model):
    llm = LLM(moe_model, num_kvcache_blocks=64, kvcache_block_size=16, max_model_len=256)
    one = greedy(llm, PROMPTS[:1])[0]["token_ids"]
    out = greedy(llm, PROMPTS[:1], n=3)[0]
    assert [o["token_ids"] for o in out["outputs"]] == [one] * 3
    sp = SamplingParams(temperature=50.0, max_tokens=8, ignore_eos=True, seed=3, n=4)
    outs = llm.generate(PROMPTS[:2], sp, use_tqdm=False)
    for r in outs:
        assert [o["index"] for o in r["outputs"]] == [0, 1, 2, 3]
        assert all(len(o["token_ids"]) == 8 for o in r["outputs"])


def test_router_margins_tool(moe_model, tmp_path):
    """tests/reference/moe_router_margins.py (how the H200 run's MoE logits gap was explained):
    tiny's routing keeps every choice under a bf16 router input; small (16 experts, top 4) flips
    some, and those flips alone move the logits past cpu_vs_cuda's 2e-2 with top-1 unchanged."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "reference"))
    import moe_router_margins as mrm
    tiny = mrm.analyze(moe_model)
    assert (tiny["moe_calls"], tiny["choices"]) == (1, 64)  # layer 1 is dense
    assert tiny["flips_from_bf16_router_input"] == 0
    assert 0 < tiny["max_rel_err_from_flips"] < 5e-3
    small = mrm.analyze(make_model(tmp_path / "qwen3-moe-small", preset="small", arch="qwen3_moe"))
    assert small["choices"] == small["moe_calls"] * 64
    assert small["flips_from_bf16_router_input"] >= 1
    assert all(f["margin"] < 1e-2 for f in small["flips"])  # only near-ties flip
    assert small["max_rel_err_from_flips"] > 2e-2
    assert small["top1_agree"] == small["rows"]
