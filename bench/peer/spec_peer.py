#!/usr/bin/env python3
"""Batch-1 n-gram speculative decoding, nanovllm against llama.cpp on the same weights and
prompt: nanovllm reads the HF checkpoint (bf16 safetensors), llama-server the bf16 GGUF converted
from it (compare.py's conversion), both greedy for the same prompt token ids.

  nanovllm:  generate --speculative none | ngram (adaptive K, K <= --k)
  llama.cpp: llama-server --spec-type none | ngram-map-k (2-token lookup, K-token drafts), one /completion
             request with the prompt's token ids; its timings give predicted tokens/s and
             draft_n / draft_n_accepted.

Decode tokens/s (nanovllm: decode_tokens / decode_seconds; llama.cpp: timings.predicted_per_second),
median of --rounds alternating runs.

  /usr/bin/python3 bench/peer/spec_peer.py --rounds 3 [--preset qwen3-0.6b] [--k 4]
"""
import argparse
import json
import os
import random
import statistics
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import compare as C  # noqa: E402


def llama_run(gguf, prompt, n, threads, spec, k):
    port = C.free_port()
    cmd = [os.path.join(C.LLAMA_BIN, "llama-server"), "-m", gguf, "-t", str(threads), "-tb", str(threads),
           "-np", "1", "-c", "2048", "--no-webui", "--host", "127.0.0.1", "--port", str(port)]
    if spec:
        # ngram-map-k with a 2-token lookup and K-token drafts: of llama.cpp's n-gram variants
        # the one that drafted most here (ngram-simple at its defaults, a 12-token lookup and
        # 48-token drafts, drafted nothing in 128 tokens; ngram-cache nothing either).
        cmd += ["--spec-type", "ngram-map-k", "--spec-ngram-map-k-size-n", "2",
                "--spec-ngram-map-k-size-m", str(k), "--spec-draft-n-max", str(k)]
    with C.running_server(cmd, port) as url:  # its log in a file: a full pipe would block it
        body = json.dumps({"prompt": prompt, "n_predict": n, "temperature": 0, "top_k": 1,
                           "ignore_eos": True, "cache_prompt": False, "return_tokens": True}).encode()
        req = urllib.request.Request(url + "/completion", data=body, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=600) as r:
            j = json.loads(r.read())
    t = j["timings"]
    return {"tok_s": t["predicted_per_second"], "drafted": t.get("draft_n", 0),
            "accepted": t.get("draft_n_accepted", 0), "tokens": j.get("tokens", [])}


def ours_run(nv, mdir, prompt, n, threads, spec, k):
    cmd = [nv, "generate", "--model", mdir, "--json", "--device", "cpu", "--threads", str(threads),
           "--prompt-ids", ",".join(map(str, prompt)), "--temperature", "0", "--max-tokens", str(n), "--ignore-eos"]
    if spec:
        cmd += ["--speculative", "ngram", "--num-speculative-tokens", str(k)]
    j = json.loads(C.out(cmd))
    s = j["stats"]
    return {"tok_s": s["decode_tokens"] / s["decode_seconds"], "drafted": s["spec_draft_tokens"],
            "accepted": s["spec_accepted_tokens"], "tokens": j["outputs"][0]["token_ids"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nanovllm", default=os.path.join(C.ROOT, "build", "nanovllm"))
    ap.add_argument("--preset", default="qwen3-0.6b")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--n", type=int, default=128, help="generated tokens")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    a = ap.parse_args()
    C.ensure_llama()
    mdir, ggufs = C.ensure_models(a.nanovllm, a.preset)
    gguf = ggufs["bf16"]
    rng = random.Random(0)
    prompt = [rng.randrange(3, 100000) for _ in range(16)]
    res = {k: [] for k in ("ours-plain", "ours-ngram", "llama-plain", "llama-ngram")}
    for _ in range(a.rounds):
        res["ours-plain"].append(ours_run(a.nanovllm, mdir, prompt, a.n, a.threads, False, a.k))
        res["ours-ngram"].append(ours_run(a.nanovllm, mdir, prompt, a.n, a.threads, True, a.k))
        res["llama-plain"].append(llama_run(gguf, prompt, a.n, a.threads, False, a.k))
        res["llama-ngram"].append(llama_run(gguf, prompt, a.n, a.threads, True, a.k))
    print(f"# {a.preset} bf16, batch 1, {len(prompt)} prompt ids, {a.n} greedy tokens, K = {a.k}, "
          f"{a.threads} threads, {a.rounds} rounds, {time.strftime('%Y-%m-%d')}")
    med = {}
    for name, runs in res.items():
        med[name] = statistics.median(r["tok_s"] for r in runs)
        d, acc = runs[0]["drafted"], runs[0]["accepted"]
        print(f"{name:12s} decode {med[name]:8.2f} tok/s  [{min(r['tok_s'] for r in runs):.2f}-"
              f"{max(r['tok_s'] for r in runs):.2f}]  drafted {d} accepted {acc}"
              f"{'  (%.0f %%)' % (100 * acc / d) if d else ''}")
    print(f"speculation speedup: nanovllm x{med['ours-ngram'] / med['ours-plain']:.2f}, "
          f"llama.cpp x{med['llama-ngram'] / med['llama-plain']:.2f}; nanovllm / llama.cpp with "
          f"speculation x{med['ours-ngram'] / med['llama-ngram']:.2f}, without x{med['ours-plain'] / med['llama-plain']:.2f}")
    same = res["ours-plain"][0]["tokens"] == res["ours-ngram"][0]["tokens"]
    lt = res["llama-plain"][0]["tokens"]
    peer_same = (str(lt[:len(res["ours-plain"][0]["tokens"])] == res["ours-plain"][0]["tokens"]) if lt
                 else "not compared (the server returned no token ids)")
    print(f"nanovllm spec tokens == plain tokens: {same}; llama.cpp tokens == nanovllm's: {peer_same}")
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
