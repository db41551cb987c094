"""Engine lifetime and threads: a second LLM after the first is deleted works and gives the same
outputs; creating and deleting engines leaks no threads (/proc/self/task) and no memory (RSS);
the GIL is released while a step computes; Python threads may share one LLM."""
import gc
import threading
import time

import pytest

from conftest import rss_bytes, thread_count
from nanovllm import LLM, SamplingParams

PROMPTS = ["Once upon a time", [3, 1, 4, 1, 5, 9, 2, 6]]
GREEDY = SamplingParams(temperature=0, max_tokens=16)


def new_llm(model):
    # Two CPU threads, so worker threads exist (few tokens: a loaded machine makes them slow).
    return LLM(model, num_threads=2, num_kvcache_blocks=64, kvcache_block_size=16)


def generate_once(model):
    llm = new_llm(model)
    outs = llm.generate(PROMPTS, SamplingParams(temperature=0, max_tokens=4), use_tqdm=False)
    tok = llm.get_tokenizer()  # keeps the engine alive until it is dropped too
    assert tok.decode(outs[1]["token_ids"], skip_special_tokens=True) == outs[1]["text"]
    del llm, tok
    gc.collect()
    return [(o["text"], o["token_ids"]) for o in outs]


def test_second_llm_after_delete_no_leaks(tiny_model):
    first = generate_once(tiny_model)
    assert generate_once(tiny_model) == first  # the second LLM works, and the same
    # Now the CPU worker threads exist (OpenMP keeps its team for reuse) and malloc's arenas
    # have settled: later engines must not add threads or memory.
    threads0, rss0 = thread_count(), rss_bytes()
    held = new_llm(tiny_model)
    footprint = rss_bytes() - rss0  # one engine: weights copied out of the checkpoint, tokenizer
    del held
    gc.collect()
    for _ in range(4):
        assert generate_once(tiny_model) == first
    threads1, growth = thread_count(), rss_bytes() - rss0
    assert threads1 <= threads0, f"threads grew from {threads0} to {threads1}"
    assert footprint > 8 << 20, f"an engine should hold its weights: {footprint >> 20} MiB"
    assert growth < footprint, \
        f"RSS grew by {growth >> 20} MiB over 4 engines (one engine holds {footprint >> 20} MiB)"


def test_gil_released_during_step(tiny_model):
    # One long prefill step (a 3000-token prompt); meanwhile this thread must keep running.
    llm = LLM(tiny_model, num_kvcache_blocks=256, kvcache_block_size=16)
    llm.add_request(list(range(1000, 4000)), SamplingParams(max_tokens=1))
    ticks, done = [], threading.Event()

    def work():
        t = time.perf_counter()
        llm.step()
        ticks.append(("step", time.perf_counter() - t))
        done.set()

    worker = threading.Thread(target=work)
    worker.start()
    stamps = []
    while not done.is_set():
        stamps.append(time.perf_counter())
        time.sleep(0.001)
    worker.join()
    step_seconds = ticks[0][1]
    if step_seconds < 0.05:
        pytest.skip(f"step took only {step_seconds * 1e3:.1f} ms: too short to observe")
    longest_gap = max(b - a for a, b in zip(stamps, stamps[1:]))
    # With the GIL held through the step, this thread would stall for the whole step.
    assert longest_gap < step_seconds / 2, (longest_gap, step_seconds)
    assert llm.is_finished() or llm.step()[0]


def test_threads_share_one_llm(tiny_model):
    llm = LLM(tiny_model, num_kvcache_blocks=64, kvcache_block_size=16)
    want = llm.generate(PROMPTS, GREEDY, use_tqdm=False)
    results, errors = {}, []

    def worker(k):
        try:
            results[k] = llm.generate(PROMPTS, GREEDY, use_tqdm=False)
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert all(r == want for r in results.values()), results
