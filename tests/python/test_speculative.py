"""Speculative decoding through Python: LLM(speculative="ngram" | "draft", ...) generates what LLM() does,
stats() and step stats report the drafts, bad options are ValueErrors naming the option."""
import pytest

from nanovllm import LLM, NanoVLLMError, SamplingParams

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


def test_draft_model_is_exact_and_counted(tiny_model):
    """speculative="draft": the model drafting for itself has its greedy drafts accepted; TP = 2
    runs the draft whole on rank 0. Sampled output equals plain output too."""
    greedy = SamplingParams(temperature=0, max_tokens=24, ignore_eos=True)
    sampled = SamplingParams(temperature=0.8, seed=5, max_tokens=24, ignore_eos=True)
    plain = LLM(tiny_model, **KW)
    draft = LLM(tiny_model, speculative="draft", draft_model=tiny_model, speculative_fixed_k=True, **KW)
    for sp in (greedy, sampled):
        assert ([o["token_ids"] for o in draft.generate(PROMPTS, sp, use_tqdm=False)] ==
                [o["token_ids"] for o in plain.generate(PROMPTS, sp, use_tqdm=False)])
    s = draft.stats()
    assert s.spec_draft_tokens > 0 and s.spec_accepted_tokens > 0.5 * s.spec_draft_tokens
    assert draft.config.speculative == "draft" and draft.config.draft_model == tiny_model
    tp = LLM(tiny_model, tensor_parallel_size=2, num_threads=1, speculative="draft", draft_model=tiny_model,
             speculative_fixed_k=True, **KW)
    assert ([o["token_ids"] for o in tp.generate(PROMPTS, greedy, use_tqdm=False)] ==
            [o["token_ids"] for o in plain.generate(PROMPTS, greedy, use_tqdm=False)])
    assert tp.stats().spec_accepted_tokens > 0


@pytest.mark.parametrize("kwargs,match", [
    (dict(speculative="draft"), r"needs draft_model"),
    (dict(speculative="eagle"), r"speculative must be"),
    (dict(speculative="ngram", num_speculative_tokens=0), r"num_speculative_tokens must be in \[1, 16\]"),
    (dict(speculative="ngram", ngram_min=5, ngram_max=2), r"ngram_min \(5\) must be <= ngram_max \(2\)"),
])
def test_bad_options(tiny_model, kwargs, match):
    with pytest.raises(ValueError, match=match):
        LLM(tiny_model, **KW, **kwargs)


def test_missing_draft_model_is_an_engine_error(tiny_model):
    with pytest.raises(NanoVLLMError, match=r"--draft-model: model directory '/nonexistent' does not exist"):
        LLM(tiny_model, speculative="draft", draft_model="/nonexistent", **KW)


def test_tensor_parallel_speculation(tiny_model):
    """TP = 2: rank 0 broadcasts the verification batches (1 + k rows per sequence) like any step."""
    greedy = SamplingParams(temperature=0, max_tokens=24, ignore_eos=True)
    plain = LLM(tiny_model, **KW).generate(PROMPTS, greedy, use_tqdm=False)
    tp = LLM(tiny_model, tensor_parallel_size=2, num_threads=1, speculative="ngram", speculative_fixed_k=True, **KW)
    got = tp.generate(PROMPTS, greedy, use_tqdm=False)
    assert [o["token_ids"] for o in got] == [o["token_ids"] for o in plain]
    assert tp.stats().spec_accepted_tokens > 0


def test_sampled_tokens_follow_the_target_distribution(tiny_model):
    """A chi-square test of speculative sampling against the target distribution: top_k = 4 at
    temperature 8 makes every position a 4-token distribution, known from the raw top-4 logprobs
    (p_i = exp(lp_i / T) / sum_j exp(lp_j / T)). Each drawn token is binned by its rank; the
    expected count of rank r is the sum over positions of p_r (a sum of independent draws given
    their prefixes). Drafts are verified throughout (asserted), so most tokens come from
    verification rows."""
    import math
    t = 8.0
    spec = LLM(tiny_model, speculative="ngram", num_speculative_tokens=4, speculative_fixed_k=True, **KW)
    observed, expected = [0.0] * 4, [0.0] * 4
    prompts = [[5, 6, 7, 8] * 3, [9, 10, 9, 10, 9], [11] * 5, [300, 301, 302, 300, 301]]
    for seed in range(12):
        sp = SamplingParams(temperature=t, top_k=4, seed=seed, max_tokens=40, ignore_eos=True, logprobs=4)
        for o in spec.generate(prompts, sp, use_tqdm=False):
            for tok, lp in zip(o["token_ids"], o["logprobs"]):
                top = sorted(lp["top"], key=lambda a: -a["logprob"])[:4]
                w = [math.exp(a["logprob"] / t) for a in top]
                z = sum(w)
                ranks = [a["token_id"] for a in top]
                assert tok in ranks, "a token outside the top-4 was sampled"
                observed[ranks.index(tok)] += 1
                for r in range(len(w)):
                    expected[r] += w[r] / z
    s = spec.stats()
    assert s.spec_accepted_tokens > 200 and s.spec_accepted_tokens < s.spec_draft_tokens
    # Bins with an expected count under 5 are merged into the previous one.
    obs, exp = [], []
    for o, e in zip(observed, expected):
        if exp and e < 5:
            obs[-1] += o
            exp[-1] += e
        else:
            obs.append(o)
            exp.append(e)
    chi2 = sum((o - e) ** 2 / e for o, e in zip(obs, exp))
    dof = len(obs) - 1
    limit = {1: 10.83, 2: 13.82, 3: 16.27}[dof]  # p = 0.001
    assert dof >= 1, f"the distributions are too peaked for a test: expected {expected}"
    print(f"chi2 {chi2:.2f} dof {dof} observed {observed} expected {[round(e, 1) for e in expected]}")
    assert chi2 < limit, f"chi2 {chi2:.2f} >= {limit} with {dof} dof: observed {observed}, expected {expected}"
