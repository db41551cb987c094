"""Engine features on a Qwen3-MoE model (tiny: layer 0 sparse, 8 experts top 2; layer 1 dense):
n > 1 completions, prefix caching (a cached prefix gives the tokens a full prefill gives), and
preemption by recompute (a KV cache too small for the batch) leave greedy outputs unchanged."""
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
