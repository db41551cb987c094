"""nano-vLLM's bench.py flow on a random Qwen3 model: seeded random token-id prompts, one
SamplingParams(temperature=0.6, ignore_eos=True, max_tokens=random) per prompt, a warm-up
generate, then a timed generate(..., use_tqdm=False) whose throughput is computed from the
returned token_ids. Sizes are scaled down from bench.py's 256 x (100..1024 in, 100..1024 out)
so the test takes seconds; the full workload is `nanovllm bench` (and docs/perf.md)."""
import time
from random import randint, seed

from nanovllm import LLM, SamplingParams

NUM_SEQS, MIN_LEN, MAX_INPUT_LEN, MAX_OUTPUT_LEN = 24, 16, 96, 48


def user_script(path):
    seed(0)
    llm = LLM(path, enforce_eager=False, max_model_len=4096)
    prompt_token_ids = [[randint(0, 10000) for _ in range(randint(MIN_LEN, MAX_INPUT_LEN))]
                        for _ in range(NUM_SEQS)]
    sampling_params = [SamplingParams(temperature=0.6, ignore_eos=True,
                                      max_tokens=randint(MIN_LEN, MAX_OUTPUT_LEN))
                       for _ in range(NUM_SEQS)]
    llm.generate(["Benchmark: "], SamplingParams())
    t = time.time()
    outputs = llm.generate(prompt_token_ids, sampling_params, use_tqdm=False)
    t = time.time() - t
    total_tokens = sum(len(o["token_ids"]) for o in outputs)
    print(f"Total: {total_tokens}tok, Time: {t:.2f}s, Throughput: {total_tokens / t:.2f}tok/s")
    return llm, prompt_token_ids, sampling_params, outputs


def test_bench_flow(tiny_model, capsys):
    llm, prompts, params, outputs = user_script(tiny_model)
    assert len(outputs) == NUM_SEQS
    # ignore_eos: every sequence runs to its own max_tokens, in prompt order.
    assert [len(o["token_ids"]) for o in outputs] == [sp.max_tokens for sp in params]
    assert all(o["finish_reason"] == "length" for o in outputs)
    assert [o["prompt_token_ids"] for o in outputs] == prompts
    stats = llm.stats()
    assert stats.finished_requests == NUM_SEQS + 1
    warmup = len(llm.get_tokenizer().encode("Benchmark: "))
    assert stats.prompt_tokens == sum(map(len, prompts)) + warmup
    line = capsys.readouterr().out.strip().splitlines()[-1]
    total = sum(sp.max_tokens for sp in params)
    assert line.startswith(f"Total: {total}tok, Time: ") and line.endswith("tok/s"), line
