"""LLM(..., tensor_parallel_size=2) from Python: ranks 1..N-1 are Python processes running
nanovllm._worker (started with this interpreter, whatever sys.path set up the package); greedy
tokens equal TP = 1, and the workers are gone once the LLM is."""
import os
import time

from nanovllm import LLM, SamplingParams


def worker_pids():
    """Child processes of this test process."""
    pids = []
    for tid in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{tid}/children") as f:
            pids += [int(p) for p in f.read().split()]
    return pids


def test_tp2_equals_tp1_and_workers_exit(tiny_model):
    kw = dict(device="cpu", num_threads=1, kvcache_block_size=16, num_kvcache_blocks=64,
              max_model_len=256)
    sp = SamplingParams(temperature=0, max_tokens=12, ignore_eos=True)
    prompts = [[1, 5, 9, 30, 31], [7, 8, 9]]
    ref = [o["token_ids"] for o in LLM(tiny_model, **kw).generate(prompts, sp, use_tqdm=False)]
    before = set(worker_pids())
    llm = LLM(tiny_model, tensor_parallel_size=2, **kw)
    workers = set(worker_pids()) - before
    assert len(workers) == 1, f"expected one worker process, found {workers}"
    got = [o["token_ids"] for o in llm.generate(prompts, sp, use_tqdm=False)]
    assert got == ref
    del llm
    deadline = time.time() + 10
    while workers & set(worker_pids()) and time.time() < deadline:
        time.sleep(0.05)
    assert not workers & set(worker_pids()), "the worker outlived the LLM"
