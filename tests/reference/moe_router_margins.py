"""How close a MoE model's routing is to a flip, and what bf16 rounding of the router's input does.

For a prompt, the f64 reference (ref_model.py) records, at every MoE layer and position, the gap
between the router logits of the k-th and (k+1)-th experts (the margin of the top-k choice). It
then reruns the forward with only the router's input rounded to bf16 (what a backend with bf16
activations feeds the router) and reports which (layer, position) choices flipped and how far the
logits moved, by the metric of tests/gpu/logits_compare.py (max |d| / max |ref|).

A CUDA run (bf16 activations) of a model with many experts and flat router logits can exceed the
2e-2 logits tolerance against the CPU (f32) while every top-1 token agrees: if rounding the router
input alone flips choices and moves the logits by as much, the difference is a routing near-tie,
not a kernel error.

    moe_router_margins.py MODEL_DIR [--prompt-len 64] [--seed 1] [--json]
The prompt is tests/gpu/nv_cli.random_prompt(vocab, prompt_len, seed) (cpu_vs_cuda.py's).
"""
import argparse
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "gpu"))
from ref_model import RefModel  # noqa: E402
import nv_cli  # noqa: E402


def to_bf16(a):
    """Round float64 values to bfloat16 (nearest even), returned as float64."""
    b = np.asarray(a, dtype=np.float32).view(np.uint32)
    b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
    return b.astype(np.uint32).view(np.float32).astype(np.float64)


class RecordingModel(RefModel):
    """RefModel whose MoE routers record their choices (and can see a bf16-rounded input)."""

    def __init__(self, config, weights, round_router_input=False):
        super().__init__(config, weights)
        self.round_router_input = round_router_input
        self.records = []  # per MoE call: {"margins": [T], "top": [T][k]}

    def _router_logits(self, x, L):
        xr = to_bf16(x) if self.round_router_input else x
        logits = xr @ L["router"].T  # [T, E]; RefModel._moe routes on them, experts on exact x
        order = np.argsort(-logits, axis=1, kind="stable")
        k = self.c.num_experts_per_tok
        srt = np.take_along_axis(logits, order, axis=1)
        margins = srt[:, k - 1] - srt[:, k] if k < self.c.num_experts else np.full(x.shape[0], np.inf)
        self.records.append({"margins": margins, "top": [sorted(r[:k].tolist()) for r in order]})
        return logits


def analyze(model_dir, prompt_len=64, seed=1):
    """The routing margins and the effect of a bf16 router input (a dict, see main)."""
    base = RefModel.from_dir(model_dir)
    ids = nv_cli.random_prompt(base.c.vocab_size, prompt_len, seed)
    exact = RecordingModel(base.c, base.w)
    ref = exact.forward(ids)
    rounded = RecordingModel(base.c, base.w, round_router_input=True)
    test = rounded.forward(ids)
    flips = []
    for layer, (e, r) in enumerate(zip(exact.records, rounded.records)):
        for t, (te, tr) in enumerate(zip(e["top"], r["top"])):
            if te != tr:
                flips.append({"moe_layer": layer, "position": t, "margin": float(e["margins"][t]),
                              "exact": te, "rounded": tr})
    margins = np.concatenate([rec["margins"] for rec in exact.records])
    scale = float(np.abs(ref).max())
    return {
        "model": os.path.basename(os.path.normpath(model_dir)),
        "top_k": base.c.num_experts_per_tok,
        "moe_calls": len(exact.records),
        "choices": int(margins.size),
        "min_margin": float(margins.min()),
        "median_margin": float(np.median(margins)),
        "choices_below_1e-2": int((margins < 1e-2).sum()),
        "flips_from_bf16_router_input": len(flips),
        "flips": flips[:20],
        "max_rel_err_from_flips": float(np.abs(test - ref).max() / scale),
        "top1_agree": int((test.argmax(1) == ref.argmax(1)).sum()),
        "rows": int(ref.shape[0]),
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--prompt-len", type=int, default=64)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    res = analyze(a.model, a.prompt_len, a.seed)
    flips = res["flips"]
    if a.json:
        print(json.dumps(res, indent=1))
    else:
        print(f"{res['model']}: {res['choices']} top-{res['top_k']} choices over "
              f"{res['moe_calls']} MoE layers; router margin min {res['min_margin']:.2e}, median "
              f"{res['median_margin']:.2e}, {res['choices_below_1e-2']} below 1e-2")
        print(f"router input rounded to bf16: {res['flips_from_bf16_router_input']} choices flip; "
              f"logits max rel err {res['max_rel_err_from_flips']:.2e}, top-1 "
              f"{res['top1_agree']}/{res['rows']}")
        for f in flips[:10]:
            print(f"  layer {f['moe_layer']} position {f['position']}: margin {f['margin']:.2e}, "
                  f"experts {f['exact']} -> {f['rounded']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
