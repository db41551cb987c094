#!/usr/bin/env python3
"""Speculative decoding (--speculative ngram, or draft with --draft) against plain decoding, same model, prompts and
flags: decode tokens/s (decode_tokens / decode_seconds of `nanovllm generate --json`), the
acceptance rate and mean accepted length, steps, and whether the outputs are identical (they must
be: speculation is exact). Rounds alternate plain / spec so drift hits both; medians reported.

Workloads (batch 1 unless --batch):
  loop          random qwen3-0.6b-shape model (bf16), greedy: the random model's own repetition
  stories       stories260K, greedy from "Once upon a time"
  stories-edit  stories260K, an editing-style prompt: a story followed by its own first sentence,
                so the continuation repeats prompt text
  stories-hot   stories260K sampled at temperature 1.2: drafts mostly rejected (the cost side)
  loop-hot      the random model sampled at temperature 1.0 after a repetitive prompt (it is so
                peaked that this still loops)
  coin-kN       the random model sampled at temperature 50 among its top N tokens (any N; measured:
                2, 8, 64, 4096): its loops break at random, so acceptance falls from ~90 % (2)
                to ~40 % (8), ~12 % (64) and ~0 (4096): the cost side on a model whose weights
                dominate the step

  bench/spec_bench.py --nanovllm build/nanovllm --workloads loop,stories --rounds 3 [--batch 1,4,16]

Draft model (--speculative draft): --draft DIR, or --draft layers:N for the workload's own model
cut to its first N layers (embeddings, final norm and LM head kept; written once next to it), a
draft that shares the target's embeddings as a small distilled model would.
  bench/spec_bench.py --workloads loop,coin-k2 --draft layers:2 --rounds 3
"""
import argparse
import json
import os
import random
import shutil
import statistics
import struct
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STORIES = os.path.join(ROOT, "..", "shared", "data", "models", "stories260K-hf")
RANDOM_06B = os.path.join(ROOT, ".cache", "peer", "models", "qwen3-0.6b")


def truncated_model(src, layers):
    """src's first `layers` decoder layers as a model folder beside it (written once): the
    safetensors files are rewritten with those tensors only, config.json gets num_hidden_layers."""
    dst = f"{src.rstrip('/')}-first{layers}"
    if os.path.exists(os.path.join(dst, "config.json")):
        return dst
    os.makedirs(dst, exist_ok=True)
    for f in os.listdir(src):
        if not f.endswith(".safetensors") and os.path.isfile(os.path.join(src, f)) and f != "model.safetensors.index.json":
            shutil.copy(os.path.join(src, f), dst)
    with open(os.path.join(dst, "config.json")) as fh:
        cfg = json.load(fh)
    cfg["num_hidden_layers"] = layers
    with open(os.path.join(dst, "config.json"), "w") as fh:
        json.dump(cfg, fh, indent=2)
    keep = lambda name: not name.startswith("model.layers.") or int(name.split(".")[2]) < layers  # noqa: E731
    tensors = {}
    for f in sorted(os.listdir(src)):
        if not f.endswith(".safetensors"):
            continue
        with open(os.path.join(src, f), "rb") as fh:
            n = struct.unpack("<Q", fh.read(8))[0]
            header = json.loads(fh.read(n))
            base = 8 + n
            for name, info in header.items():
                if name == "__metadata__" or not keep(name):
                    continue
                b, e = info["data_offsets"]
                fh.seek(base + b)
                tensors[name] = (info["dtype"], info["shape"], fh.read(e - b))
    header, off = {}, 0
    for name, (dt, shape, data) in tensors.items():
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(data)]}
        off += len(data)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(os.path.join(dst, "model.safetensors"), "wb") as fh:
        fh.write(struct.pack("<Q", len(h)) + h)
        for _, _, data in tensors.values():
            fh.write(data)
    return dst


def generate(nv, model, prompts, opts, spec):
    args = [nv, "generate", "--model", model, "--json", "--device", "cpu"]
    for p in prompts:
        args += ["--prompt-ids", ",".join(map(str, p))] if isinstance(p, list) else ["--prompt", p]
    for k, v in opts.items():
        args += [k] if v is True else [k, str(v)]
    if spec:
        args += spec if "--speculative" in spec else ["--speculative", "ngram"] + spec
    out = subprocess.run(args, capture_output=True, text=True, timeout=3600)
    if out.returncode != 0:
        raise SystemExit(f"generate failed: {' '.join(args)}\n{out.stderr[-2000:]}")
    return json.loads(out.stdout)


