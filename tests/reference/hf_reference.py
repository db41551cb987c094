#!/usr/bin/python3
"""CLI of the numpy reference:
  hf_reference.py --model DIR --prompt-ids 1,2,3 --logits-out FILE.npy   float32 [T, V] logits
  hf_reference.py --model DIR --prompt-ids 1,2,3 --greedy N --json       greedy continuation
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

from ref_model import RefModel  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="HF model directory (config.json + safetensors)")
    ap.add_argument("--prompt-ids", required=True, help="comma-separated token ids")
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--logits-out", help="write float32 .npy [T, vocab] of every prompt position")
    mode.add_argument("--greedy", type=int, metavar="N", help="generate N tokens greedily")
    ap.add_argument("--json", action="store_true", help="print the greedy result as JSON")
    a = ap.parse_args(argv)
    try:
        ids = [int(s) for s in a.prompt_ids.split(",") if s.strip() != ""]
    except ValueError:
        ap.error(f"bad --prompt-ids {a.prompt_ids!r}")
    if not ids:
        ap.error("--prompt-ids is empty")
    model = RefModel.from_dir(a.model)
    if a.logits_out:
        np.save(a.logits_out, model.forward(ids).astype(np.float32))
        return 0
    tokens, gaps = model.greedy(ids, a.greedy)
    if a.json:
        print(json.dumps({"token_ids": tokens, "top2_gaps": gaps}))
    else:
        print(",".join(str(t) for t in tokens))
    return 0


if __name__ == "__main__":
    sys.exit(main())
