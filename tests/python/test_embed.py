"""Embeddings through Python: LLM(model, task="embed").embed(prompts) returns one unit vector per
prompt, equal to the server's and independent of batching; a generation engine refuses embed()
and an embedding engine refuses n > 1. (The numpy reference check is tests/e2e/test_embeddings.py.)"""
import math

import pytest

from nanovllm import LLM, SamplingParams

KW = dict(num_kvcache_blocks=64, kvcache_block_size=16, max_model_len=256, max_num_batched_tokens=512)


def test_embed_unit_vectors_batch_independent(tiny_model):
    llm = LLM(tiny_model, task="embed", **KW)
    assert llm.config.task == "embed" and not llm.config.enable_prefix_caching
    prompts = [[5, 6, 7, 8], [100, 200, 300, 400, 500], [42] * 9]
    together = llm.embed(prompts)
    alone = [llm.embed([p])[0] for p in prompts]
    assert len(together) == 3
    for a, b in zip(together, alone):
        assert len(a) == 64
        assert abs(math.sqrt(sum(x * x for x in a)) - 1) < 1e-4
        assert max(abs(x - y) for x, y in zip(a, b)) < 1e-3  # bf16 weights: batching may round differently
    assert max(abs(x - y) for x, y in zip(together[0], together[1])) > 1e-3  # different prompts differ
    out = llm.generate([prompts[0]], use_tqdm=False)[0]
    assert out["token_ids"] == [] and out["text"] == "" and len(out["embedding"]) == 64
    with pytest.raises(ValueError, match="n = 1"):
        llm.generate([prompts[0]], SamplingParams(n=2), use_tqdm=False)


def test_generation_engine_refuses_embed(tiny_model):
    llm = LLM(tiny_model, **KW)
    assert llm.config.task == "generate"
    with pytest.raises(ValueError, match="embedding engine"):
        llm.embed([[1, 2, 3]])
