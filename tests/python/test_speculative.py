"""Speculative decoding through Python: LLM(speculative="ngram", ...) generates what LLM() does,
stats() and step stats report the drafts, bad options are ValueErrors naming the option."""
import pytest

from nanovllm import LLM, SamplingParams

KW = dict(num_kvcache_blocks=64, kvcache_block_size=16, max_model_len=256, max_num_batched_tokens=512)
PROMPTS = [[5, 6, 7, 8, 5, 6, 7, 8, 5, 6], [100, 200, 300, 100, 200], [42] * 6]


def test_ngram_is_exact_and_counted(tiny_model):
    greedy = SamplingParams(temperature=0, max_tokens=32, ignore_eos=True)
    sampled = SamplingParams(temperature=0.8, seed=3, max_tokens=32, ignore_eos=True, logprobs=1)
    plain = LLM(tiny_model, **KW)
    spec = LLM(tiny_model, speculative="ngram", num_speculative_tokens=5, speculative_fixed_k=True, **KW)
    for sp in (greedy, sampled):
        a = plain.generate(PROMPTS, sp, use_tqdm=False)
        b = spec.generate(PROMPTS, sp, use_tqdm=False)
        assert [o["token_ids"] for o in a] == [o["token_ids"] for o in b]
        assert [o["text"] for o in a] == [o["text"] for o in b]
    s = spec.stats()
    assert s.spec_draft_tokens > 0 and 0 < s.spec_accepted_tokens <= s.spec_draft_tokens
    assert s.spec_verifications > 0
    assert s.to_dict()["spec_accepted_tokens"] == s.spec_accepted_tokens
    assert spec.stats().steps < plain.stats().steps
    assert plain.stats().spec_draft_tokens == 0
    assert spec.config.speculative == "ngram" and spec.config.speculative_max_batch >= 1


@pytest.mark.parametrize("kwargs,match", [
    (dict(speculative="eagle"), r"speculative must be"),
    (dict(speculative="ngram", num_speculative_tokens=0), r"num_speculative_tokens must be in \[1, 16\]"),
    (dict(speculative="ngram", ngram_min=5, ngram_max=2), r"ngram_min \(5\) must be <= ngram_max \(2\)"),
])
def test_bad_options(tiny_model, kwargs, match):
    with pytest.raises(ValueError, match=match):
        LLM(tiny_model, **KW, **kwargs)


def test_tensor_parallel_speculation(tiny_model):
    """TP = 2: rank 0 broadcasts the verification batches (1 + k rows per sequence) like any step."""
    greedy = SamplingParams(temperature=0, max_tokens=24, ignore_eos=True)
    plain = LLM(tiny_model, **KW).generate(PROMPTS, greedy, use_tqdm=False)
    tp = LLM(tiny_model, tensor_parallel_size=2, num_threads=1, speculative="ngram", speculative_fixed_k=True, **KW)
    got = tp.generate(PROMPTS, greedy, use_tqdm=False)
    assert [o["token_ids"] for o in got] == [o["token_ids"] for o in plain]
    assert tp.stats().spec_accepted_tokens > 0
