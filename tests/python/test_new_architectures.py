"""Engine features on the architectures added by issue 28 (tiny presets: Mistral with a 16-key
window on both layers; Gemma 3 with a local layer of window 16 and a global one; Qwen3-MoE with a
sparse layer of 8 experts, top 2, and a dense one), with prompts much longer than the windows:
prefix caching, preemption by recompute, chunked prefill, n > 1 and tensor parallelism must leave
greedy outputs unchanged."""
import pytest

from conftest import make_model
from nanovllm import LLM, SamplingParams

# 6 prompts of 40 tokens (the window is 16) sharing no prefix; a second pass hits the cache.
PROMPTS = [[1000 + 37 * i + j for i in range(40)] for j in range(6)]
KW = dict(kvcache_block_size=16, max_model_len=256)


@pytest.fixture(scope="module", params=["mistral", "gemma3_text", "qwen3_moe"])
def model(request, tmp_path_factory):
    return make_model(tmp_path_factory.mktemp("models") / f"{request.param}-tiny", arch=request.param)


def greedy(llm, prompts, n=1, max_tokens=24):
    sp = SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=True, n=n)
    return llm.generate(prompts, sp, use_tqdm=False)


@pytest.fixture(scope="module")
def reference(model):
    llm = LLM(model, num_kvcache_blocks=64, enable_prefix_caching=False, **KW)
    ref = [r["token_ids"] for r in greedy(llm, PROMPTS)]
    assert all(len(t) == 24 for t in ref)
    return ref


def test_prefix_cache_and_preemption(model, reference):
    # 10 blocks of 16 for six sequences of 64 tokens: the scheduler must preempt.
    tight = LLM(model, num_kvcache_blocks=10, **KW)
    assert [r["token_ids"] for r in greedy(tight, PROMPTS)] == reference
    assert [r["token_ids"] for r in greedy(tight, PROMPTS)] == reference
    stats = tight.stats()
    assert stats.preemptions > 0, stats
    assert stats.prefix_cache_hit_tokens > 0, stats


def test_chunked_prefill(model, reference):
    # A 24-token step budget: every 40-token prompt is prefilled in chunks, with decodes mixed in.
    llm = LLM(model, num_kvcache_blocks=64, max_num_batched_tokens=24, policy="mixed", **KW)
    assert [r["token_ids"] for r in greedy(llm, PROMPTS)] == reference


def test_n_completions(model, reference):
    llm = LLM(model, num_kvcache_blocks=64, **KW)
    out = greedy(llm, PROMPTS[:1], n=3)[0]
    assert [o["token_ids"] for o in out["outputs"]] == [reference[0]] * 3


def test_tp2_equals_tp1(model):
    kw = dict(device="cpu", num_threads=1, num_kvcache_blocks=64, **KW)
    one = [r["token_ids"] for r in greedy(LLM(model, **kw), PROMPTS[:2], max_tokens=12)]
    two = [r["token_ids"] for r in greedy(LLM(model, tensor_parallel_size=2, **kw), PROMPTS[:2], max_tokens=12)]
    assert two == one