def workload(name, nv, batch):
    rng = random.Random(0)
    if name.startswith("loop") or name.startswith("coin"):
        if not os.path.exists(os.path.join(RANDOM_06B, "config.json")):
            subprocess.run([nv, "make-model", "--arch", "qwen3", "--preset", "qwen3-0.6b", "--dtype", "bf16",
                            "--seed", "0", "--out", RANDOM_06B], check=True)
        if name.startswith("coin-k"):
            prompts = [[1, 2, 3, 4, 5, 6, 7, 8] * 2 for _ in range(batch)]
            return RANDOM_06B, prompts, {"--temperature": 50, "--top-k": int(name[6:]), "--seed": 1,
                                         "--max-tokens": 128, "--ignore-eos": True}
        if name == "loop":
            prompts = [[rng.randrange(3, 100000) for _ in range(16)] for _ in range(batch)]
            return RANDOM_06B, prompts, {"--temperature": 0, "--max-tokens": 128, "--ignore-eos": True}
        pattern = [rng.randrange(3, 100000) for _ in range(8)]
        prompts = [pattern * 8 for _ in range(batch)]
        return RANDOM_06B, prompts, {"--temperature": 1.0, "--seed": 1, "--max-tokens": 128, "--ignore-eos": True}
    if not os.path.exists(os.path.join(STORIES, "config.json")):
        raise SystemExit(f"{STORIES} is absent (shared data)")
    starts = ["Once upon a time", "Lily had a red ball", "The sun was hot", "Tom and his dog",
              "One day, a little bird"]
    prompts = [starts[i % len(starts)] for i in range(batch)]
    if name == "stories":
        return STORIES, prompts, {"--temperature": 0, "--max-tokens": 256, "--ignore-eos": True}
    if name == "stories-hot":
        return STORIES, prompts, {"--temperature": 1.2, "--seed": 3, "--max-tokens": 256, "--ignore-eos": True}
    if name == "stories-edit":
        base = generate(nv, STORIES, prompts, {"--temperature": 0.8, "--seed": 5, "--max-tokens": 200}, None)
        edited = []
        for p, o in zip(prompts, base["outputs"]):
            story = p + o["text"]
            first = story.split(".")[0] + "."
            edited.append(story + "\n\n" + first)
        return STORIES, edited, {"--temperature": 0, "--max-tokens": 200}
    raise SystemExit(f"unknown workload {name}")


def summary(j):
    s = j["stats"]
    toks = s["decode_tokens"]
    return {"decode_tok_s": toks / s["decode_seconds"] if s["decode_seconds"] > 0 else 0.0,
            "steps": s["steps"], "acceptance": s["spec_acceptance_rate"],
            "mean_len": s["spec_mean_accepted_length"], "drafted": s["spec_draft_tokens"],
            "tokens": [o["token_ids"] for o in j["outputs"]]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nanovllm", default=os.path.join(ROOT, "build", "nanovllm"))
    ap.add_argument("--workloads", default="loop,stories,stories-edit,stories-hot,loop-hot")
    ap.add_argument("--batch", default="1", help="comma-separated batch sizes")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--k", type=int, default=4, help="--num-speculative-tokens")
    ap.add_argument("--max-batch", type=int, default=0, help="--speculative-max-batch (0: default)")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--draft", default="", help="--speculative draft with this model (DIR or layers:N)")
    ap.add_argument("--quantization", default="", help="--quantization for both runs")
    ap.add_argument("--max-tokens", type=int, default=0, help="override the workload's --max-tokens")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    rows = []
    for name in a.workloads.split(","):
        for batch in map(int, a.batch.split(",")):
            model, prompts, opts = workload(name, a.nanovllm, batch)
            if a.threads:
                opts["--threads"] = a.threads
            if a.quantization:
                opts["--quantization"] = a.quantization
            if a.max_tokens:
                opts["--max-tokens"] = a.max_tokens
            spec = ["--num-speculative-tokens", str(a.k)]
            if a.draft:
                draft = truncated_model(model, int(a.draft[7:])) if a.draft.startswith("layers:") else a.draft
                spec = ["--speculative", "draft", "--draft-model", draft] + spec
            if a.max_batch:
                spec += ["--speculative-max-batch", str(a.max_batch)]
            plain, sped = [], []
            for _ in range(a.rounds):
                plain.append(summary(generate(a.nanovllm, model, prompts, opts, None)))
                sped.append(summary(generate(a.nanovllm, model, prompts, opts, spec)))
            identical = all(p["tokens"] == s["tokens"] for p, s in zip(plain, sped))
            pm = statistics.median(r["decode_tok_s"] for r in plain)
            sm = statistics.median(r["decode_tok_s"] for r in sped)
            ratios = [s["decode_tok_s"] / p["decode_tok_s"] for p, s in zip(plain, sped)]
            row = {"workload": name, "batch": batch, "plain_decode_tok_s": round(pm, 2),
                   "spec_decode_tok_s": round(sm, 2), "speedup": round(statistics.median(ratios), 3),
                   "speedup_min": round(min(ratios), 3), "speedup_max": round(max(ratios), 3),
                   "acceptance": round(sped[0]["acceptance"], 3), "mean_accepted_length": round(sped[0]["mean_len"], 2),
                   "drafted": sped[0]["drafted"], "steps_plain": plain[0]["steps"], "steps_spec": sped[0]["steps"],
                   "identical": identical}
            rows.append(row)
            print(json.dumps(row) if a.json else
                  f"{name:13s} B={batch:<3d} plain {pm:8.1f} tok/s  spec {sm:8.1f} tok/s  x{row['speedup']:.2f} "
                  f"[{row['speedup_min']:.2f}-{row['speedup_max']:.2f}]  acc {row['acceptance']:.2f} "
                  f"len {row['mean_accepted_length']:.2f}  steps {row['steps_plain']}->{row['steps_spec']}  "
                  f"identical {identical}", flush=True)
            if not identical:
                print("  OUTPUTS DIFFER", file=sys.stderr)
    if any(not r["identical"] for r in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
