#!/usr/bin/python3
"""Fidelity on the same GGUF file (issue 29, item 4): nanovllm's logits vs llama.cpp's, both
reading one file, for every quantized type llama-quantize makes from an f32 GGUF.

    /usr/bin/python3 bench/peer/gguf_check.py [--models qwen3,llama,stories260K]
                                              [--types Q8_0,Q4_0,Q4_K_M,Q6_K,...] [--json OUT]

Per model: an f32 GGUF (hf_to_gguf.py; random models of the small preset, whose rows are
multiples of 256 so the K-quants apply everywhere; stories260K from ../shared/data, whose 64-wide
rows make llama-quantize fall back to 32-blocks), quantized by llama-quantize to each type.
llama.cpp's logits at every position of 4 prompts of 64 tokens come
from llama_logits.c (its C API, f32 KV cache, no flash attention), ours from `nanovllm logits
--model FILE.gguf`. Reported per file: mean and max KL(llama.cpp || nanovllm) over positions,
and top-1 agreement excluding near-ties (positions where llama.cpp's top-2 logits are within
--tie of each other). Targets: KL <= 1e-3, top-1 >= 99%. llama.cpp multiplies quantized weights
with activations it quantizes to 8 bits (Q8_0 / Q8_K); nanovllm dequantizes the weights exactly
and multiplies in f32, so the difference measured is llama.cpp's activation rounding plus
summation order. Not a test (needs the llama.cpp build)."""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import compare  # noqa: E402
import gguf_emulate  # noqa: E402

SHARED = os.path.join(compare.ROOT, "..", "shared", "data", "models", "stories260K-hf")
TYPES = "Q8_0,Q4_0,Q4_1,Q5_0,Q5_1,Q2_K,Q3_K_M,Q4_K_M,Q5_K_M,Q6_K,IQ4_NL,IQ4_XS"


def build_llama_logits(root):
    exe = os.path.join(root, "llama_logits")
    compare.run(["gcc", "-O2", "-o", exe, os.path.join(HERE, "llama_logits.c"),
                 "-I" + os.path.join(compare.LLAMA, "include"), "-I" + os.path.join(compare.LLAMA, "ggml", "include"),
                 "-L" + compare.LLAMA_BIN, "-lllama", "-lggml", "-lggml-base", "-Wl,-rpath," + compare.LLAMA_BIN])
    return exe


def f32_gguf(nanovllm, name, root):
    if name == "stories260K":
        d = SHARED
    else:
        d = os.path.join(root, name)
        compare.run([nanovllm, "make-model", "--arch", name, "--preset", "small", "--dtype", "f32", "--seed", "3",
                     "--out", d], stdout=subprocess.DEVNULL, env=dict(os.environ, NANOVLLM_SOURCE_DIR=compare.ROOT))
    path = os.path.join(root, name + "-F32.gguf")
    compare.run(["/usr/bin/python3", os.path.join(HERE, "hf_to_gguf.py"), d, path], stdout=subprocess.DEVNULL,
                env=dict(os.environ, PYTHONPATH=os.path.join(compare.LLAMA, "gguf-py")))
    return path, json.load(open(os.path.join(d, "config.json")))["vocab_size"], d


def log_softmax(x):
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def logits_pair(nanovllm, llama_logits, path, ids, vocab, root, quant):
    ref = os.path.join(root, "ref.f32")
    compare.run([llama_logits, path, ",".join(map(str, ids)), ref], stdout=subprocess.DEVNULL)
    a = np.fromfile(ref, dtype=np.float32).reshape(len(ids), -1)[:, :vocab].astype(np.float64)
    npy = os.path.join(root, "ours.npy")
    compare.run([nanovllm, "logits", "--model", path, "--prompt-ids", ",".join(map(str, ids)), "--out", npy,
                 "--quantization", quant], stdout=subprocess.DEVNULL)
    return a, np.load(npy).astype(np.float64)[:, :vocab]


def kl_rows(a, b):
    """KL(softmax a || softmax b) per row."""
    la, lb = log_softmax(a), log_softmax(b)
    return (np.exp(la) * (la - lb)).sum(axis=1)


