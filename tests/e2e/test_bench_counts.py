"""`nanovllm bench` on a tiny random model: the workload is bench.py's, draw for draw, and the
counts it reports are right (output tokens = sum of max_tokens; prompt tokens = sum of lengths).
The expected draws come from Python's own `random` module (the reference), not from nanovllm."""
import json
import os
import random
import subprocess
import sys
import tempfile

BIN = os.environ.get("NANOVLLM_BIN")
if not BIN:
    print("NANOVLLM_BIN not set")
    sys.exit(1)

num_seqs, min_in, max_in, min_out, max_out = 12, 20, 80, 4, 24
random.seed(0)
prompts = [[random.randint(0, 10000) for _ in range(random.randint(min_in, max_in))]
           for _ in range(num_seqs)]
max_tokens = [random.randint(min_out, max_out) for _ in range(num_seqs)]

build = os.environ.get("NANOVLLM_BUILD_DIR", tempfile.gettempdir())
cache = os.path.join(build, "test-models", "bench-cache")
cmd = [BIN, "bench", "--random-model", "tiny", "--dtype", "f32", "--cache-dir", cache,
       "--num-seqs", str(num_seqs), "--min-input-len", str(min_in), "--max-input-len", str(max_in),
       "--min-output-len", str(min_out), "--max-output-len", str(max_out), "--json", "--no-progress",
       "--threads", "2", "--num-kvcache-blocks", "64", "--block-size", "16"]
res = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
print(res.stderr[-2000:])
assert res.returncode == 0, f"bench exited {res.returncode}"
out = json.loads(res.stdout.strip().splitlines()[-1])
print(json.dumps(out, indent=1))
expected_prompt = sum(len(p) for p in prompts)
expected_out = sum(max_tokens)
assert out["num_seqs"] == num_seqs, out
assert out["prompt_tokens"] == expected_prompt, (out["prompt_tokens"], expected_prompt)
assert out["output_tokens"] == expected_out, (out["output_tokens"], expected_out)
assert out["expected_output_tokens"] == expected_out
# Every prompt is prefilled at least once, every token after the first per sequence is decoded
# (preemption can only add recomputed prefill tokens).
assert out["prefill_tokens"] >= expected_prompt, out
assert out["decode_tokens"] == expected_out - num_seqs, out
assert 0 < out["peak_kv_blocks"] <= out["num_kv_blocks"], out
assert out["output_tokens_per_s"] > 0
# Bad workload arguments are a clear error, not a crash.
bad = subprocess.run([BIN, "bench", "--random-model", "tiny", "--cache-dir", cache,
                      "--min-output-len", "10", "--max-output-len", "5", "--no-progress"],
                     capture_output=True, text=True, timeout=120)
assert bad.returncode != 0 and "invalid workload" in bad.stderr, bad.stderr
# A workload longer than max_model_len is refused before it runs (it would be cut short silently).
bad = subprocess.run([BIN, "bench", "--random-model", "tiny", "--cache-dir", cache, "--num-seqs", "2",
                      "--min-output-len", "100", "--max-output-len", "100", "--max-model-len", "64",
                      "--no-progress"], capture_output=True, text=True, timeout=120)
assert bad.returncode == 1 and "needs up to" in bad.stderr and "max_model_len is 64" in bad.stderr, bad.stderr
# Errors for users carry no source path; --verbose (anywhere) adds where it was raised.
assert ".cc" not in bad.stderr and "check failed" not in bad.stderr, bad.stderr
verbose = subprocess.run([BIN, "bench", "--verbose", "--random-model", "tiny", "--cache-dir", cache, "--num-seqs", "2",
                          "--min-output-len", "100", "--max-output-len", "100", "--max-model-len", "64",
                          "--no-progress"], capture_output=True, text=True, timeout=120)
assert verbose.returncode == 1 and "(raised by check failed: " in verbose.stderr and \
    " at tools/cmd_bench.cc:" in verbose.stderr, verbose.stderr
print("PASS: bench counts")
