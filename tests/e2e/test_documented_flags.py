"""Docs that are true: every engine and sampling flag the README documents ("Engine flags
(generate, bench, serve): ... Sampling flags: ...") is accepted by those commands (their --help
lists it) and has an effect: `nanovllm generate --json` with the flag set differs from the same
run without it (outputs or statistics, timings ignored), or the flag is refused with an error
where that is its documented behaviour. A documented flag that is parsed and then ignored fails
here, and so does a documented flag this test has no case for (add one below).
Uses stories260K from the shared data (skips without it)."""
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))

import e2e_util as U  # noqa: E402

SOURCE = os.environ.get("NANOVLLM_SOURCE_DIR",
                        os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
TIMING = {"seconds", "output_tokens_per_s", "prefill_seconds", "decode_seconds"}
PROMPTS = ["Once upon a time", "Lily had a red ball", "The sun was"]
# Three 40-token prompts for the policy case: with a 64-token budget prefill-first prefills them
# one step each (10 steps for 8 tokens each), mixed chunks them into two steps (9).
ID_PROMPTS_40 = [",".join(str(start + i) for i in range(40)) for start in (3, 60, 120)]
ID_PROMPT_20 = ",".join(str(100 + i) for i in range(20))  # one full 16-token block + 4


def documented_flags(readme_text):
    """(engine flags, sampling flags) named in backticks in the README's flag paragraph."""
    m = re.search(r"^Engine flags \(generate, bench, serve\):(.*?)^\s*$", readme_text, re.S | re.M)
    if not m:
        raise AssertionError("README.md has no 'Engine flags (generate, bench, serve):' paragraph")
    engine, _, sampling = m.group(1).partition("Sampling flags:")
    pick = lambda s: re.findall(r"`(--[a-z][a-z0-9-]*)", s)  # noqa: E731
    if not pick(engine) or not pick(sampling):
        raise AssertionError("no flags found in the README's flag paragraph")
    return pick(engine), pick(sampling)


def help_text(command):
    p = subprocess.run([U.nanovllm_bin(), command, "--help"], capture_output=True, text=True,
                       timeout=60)
    return p.stdout + p.stderr


def command_line(model, opts):
    """generate's arguments from an option dict (True: a switch; lists: repeated options)."""
    args = ["generate", "--model", model, "--json"]
    for prompt in opts.pop("prompts", PROMPTS):
        args += ["--prompt", prompt]
    for ids in opts.pop("prompt_ids", []):
        args += ["--prompt-ids", ids]
    for flag, value in opts.items():
        if value is True:
            args.append(flag)
        elif value is not None:
            args += [flag, str(value)]
    return args


_runs = {}


def run(model, opts):
    """(observable JSON without timings, None) or (None, error text); memoized."""
    key = (model, json.dumps(opts, sort_keys=True))
    if key not in _runs:
        _runs[key] = run_uncached(model, opts)
    return _runs[key]


def run_uncached(model, opts):
    p = subprocess.run([U.nanovllm_bin()] + command_line(model, dict(opts)), capture_output=True,
                       text=True, timeout=300)
    if p.returncode != 0:
        return None, (p.stderr.strip() or f"exit {p.returncode}")
    j = json.loads(p.stdout)
    for k in TIMING:
        j.pop(k, None)
        j["stats"].pop(k, None)
    return j, None


def greedy_first_output(model):
    j, err = run(model, {"--device": "cpu", "--temperature": 0, "--max-tokens": 8})
    if err:
        raise AssertionError(f"the baseline run failed: {err}")
    return j["outputs"][0]


def model_with_eos(model, tmp, eos_id):
    """A copy of `model` whose generation_config also lists eos_id as an EOS token."""
    out = os.path.join(tmp, "eos-model")
    os.makedirs(out)
    for name in os.listdir(model):
        if name != "generation_config.json":
            os.symlink(os.path.join(model, name), os.path.join(out, name))
    with open(os.path.join(out, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": 1, "eos_token_id": [2, eos_id]}, f)
    return out


def model_with_nan(model, tmp):
    """A copy of `model` with one NaN in model.norm.weight (F32): refused at load by default."""
    out = os.path.join(tmp, "nan-model")
    os.makedirs(out)
    for name in os.listdir(model):
        if name != "model.safetensors":
            os.symlink(os.path.join(model, name), os.path.join(out, name))
    path = os.path.join(out, "model.safetensors")
    shutil.copyfile(os.path.join(model, "model.safetensors"), path)
    with open(path, "r+b") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        entry = json.loads(f.read(n))["model.norm.weight"]
        if entry["dtype"] != "F32":
            raise AssertionError(f"model.norm.weight is {entry['dtype']}, this test writes an F32 NaN")
        f.seek(8 + n + entry["data_offsets"][0])
        f.write(struct.pack("<f", float("nan")))
    return out


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cases(model, eos_model, nan_model, first, tmp):
    """flag -> (model, base options, options with the flag, expectation). Expectations:
    'differs' (the run must succeed and differ), 'error' (refused), 'differs-or-error'
    (--device cuda: refused without CUDA, a different run with it), 'cuda' (checked only where
    CUDA runs, there 'differs'; a no-op on the CPU by its documentation), 'cuda-error' (the
    same, there 'error'), ('writes', path) (the run succeeds and
    writes that file, which the run without the flag does not), ('records', path without,
    path with) (both traces written, request records only in the second), 'enables' (the run without it is
    refused, the run with it succeeds), 'error-differs' (both refused, with different messages:
    the error names the flag's value)."""
    greedy = {"--device": "cpu", "--temperature": 0, "--max-tokens": 8}
    sampled = {"--device": "cpu", "--temperature": 1.5, "--seed": 1, "--max-tokens": 16}
    long = dict(greedy, **{"--max-tokens": 32, "--ignore-eos": True})
    stop_word = first["text"].strip().split()[1]  # a word of the greedy text
    w = lambda base, **kw: dict(base, **{"--" + k.replace("_", "-"): v for k, v in kw.items()})  # noqa: E731
    batch = dict(greedy, **{"--max-num-batched-tokens": 64, "--max-model-len": 64,
                            "prompts": [], "prompt_ids": ID_PROMPTS_40})
    shared = dict(greedy, **{"--block-size": 16, "prompt_ids": [ID_PROMPT_20, ID_PROMPT_20]})
    cuda = dict(greedy, **{"--device": "cuda"})
    spec = w(long, speculative="ngram", speculative_fixed_k=True)
    # Ranks 1..N-1 started by this process, and rank 0 waiting at an address no worker comes to.
    tp2 = w(greedy, tensor_parallel_size=2, threads=1)
    alone = w(tp2, dist_init_addr=f"127.0.0.1:{free_port()}", dist_timeout=1)
    return {
        # engine flags
        "--device": (model, greedy, w(greedy, device="cuda"), "differs-or-error"),
        "--max-num-seqs": (model, greedy, w(greedy, max_num_seqs=1), "differs"),
        "--max-num-batched-tokens": (model, w(greedy, policy="mixed"),
                                     w(greedy, policy="mixed", max_num_batched_tokens=4), "differs"),
        "--max-model-len": (model, greedy, w(greedy, max_model_len=10), "differs"),
        "--block-size": (model, greedy, w(greedy, block_size=16), "differs"),
        "--num-kvcache-blocks": (model, greedy, w(greedy, num_kvcache_blocks=7), "differs"),
        "--kv-cache-bytes": (model, greedy, w(greedy, kv_cache_bytes=1000000), "differs"),
        "--policy": (model, batch, w(batch, policy="mixed"), "differs"),
        "--no-prefix-caching": (model, shared, w(shared, no_prefix_caching=True), "differs"),
        "--enforce-eager": (model, cuda, w(cuda, enforce_eager=True), "cuda"),
        # 0.1% of the GPU holds less than the CUDA context and the weights: no KV block fits.
        "--gpu-memory-utilization": (model, cuda, w(cuda, gpu_memory_utilization=0.001), "cuda-error"),
        # stories260K: 8 heads, 4 KV heads. TP = 2 gives TP = 1's tokens (test_tensor_parallel.py
        # checks that); 3 does not divide the heads, a documented error.
        "--tensor-parallel-size": (model, greedy, w(greedy, tensor_parallel_size=3), "error"),
        "--dist-init-addr": (model, tp2, alone, "error"),
        "--dist-timeout": (model, alone, w(alone, dist_timeout=1.5), "error-differs"),
        "--allow-nonfinite-weights": (nan_model, greedy, w(greedy, allow_nonfinite_weights=True), "enables"),
        "--threads": (model, w(greedy, threads=2), w(greedy, threads=1), "differs"),
        # stories260K, 3 prompts x 32 greedy tokens: int4 weights (or an int4 LM head alone)
        # change some tokens; a bf16 KV cache halves the block bytes, so a fixed budget holds
        # twice the blocks (num_blocks_total 3 -> 6).
        "--quantization": (model, long, w(long, quantization="int4"), "differs"),
        "--lm-head-quantization": (model, long, w(long, lm_head_quantization="int4"), "differs"),
        "--kv-cache-dtype": (model, w(greedy, kv_cache_bytes=1000000),
                             w(greedy, kv_cache_bytes=1000000, kv_cache_dtype="bf16"), "differs"),
        # stories260K's greedy text repeats itself: n-gram drafts are verified (the tokens stay
        # the same, exactly; the statistics' spec_* counts and the step count change).
        "--speculative": (model, long, w(long, speculative="ngram"), "differs"),
        "--num-speculative-tokens": (model, spec, w(spec, num_speculative_tokens=1), "differs"),
        "--ngram-min": (model, spec, w(spec, ngram_min=4), "differs"),
        "--ngram-max": (model, w(spec, max_tokens=200), w(spec, max_tokens=200, ngram_max=1), "differs"),
        # three prompts decode together: a limit of 1 turns speculation off until one is left
        "--speculative-max-batch": (model, spec, w(spec, speculative_max_batch=1), "differs"),
        # stories260K's drafts cost about a decode step each: adaptive K verifies few of them
        "--speculative-fixed-k": (model, w(long, speculative="ngram"), spec, "differs"),
        # --speculative draft needs a draft model; stories260K drafts for itself
        "--draft-model": (model, w(long, speculative="draft"), w(long, speculative="draft", draft_model=model),
                          "enables"),
        "--trace": (model, greedy, w(greedy, trace=os.path.join(tmp, "t.json")),
                    ("writes", os.path.join(tmp, "t.json"))),
        # the same trace, plus one request_record per request (what `nanovllm replay` reads)
        "--trace-requests": (model, w(greedy, trace=os.path.join(tmp, "r0.json")),
                             w(greedy, trace=os.path.join(tmp, "r1.json"), trace_requests=True),
                             ("records", os.path.join(tmp, "r0.json"), os.path.join(tmp, "r1.json"))),
        # sampling flags
        "--temperature": (model, w(sampled, temperature=0), sampled, "differs"),
        "--top-k": (model, sampled, w(sampled, top_k=1), "differs"),
        "--top-p": (model, sampled, w(sampled, top_p=0.05), "differs"),
        "--min-p": (model, sampled, w(sampled, min_p=0.9), "differs"),
        "--seed": (model, sampled, w(sampled, seed=2), "differs"),
        "--max-tokens": (model, greedy, w(greedy, max_tokens=3), "differs"),
        "--min-tokens": (eos_model, greedy, w(greedy, min_tokens=6), "differs"),
        "--ignore-eos": (eos_model, greedy, w(greedy, ignore_eos=True), "differs"),
        "--stop": (model, greedy, w(greedy, stop=stop_word), "differs"),
        "--stop-token-ids": (model, greedy, w(greedy, stop_token_ids=first["token_ids"][1]), "differs"),
        "--logprobs": (model, greedy, w(greedy, logprobs=2), "differs"),
        "--presence-penalty": (model, long, w(long, presence_penalty=2), "differs"),
        "--frequency-penalty": (model, long, w(long, frequency_penalty=2), "differs"),
        "--repetition-penalty": (model, long, w(long, repetition_penalty=2), "differs"),
    }


def check_accepted(engine, sampling):
    helps = {c: help_text(c) for c in ("generate", "bench", "serve")}
    if not re.search(r"^\s+serve\s", help_text("--help"), re.M):  # minimal build: no server
        helps.pop("serve")
    missing = [f"{c} {f}" for c, h in helps.items() for f in engine
               if not re.search(re.escape(f) + r"\b", h)]
    missing += [f"generate {f}" for f in sampling if not re.search(re.escape(f) + r"\b", helps["generate"])]
    if missing:
        raise AssertionError("documented but not accepted (absent from --help): " + ", ".join(missing))
    print(f"  {len(engine)} engine flags in {' / '.join(helps)} --help, {len(sampling)} sampling flags "
          f"in generate --help")


def check_effects(flags, table, cuda_runs):
    no_case = [f for f in flags if f not in table]
    if no_case:
        raise AssertionError("documented flags without an effect case in this test: " + ", ".join(no_case))
    failures = []
    for flag in flags:
        model, base, changed, expect = table[flag]
        if expect in ("cuda", "cuda-error") and not cuda_runs:
            print(f"  {flag}: not checked (a CUDA-only flag; no CUDA device here)")
            continue
        if isinstance(expect, tuple) and expect[0] == "records":  # ("records", without, with)
            _, berr = run(model, base)
            _, cerr = run(model, changed)
            if berr or cerr:
                failures.append(f"{flag}: a run failed: {(berr or cerr)[-300:]}")
                continue
            counts = []
            for path in expect[1:]:
                with open(path) as f:
                    counts.append(sum(1 for e in json.load(f) if e.get("name") == "request_record"))
            if counts[0] != 0 or counts[1] != len(PROMPTS):
                failures.append(f"{flag}: request_record events without / with it: {counts}")
            else:
                print(f"  {flag}: records {counts[1]} requests in the trace")
            continue
        if isinstance(expect, tuple):  # ("writes", path)
            path = expect[1]
            _, berr = run(model, base)
            wrote_before = os.path.exists(path)
            _, cerr = run(model, changed)
            written = os.path.exists(path) and os.path.getsize(path) > 0
            if berr or cerr:
                failures.append(f"{flag}: a run failed: {(berr or cerr)[-300:]}")
            elif wrote_before or not written:
                failures.append(f"{flag}: {path} was not written by the run with it (only)")
            else:
                print(f"  {flag}: writes {os.path.basename(path)} ({os.path.getsize(path)} bytes)")
            continue
        b, berr = run(model, base)
        c, cerr = run(model, changed)
        if expect == "enables":
            if not berr:
                failures.append(f"{flag}: the run without it was not refused")
            elif cerr:
                failures.append(f"{flag}: the run with it failed: {cerr[-300:]}")
            else:
                print(f"  {flag}: enables a run refused without it ({berr.splitlines()[-1][:80]})")
            continue
        if expect == "error-differs":
            if not (berr and cerr):
                failures.append(f"{flag}: expected both runs refused, got {berr!r} / {cerr!r}")
            elif berr == cerr:
                failures.append(f"{flag}: the same error with and without it: {cerr[-300:]}")
            else:
                print(f"  {flag}: changes the error ({cerr.splitlines()[-1][:100]})")
            continue
        if berr:
            failures.append(f"{flag}: the baseline run failed: {berr[-300:]}")
        elif expect in ("error", "cuda-error") or (expect == "differs-or-error" and cerr):
            if not cerr:
                failures.append(f"{flag}: accepted, expected an error")
            else:
                print(f"  {flag}: refused ({cerr.splitlines()[-1][:100]})")
        elif cerr:
            failures.append(f"{flag}: the run with it failed: {cerr[-300:]}")
        elif b == c:
            failures.append(f"{flag}: accepted and changed nothing ({' '.join(command_line(model, dict(changed)))})")
        else:
            what = "outputs" if b["outputs"] != c["outputs"] else "stats " + ", ".join(
                k for k in c["stats"] if b["stats"].get(k) != c["stats"][k])
            print(f"  {flag}: changes {what}")
    if failures:
        raise AssertionError("\n    " + "\n    ".join(failures))


def main():
    model, why = U.shared_model("stories260K-hf")
    if why:
        print(f"SKIP: {why}")
        return U.SKIP
    with open(os.path.join(SOURCE, "README.md")) as f:
        engine, sampling = documented_flags(f.read())
    tmp = U.make_tmpdir("doc-flags-")
    r = U.Runner()
    try:
        r.case("every documented flag is accepted by the commands the README names",
               check_accepted, engine, sampling)
        first = greedy_first_output(model)
        eos_model = model_with_eos(model, tmp, first["token_ids"][2])
        nan_model = model_with_nan(model, tmp)
        _, cuda_err = run(model, {"--device": "cuda", "--max-tokens": 1})
        table = cases(model, eos_model, nan_model, first, tmp)
        r.case("every documented flag changes the run (or is refused as documented)",
               check_effects, engine + sampling, table, cuda_err is None)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return r.exit_code()


if __name__ == "__main__":
    sys.exit(main())