def compare_file(nanovllm, llama_logits, path, prompts, vocab, tie, root, quant, model_dir=None):
    pairs = [logits_pair(nanovllm, llama_logits, path, ids, vocab, root, quant) for ids in prompts]
    a = np.concatenate([p[0] for p in pairs])
    b = np.concatenate([p[1] for p in pairs])
    kl = kl_rows(a, b)
    top2 = np.sort(a, axis=1)[:, -2:]
    clear = (top2[:, 1] - top2[:, 0]) > tie
    agree = (a.argmax(1) == b.argmax(1))
    r = {"kl_mean": float(kl.mean()), "kl_max": float(kl.max()),
         "top1": float(agree[clear].mean()) if clear.any() else 1.0, "positions": int(clear.sum()),
         "ties_excluded": int((~clear).sum()), "max_abs_logit_diff": float(np.abs(a - b).max())}
    if model_dir:
        # llama.cpp's activation rounding emulated in numpy (gguf_emulate.py), and the exact
        # dequantized model: if llama.cpp ~= emulation, the gap to nanovllm is that rounding.
        emu = np.concatenate([gguf_emulate.logits(path, model_dir, ids)[:, :vocab] for ids in prompts])
        ex = np.concatenate([gguf_emulate.exact_logits(path, model_dir, ids)[:, :vocab] for ids in prompts])
        kl_e = kl_rows(a, emu)
        kept = emu.argmax(1) == ex.argmax(1)  # positions where the rounding keeps the exact top-1
        r.update({"kl_llama_vs_emulation": float(kl_e.mean()),
                  "top1_llama_vs_emulation": float((a.argmax(1) == emu.argmax(1))[clear].mean()),
                  "kl_nanovllm_vs_exact": float(kl_rows(b, ex).mean()),
                  "rounding_flips": int((~kept).sum()),
                  "top1_where_rounding_keeps_top1": float(agree[clear & kept].mean()) if (clear & kept).any() else 1.0})
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="qwen3,llama,stories260K")
    ap.add_argument("--types", default=TYPES)
    ap.add_argument("--tie", type=float, default=0.01, help="top-2 logit margin below which a position is a tie")
    ap.add_argument("--nanovllm", default=os.path.join(compare.ROOT, "build", "nanovllm"))
    ap.add_argument("--quantization", default="none",
                    help="nanovllm's --quantization: none (exact dequantized f32 weights) or auto "
                         "(the int8/int4 kernels a GGUF file runs on by default)")
    ap.add_argument("--emulate", action="store_true",
                    help="also compare llama.cpp with a numpy emulation of its activation rounding "
                         "(gguf_emulate.py) and report top-1 where that rounding keeps the exact top-1")
    ap.add_argument("--json")
    a = ap.parse_args()
    compare.ensure_llama()
    rows = []
    with tempfile.TemporaryDirectory() as root:
        exe = build_llama_logits(root)
        for name in a.models.split(","):
            f32, vocab, model_dir = f32_gguf(a.nanovllm, name, root)
            rng = np.random.RandomState(11)
            prompts = [[1] + [int(i) for i in rng.randint(3, min(vocab, 20000), size=63)] for _ in range(4)]
            for t in ["F32"] + a.types.split(","):
                path = f32
                if t != "F32":
                    path = os.path.join(root, f"{name}-{t}.gguf")
                    compare.run([os.path.join(compare.LLAMA_BIN, "llama-quantize"), f32, path, t],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                r = {"model": name, "type": t, "quantization": a.quantization, **compare_file(a.nanovllm, exe, path, prompts, vocab, a.tie, root, a.quantization,
                                  model_dir if a.emulate else None)}
                r["ok"] = r["kl_mean"] <= 1e-3 and r["top1"] >= 0.99
                rows.append(r)
                print(f"{name:12s} {t:7s} KL mean {r['kl_mean']:.2e} max {r['kl_max']:.2e}  top-1 {r['top1']*100:5.1f}% "
                      f"of {r['positions']} (ties {r['ties_excluded']})  max |dlogit| {r['max_abs_logit_diff']:.3f}"
                      f"{'' if r['ok'] else '  <-- MISS'}", flush=True)
                if a.emulate:
                    print(f"{'':20s} llama.cpp vs its emulation: KL {r['kl_llama_vs_emulation']:.1e} top-1 "
                          f"{r['top1_llama_vs_emulation']*100:5.1f}%; nanovllm vs exact: KL {r['kl_nanovllm_vs_exact']:.1e}; "
                          f"rounding flips the exact top-1 at {r['rounding_flips']} positions; top-1 elsewhere "
                          f"{r['top1_where_rounding_keeps_top1']*100:5.1f}%", flush=True)
                if path != f32:
                    os.remove(path)
    if a.json:
        json.dump(rows, open(a.json, "w"), indent=1)
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
