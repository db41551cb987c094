"""GPU machine: what of docs/determinism.md's contract holds on the CUDA backend, measured.

Per model, 8 prompts of different lengths, greedy and seeded-sampled (every other prompt:
temperature 0.8, its own seed), 24 tokens, logprobs 2, through `nanovllm generate --json`:
  same_config   the batch of 8 run twice: tokens and logprobs must be bitwise equal (the step
                fails otherwise: reruns of one configuration must repeat on any backend)
  reversed      the same 8 in reverse order (another batch layout)
  alone         prompts 0 and 5 each by itself (batch 1: other GEMM shapes, other split-K)
  mixed         --policy mixed --max-num-batched-tokens 32 (chunked prefills)
For the last three: identical sequences, the first position where tokens differ, and the largest
|logprob difference| over the common prefix. Those are figures on CUDA (cuBLASLt picks algorithms
by row count; the decode split count follows the batch), and must be exactly zero on the CPU
backend (--expect-invariant, the CPU machine's self-test of this script).

    determinism.py NANOVLLM_BIN --json-out FILE [--device cuda|cpu] [--expect-invariant] MODEL_DIR...
Exit 0 when every model's same_config runs repeat (and, with --expect-invariant, every
variant equals the batch), 1 otherwise.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nv_cli  # noqa: E402

TOKENS = 24


def prompts_for(vocab):
    return [nv_cli.random_prompt(vocab, n, seed=100 + n) for n in (3, 9, 17, 30, 41, 56, 64, 75)]


def run(nv, model, device, prompts, indices, extra=()):
    """{index: (token_ids, logprobs)} of the prompts at `indices`, generated in one batch."""
    args = ["generate", "--device", device, "--model", model, "--max-tokens", TOKENS, "--ignore-eos",
            "--logprobs", 2, "--json"] + list(extra)
    # The CLI's sampling flags apply to all its prompts: the greedy ones (even indices) and the
    # sampled ones (odd) run as two calls, each in the order `indices` gives.
    out = {}
    for sampled in (False, True):
        chosen = [i for i in indices if (i % 2 == 1) == sampled]
        if not chosen:
            continue
        a = list(args)
        a += ["--temperature", 0.8, "--seed", 7] if sampled else ["--temperature", 0]
        for i in chosen:
            a += ["--prompt-ids", ",".join(map(str, prompts[i]))]
        j = json.loads(nv_cli.run(nv, a))
        for i, o in zip(chosen, j["outputs"]):
            out[i] = (o["token_ids"], [lp["logprob"] for lp in o["logprobs"]])
    return out


def diff(ref, got):
    """{identical, first_diff (position or -1), max_logprob_diff} over the indices of `got`."""
    identical, first, worst = 0, -1, 0.0
    for i, (toks, lps) in got.items():
        rt, rl = ref[i]
        n = next((p for p, (a, b) in enumerate(zip(rt, toks)) if a != b), min(len(rt), len(toks)))
        if n == len(rt) == len(toks):
            identical += 1
        else:
            first = n if first < 0 else min(first, n)
        for p in range(n):
            worst = max(worst, abs(rl[p] - lps[p]))
    return {"sequences": len(got), "identical": identical, "first_diff": first, "max_logprob_diff": worst}


def check_model(nv, model, device, expect_invariant):
    vocab = nv_cli.model_config(model)["vocab_size"]
    prompts = prompts_for(vocab)
    every = list(range(len(prompts)))
    base = run(nv, model, device, prompts, every)
    res = {"same_config": diff(base, run(nv, model, device, prompts, every)),
           "reversed": diff(base, run(nv, model, device, prompts, every[::-1])),
           "alone": {},
           "mixed": diff(base, run(nv, model, device, prompts, every,
                                   ["--policy", "mixed", "--max-num-batched-tokens", 32]))}
    alone = {}
    for i in (0, 5):
        alone.update(run(nv, model, device, prompts, [i]))
    res["alone"] = diff(base, alone)
    same = res["same_config"]
    res["ok"] = same["identical"] == same["sequences"] and same["max_logprob_diff"] == 0.0
    if expect_invariant:
        res["ok"] = res["ok"] and all(res[k]["identical"] == res[k]["sequences"] and
                                      res[k]["max_logprob_diff"] == 0.0 for k in ("reversed", "alone", "mixed"))
    return res


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("nv")
    ap.add_argument("models", nargs="+")
    ap.add_argument("--json-out", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--expect-invariant", action="store_true")
    a = ap.parse_args(argv)

    def report(name, r):
        for k in ("same_config", "reversed", "alone", "mixed"):
            d = r[k]
            print(f"{name} {k}: {d['identical']}/{d['sequences']} identical, first diff at "
                  f"{d['first_diff']}, max |dlogprob| {d['max_logprob_diff']:.3g}")
        print(f"{name}: {'PASS' if r['ok'] else 'FAIL'}")

    results = nv_cli.for_each_model(a.models, lambda m: check_model(a.nv, m, a.device, a.expect_invariant),
                                    report)
    nv_cli.write_json(a.json_out, {"device": a.device, "models": results})
    return 0 if all(r["ok"] for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
