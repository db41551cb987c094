"""Comparison rules of gpu-check (numpy only, so the CPU machine's tests can run them).

Two runs of the same model on the same tokens (CPU vs CUDA, nanovllm vs transformers, CUDA
graphs vs eager) cannot agree bit for bit: the CUDA backend computes in bf16, the others in f32
or with other summation orders. The rules:

* logits [T, V]: max |test - ref| / max |ref| <= rel_tol (2e-2 for bf16 activations), no
  non-finite value anywhere;
* top-1 at every position: equal, or a near tie in the reference: the reference's own logit of
  the token the test picked is within tie_eps of the reference's maximum
  (gap = ref[argmax ref] - ref[argmax test] <= tie_eps; this bounds the reference's top-2 margin
  too). tie_eps is stated up front, never derived from the disagreement: by default
  tie_frac * max |ref|, i.e. the size of the error the tolerance allows;
* greedy generations: equal tokens up to the first divergence; at the divergence the reference's
  top-2 logprob margin (from --logprobs) must be <= tie_eps (a near tie flipped by rounding).
  After it the contexts differ, so nothing later is compared.
"""
import numpy as np


def compare_logits(test, ref, rel_tol=2e-2, tie_frac=1e-2, tie_eps=None):
    """Returns a dict: ok, max_rel_err, rows, top1_agree, ties (explained disagreements) and
    unexplained (list of {row, gap, ref_top1, test_top1}), and the tie_eps used."""
    test = np.asarray(test, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    if test.shape != ref.shape or test.ndim != 2:
        return {"ok": False, "error": f"shape mismatch: test {test.shape} vs ref {ref.shape}"}
    finite = bool(np.isfinite(test).all() and np.isfinite(ref).all())
    if not finite:
        return {"ok": False, "error": "non-finite logits",
                "test_nonfinite": int((~np.isfinite(test)).sum()),
                "ref_nonfinite": int((~np.isfinite(ref)).sum())}
    scale = float(np.abs(ref).max())
    max_rel = float(np.abs(test - ref).max() / scale) if scale > 0 else float(np.abs(test).max())
    eps = tie_frac * scale if tie_eps is None else float(tie_eps)
    rows = test.shape[0]
    t1_test = test.argmax(axis=1)
    t1_ref = ref.argmax(axis=1)
    r = np.arange(rows)
    gap = ref[r, t1_ref] - ref[r, t1_test]
    top2 = np.sort(ref, axis=1)[:, -2:] if ref.shape[1] >= 2 else np.zeros((rows, 2))
    margin2 = top2[:, 1] - top2[:, 0]
    disagree = np.nonzero(t1_test != t1_ref)[0]
    ties, unexplained = [], []
    for i in disagree:
        item = {"row": int(i), "gap": float(gap[i]), "ref_top2_margin": float(margin2[i]),
                "ref_top1": int(t1_ref[i]), "test_top1": int(t1_test[i])}
        (ties if gap[i] <= eps else unexplained).append(item)
    return {
        "ok": max_rel <= rel_tol and not unexplained,
        "max_rel_err": max_rel, "rel_tol": rel_tol, "tie_eps": eps, "rows": rows,
        "top1_agree": int(rows - len(disagree)), "ties": ties, "unexplained": unexplained,
        "min_ref_top2_margin": float(margin2.min()) if rows else 0.0,
    }


def compare_greedy(ref_outputs, test_outputs, tie_eps):
    """ref_outputs / test_outputs: the `outputs` lists of `nanovllm generate --json --logprobs 2`
    (or any dicts with token_ids and logprobs[i].top[k].logprob). Per sequence: the first index
    where the tokens differ and whether the reference's top-2 margin there is <= tie_eps."""
    if len(ref_outputs) != len(test_outputs):
        return {"ok": False, "error": f"{len(ref_outputs)} vs {len(test_outputs)} sequences"}
    seqs, ok = [], True
    for k, (a, b) in enumerate(zip(ref_outputs, test_outputs)):
        ta, tb = list(a["token_ids"]), list(b["token_ids"])
        n = min(len(ta), len(tb))
        div = next((i for i in range(n) if ta[i] != tb[i]), None)
        item = {"seq": k, "tokens": n, "same_prefix": n if div is None else div}
        if div is None:
            item["ok"] = len(ta) == len(tb)
            if not item["ok"]:
                item["error"] = f"lengths differ ({len(ta)} vs {len(tb)}) with no token divergence"
        else:
            lp = a.get("logprobs") or []
            top = lp[div]["top"] if div < len(lp) else []
            if len(top) >= 2:
                margin = float(top[0]["logprob"]) - float(top[1]["logprob"])
                item["ref_top2_margin"] = margin
                item["ok"] = margin <= tie_eps
            else:
                item["ok"] = False
                item["error"] = "no top-2 logprobs at the divergence (run with --logprobs 2)"
        ok = ok and item["ok"]
        seqs.append(item)
    return {"ok": ok, "tie_eps": tie_eps, "sequences": seqs,
            "identical": sum(1 for s in seqs if s["same_prefix"] == s["tokens"] and s["ok"])}


def summary_line(name, res):
    """One human-readable line for a compare_logits / compare_greedy result."""
    if "error" in res:
        return f"{name}: FAIL ({res['error']})"
    status = "ok" if res["ok"] else "FAIL"
    if "max_rel_err" in res:
        return (f"{name}: {status}: max rel err {res['max_rel_err']:.2e} (tol {res['rel_tol']:.0e}), "
                f"top-1 {res['top1_agree']}/{res['rows']}, near ties {len(res['ties'])}, "
                f"unexplained {len(res['unexplained'])} (tie eps {res['tie_eps']:.3g})")
    div = [s for s in res["sequences"] if s["same_prefix"] < s["tokens"]]
    return (f"{name}: {status}: {res['identical']}/{len(res['sequences'])} sequences identical, "
            f"{len(div)} diverge at near ties <= {res['tie_eps']:.3g}"
            + ("" if res["ok"] else f"; bad: {[s for s in res['sequences'] if not s['ok']]}"))
