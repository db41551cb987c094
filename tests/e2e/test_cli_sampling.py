"""`nanovllm generate` sampling flags end to end: greedy decoding with --repetition-penalty,
--frequency-penalty and --presence-penalty against a replay in f64 over the raw logits of the
same sequence (`nanovllm logits`), min-tokens, and the clear errors, naming the flag, of
out-of-range values (tensor-parallel errors: test_tensor_parallel.py).
Uses stories260K from the shared data when present, else a tiny random model."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))

import numpy as np  # noqa: E402

import e2e_util as U  # noqa: E402

N = 40


def generate(model, ids, extra):
    out = U.run_cli(["generate", "--model", model, "--prompt-ids", ",".join(map(str, ids)),
                     "--max-tokens", N, "--temperature", 0, "--ignore-eos", "--json", "--threads", 2]
                    + extra)
    return [int(t) for t in json.loads(out)["outputs"][0]["token_ids"]]


def penalized(row, prompt, generated, rep, freq, pres):
    """vLLM's penalties in f64 on one raw logits row (repetition over prompt + output)."""
    z = row.astype(np.float64).copy()
    seen = set(prompt) | set(generated)
    for t in seen:
        z[t] = z[t] / rep if z[t] > 0 else z[t] * rep
    for t in set(generated):
        z[t] -= freq * generated.count(t) + pres
    return z


def case_penalties_match_replay(model, tmp):
    prompt = [1, 5, 9, 5, 30, 31, 32]
    rep, freq, pres = 1.3, 0.4, 0.3
    plain = generate(model, prompt, [])
    got = generate(model, prompt, ["--repetition-penalty", rep, "--frequency-penalty", freq,
                                   "--presence-penalty", pres])
    if got == plain:
        raise AssertionError(f"penalties changed nothing: {got}")
    logits = U.cli_logits(model, prompt + got, os.path.join(tmp, "pen.npy"))
    near_ties = 0
    for k, tok in enumerate(got):
        z = penalized(logits[len(prompt) - 1 + k], prompt, got[:k], rep, freq, pres)
        ref = int(np.argmax(z))
        if tok != ref:
            gap = z[ref] - z[tok]
            # prefill (here) vs decode (generate) logits differ by float rounding only
            if gap > 1e-3 * max(1.0, abs(z[ref])):
                raise AssertionError(f"step {k}: generated {tok}, replay picks {ref} (gap {gap:.4g})")
            near_ties += 1
    if near_ties > 2:
        raise AssertionError(f"{near_ties} near-tie steps: suspicious")
    print(f"  {len(got)} penalized greedy tokens match the replay ({len(set(got))} distinct; "
          f"unpenalized: {len(set(plain))} distinct)")


def case_min_tokens(model):
    # min_tokens suppresses EOS until reached: with --min-tokens N and no --ignore-eos the
    # output has N tokens unless the model hits max_tokens.
    out = U.run_cli(["generate", "--model", model, "--prompt-ids", "1", "--max-tokens", 8,
                     "--min-tokens", 8, "--temperature", 0, "--json", "--threads", 2])
    toks = json.loads(out)["outputs"][0]["token_ids"]
    if len(toks) != 8:
        raise AssertionError(f"--min-tokens 8 --max-tokens 8 gave {len(toks)} tokens")


def expect_failure(args, message):
    cmd = [U.nanovllm_bin()] + [str(a) for a in args]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if p.returncode == 0:
        raise AssertionError(f"`{' '.join(cmd)}` succeeded; expected an error with {message!r}")
    if message not in p.stderr:
        raise AssertionError(f"`{' '.join(cmd)}` exited {p.returncode} without {message!r}:\n"
                             f"{p.stderr[-1000:]}")


def case_bad_flags(model):
    base = ["generate", "--model", model, "--prompt-ids", "1,2", "--max-tokens", 2]
    expect_failure(base + ["--repetition-penalty", 0], "--repetition-penalty must be finite and > 0")
    expect_failure(base + ["--presence-penalty", 2.5], "--presence-penalty must be in [-2, 2], got 2.5")
    expect_failure(base + ["--frequency-penalty", -3], "--frequency-penalty must be in [-2, 2]")
    # Every flag's rule comes from its field's row; the pairs are checked after parsing.
    expect_failure(base + ["--top-p", 0], "--top-p must be in (0, 1], got 0")
    expect_failure(base + ["--stop", ""], "--stop strings must be non-empty")
    expect_failure(base + ["--min-tokens", 5], "min_tokens must be in [0, max_tokens=2], got 5")
    expect_failure(base + ["--kv-cache-dtype", "f16"], "--kv-cache-dtype must be auto, f32, bf16 or int8, got 'f16'")
    expect_failure(base + ["--block-size", 24], "--block-size must be a positive multiple of 16, got 24")


def main():
    try:
        U.nanovllm_bin()
    except RuntimeError as e:
        print(f"SKIP: {e}")
        return U.SKIP
    tmp = U.make_tmpdir("cli-sampling-")
    model = U.stories_or_tiny(tmp)
    print(f"model: {model}")
    run = U.Runner()
    try:
        run.case("penalties: generated tokens == f64 replay over raw logits", case_penalties_match_replay,
                 model, tmp)
        run.case("min-tokens suppresses EOS", case_min_tokens, model)
        run.case("out-of-range penalty flags are clear errors", case_bad_flags, model)
    finally:
        U.remove_tree(tmp)
    return run.exit_code()


if __name__ == "__main__":
    sys.exit(main())
