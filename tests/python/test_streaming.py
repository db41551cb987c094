"""Streaming: LLM.stream() pieces concatenate to generate()'s output for the same requests
(also with stop strings, whose text is held back until it cannot be a stop-string prefix);
closing the iterator early aborts the rest; add_request(stream=True) + step() +
take_stream_deltas() is the same stream at the lower level."""
import pytest

from nanovllm import LLM, SamplingParams

PROMPTS = ["Once upon a time", "The capital of France is", [5, 6, 7, 8], "hello"]


@pytest.fixture(scope="module")
def llm(tiny_model):
    return LLM(tiny_model, num_kvcache_blocks=64, kvcache_block_size=16)


def params():
    # Different lengths, so prompts finish in different steps.
    return [SamplingParams(temperature=0.8, seed=i, max_tokens=8 + 5 * i) for i in range(len(PROMPTS))]


def collect(pieces, n):
    texts, ids, finished = [""] * n, [[] for _ in range(n)], [None] * n
    for p in pieces:
        i = p["index"]
        assert finished[i] is None, f"piece for prompt {i} after its final piece"
        texts[i] += p["text"]
        ids[i] += p["token_ids"]
        if p["finished"]:
            finished[i] = p["finish_reason"]
    return texts, ids, finished


def test_stream_concatenates_to_generate(llm):
    full = llm.generate(PROMPTS, params(), use_tqdm=False)
    pieces = list(llm.stream(PROMPTS, params()))
    texts, ids, finished = collect(pieces, len(PROMPTS))
    assert texts == [o["text"] for o in full]
    assert ids == [o["token_ids"] for o in full]
    assert finished == [o["finish_reason"] for o in full]
    # Tokens arrive in several pieces, interleaved across prompts (continuous batching).
    assert len(pieces) > len(PROMPTS)
    assert [p["index"] for p in pieces[:len(PROMPTS)]] == list(range(len(PROMPTS)))
    assert llm.is_finished()


def test_stream_with_stop_strings(llm):
    probe = llm.generate([PROMPTS[0]], SamplingParams(temperature=0, max_tokens=16),
                         use_tqdm=False)[0]["text"]
    stop = probe[len(probe) // 2:][:4]
    sp = SamplingParams(temperature=0, max_tokens=16, stop=[stop, "zzzz"])
    full = llm.generate(PROMPTS, sp, use_tqdm=False)
    texts, ids, finished = collect(llm.stream(PROMPTS, sp), len(PROMPTS))
    assert texts == [o["text"] for o in full]
    assert ids == [o["token_ids"] for o in full]
    assert full[0]["finish_reason"] == "stop" and stop not in full[0]["text"]


def test_closing_the_stream_aborts(llm):
    before = llm.stats().aborted_requests
    it = llm.stream(PROMPTS, SamplingParams(temperature=0, max_tokens=200, ignore_eos=True))
    first = next(it)
    assert first["index"] == 0 and not first["finished"]
    it.close()
    assert llm.is_finished()
    assert llm.stats().aborted_requests == before + len(PROMPTS)
    assert llm.step() == ([], 0)  # the aborted outputs do not leak into step()
    # The engine is reusable afterwards.
    assert len(llm.generate(PROMPTS, SamplingParams(max_tokens=4), use_tqdm=False)) == len(PROMPTS)


def test_low_level_streaming(llm):
    sp = SamplingParams(temperature=0, max_tokens=10)
    want = llm.generate([PROMPTS[1]], sp, use_tqdm=False)[0]
    rid = llm.add_request(PROMPTS[1], sp, stream=True)
    text, ids, done = "", [], []
    while not llm.is_finished():
        outputs, num_tokens = llm.step()
        done += outputs
        for d in llm.take_stream_deltas():
            assert d.request_id == rid
            text += d.text
            ids += d.token_ids
    assert done == [(rid, want["token_ids"])]
    assert (text, ids) == (want["text"], want["token_ids"])
