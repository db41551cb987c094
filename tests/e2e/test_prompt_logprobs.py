"""prompt_logprobs (issue 31 item 6): `nanovllm serve` on a random tiny f32 Qwen3 against the numpy
reference (tests/reference/ref_model.py: log_softmax of the logits at every prompt position).
Each prompt token's logprob and rank, and the top-N ids, match; the same with chunked prefill
(--policy mixed, a 16-token budget) and for a repeated prompt (such requests reuse no prefix-cache
block, so the second answer is computed, not read back); chat puts them at the top level; with
stream it is a 400."""
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))

import numpy as np  # noqa: E402

import server_util as su  # noqa: E402
from ref_model import RefModel  # noqa: E402

TOL = 1e-4
TOP_N = 3


def check(cond, msg):
    if not cond:
        raise AssertionError(msg)


def compare(ref, ids, got):
    """got: the response's prompt_logprobs list. Returns the largest |logprob difference|."""
    check(len(got) == len(ids) and got[0] is None, f"{len(got)} entries for {len(ids)} prompt tokens")
    logits = ref.forward(ids)  # [T, V] float64
    lse = np.log(np.exp(logits - logits.max(axis=1, keepdims=True)).sum(axis=1)) + logits.max(axis=1)
    worst = 0.0
    for p in range(1, len(ids)):
        row, lp = logits[p - 1], logits[p - 1] - lse[p - 1]
        entry = got[p]
        tok = str(ids[p])
        check(tok in entry, f"position {p}: the prompt token {tok} is missing")
        worst = max(worst, abs(entry[tok]["logprob"] - lp[ids[p]]))
        rank = int((row > row[ids[p]]).sum()) + 1
        check(entry[tok]["rank"] == rank, f"position {p}: rank {entry[tok]['rank']} vs {rank}")
        order = np.argsort(-row)
        top = [int(t) for t in order[:TOP_N]]
        if row[order[TOP_N - 1]] - row[order[TOP_N]] > 1e-4:  # a clear top-N set
            check(set(top) <= set(int(k) for k in entry), f"position {p}: top {top} vs {list(entry)}")
    return worst


def main():
    try:
        binary = su.nanovllm_bin()
    except RuntimeError as e:
        print(f"SKIP: {e}")
        return su.SKIP
    tmp = su.make_tmpdir("prompt_lp_")
    try:
        model = os.path.join(tmp, "m")
        subprocess.run([binary, "make-model", "--arch", "qwen3", "--preset", "tiny", "--dtype", "f32", "--seed", "9",
                        "--out", model], check=True, capture_output=True, timeout=300)
        ref = RefModel.from_dir(model)
        rng = np.random.default_rng(4)
        prompts = [[int(x) for x in rng.integers(0, 150000, size=n)] for n in (2, 17, 40)]
        for extra in ([], ["--policy", "mixed", "--max-num-batched-tokens", "16"]):
            with su.Server(["--model", model, "--threads", "2"] + extra, os.path.join(tmp, "s.log")) as srv:
                worst = 0.0
                for ids in prompts + [prompts[2]]:  # the repeat would hit the prefix cache
                    st, _, r = srv.post_json("/v1/completions", {"prompt": ids, "max_tokens": 2,
                                                                 "prompt_logprobs": TOP_N})
                    check(st == 200, r)
                    worst = max(worst, compare(ref, ids, r["choices"][0]["prompt_logprobs"]))
                check(worst <= TOL, f"max |logprob - reference| = {worst:.2e}")
                st, _, r = srv.post_json("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}],
                                                                   "max_tokens": 1, "prompt_logprobs": 0})
                check(st == 200 and r["prompt_logprobs"][0] is None and len(r["prompt_logprobs"]) > 3, r)
                st, _, r = srv.post_json("/v1/completions", {"prompt": "x", "prompt_logprobs": 1, "stream": True})
                check(st == 400 and r["error"]["param"] == "prompt_logprobs", r)
                st, _, r = srv.post_json("/v1/completions", {"prompt": "x", "prompt_logprobs": 21})
                check(st == 400 and r["error"]["param"] == "prompt_logprobs", r)
                print(f"ok: {' '.join(extra) or 'prefill-first'}: max |logprob - reference| = {worst:.1e}, "
                      f"ranks and top-{TOP_N} match")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
