#!/usr/bin/python3
"""llama.cpp as a second, independent reference per architecture (issue 28, item 6b): the same
random f32 weights (`nanovllm make-model`), converted to GGUF by hf_to_gguf.py, run greedily by
llama-server; nanovllm's logits along llama.cpp's own token path (teacher forcing: the prompt plus
llama.cpp's tokens) must pick llama.cpp's token wherever llama.cpp's top-2 log-probability margin
exceeds the noise bound, and the top-1 agreement over all steps is reported.

    /usr/bin/python3 bench/peer/arch_check.py [--archs qwen3,qwen3_moe,mistral,gemma3_text]
                                              [--tokens 32] [--margin 0.01] [--json OUT]

llama.cpp comes from compare.py's cached build (.cache/peer/). Per architecture, what llama.cpp
can check:
  qwen3      tiny, as is.
  qwen3_moe  small preset (every layer sparse, 16 experts, top 4, norm_topk_prob): llama.cpp's
             qwen3moe has no dense layers (the tiny preset's mlp_only_layers).
  mistral    tiny with "sliding_window": null: llama.cpp converts Mistral to its llama arch, which
             has no sliding window (the window is checked by tests/e2e/test_forward_reference.py).
  gemma3_text tiny (local layer with a 16-key window, global layer) with query_pre_attn_scalar =
             head_dim: llama.cpp scales Gemma 3 attention by 1/sqrt(head_dim) regardless.
The 40-token prompt is longer than the window, so the Gemma 3 window is compared too.
Not a test (needs the llama.cpp build): results go in docs/perf.md / the issue notes."""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import compare  # noqa: E402  (llama.cpp build and paths)

PRESET = {"qwen3": "tiny", "qwen3_moe": "small", "mistral": "tiny", "gemma3_text": "tiny"}


def config_edit(arch, cfg):
    if arch == "mistral":
        cfg["sliding_window"] = None
    if arch == "gemma3_text":
        cfg["query_pre_attn_scalar"] = cfg["head_dim"]


def make(nanovllm, arch, root):
    d = os.path.join(root, arch)
    compare.run([nanovllm, "make-model", "--arch", arch, "--preset", PRESET[arch], "--dtype", "f32",
                 "--seed", "5", "--out", d], stdout=subprocess.DEVNULL,
                env=dict(os.environ, NANOVLLM_SOURCE_DIR=compare.ROOT))
    p = os.path.join(d, "config.json")
    cfg = json.load(open(p))
    config_edit(arch, cfg)
    json.dump(cfg, open(p, "w"), indent=1)
    gguf_path = os.path.join(root, arch + ".gguf")
    compare.run(["/usr/bin/python3", os.path.join(HERE, "hf_to_gguf.py"), d, gguf_path],
                stdout=subprocess.DEVNULL, env=dict(os.environ, PYTHONPATH=os.path.join(compare.LLAMA, "gguf-py")))
    return d, gguf_path, cfg


def post(url, body, timeout=300):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def llama_greedy(gguf_path, prompt, n):
    """llama.cpp's greedy tokens and, per step, its top-2 log-probabilities."""
    port = compare.free_port()
    cmd = [os.path.join(compare.LLAMA_BIN, "llama-server"), "-m", gguf_path, "--port", str(port),
           "-c", "512", "-np", "1", "-t", "2", "--no-warmup"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(600):
            try:
                with urllib.request.urlopen(url + "/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                if proc.poll() is not None:
                    raise SystemExit(f"llama-server exited:\n{proc.stderr.read()[-3000:]}")
                time.sleep(0.2)
        r = post(url + "/completion", {"prompt": prompt, "n_predict": n, "temperature": 0, "top_k": 1,
                                       "n_probs": 2, "cache_prompt": False, "ignore_eos": True,
                                       "post_sampling_probs": False})
    finally:
        proc.kill()
        proc.wait()
    steps = r["completion_probabilities"]
    tokens = [int(s["id"]) for s in steps]
    margins = []
    for s in steps:
        top = s.get("top_logprobs") or s.get("top_probs")
        lp = [t.get("logprob", np.log(max(t.get("prob", 1e-30), 1e-30))) for t in top]
        margins.append(float(lp[0] - lp[1]) if len(lp) > 1 else float("inf"))
    return tokens, margins


def check(nanovllm, arch, root, n, margin_bound):
    model_dir, gguf_path, cfg = make(nanovllm, arch, root)
    rng = np.random.RandomState(7)
    prompt = [int(i) for i in rng.randint(1000, 20000, size=40)]
    ref_tokens, margins = llama_greedy(gguf_path, prompt, n)
    npy = os.path.join(root, arch + ".npy")
    seq = prompt + ref_tokens[:-1]
    compare.run([nanovllm, "logits", "--model", model_dir, "--prompt-ids", ",".join(map(str, seq)), "--out", npy],
                stdout=subprocess.DEVNULL)
    logits = np.load(npy)[len(prompt) - 1:]  # row i predicts ref_tokens[i]
    ours = logits.argmax(axis=1)
    agree = int(np.sum(ours == np.array(ref_tokens)))
    # Our own margin at each step, in log-probability units (= logit units).
    top2 = np.sort(logits, axis=1)[:, -2:]
    our_margin = top2[:, 1] - top2[:, 0]
    bad = [i for i in range(n) if ours[i] != ref_tokens[i] and margins[i] > margin_bound]
    row = {"arch": arch, "preset": PRESET[arch], "steps": n, "top1_agree": agree,
           "min_llama_margin": float(min(margins)), "disagreements": [
               {"step": i, "llama": ref_tokens[i], "ours": int(ours[i]), "llama_margin": margins[i],
                "our_margin": float(our_margin[i])} for i in range(n) if ours[i] != ref_tokens[i]],
           "ok": not bad}
    print(f"{arch:12s} {PRESET[arch]:6s} top-1 agreement {agree}/{n}, smallest llama.cpp top-2 margin "
          f"{min(margins):.3g}; disagreements beyond the {margin_bound} margin: {len(bad)}", flush=True)
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--archs", default="qwen3,qwen3_moe,mistral,gemma3_text")
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--margin", type=float, default=0.01, help="log-prob margin below which a step is a tie")
    ap.add_argument("--nanovllm", default=os.path.join(compare.ROOT, "build", "nanovllm"))
    ap.add_argument("--json")
    a = ap.parse_args()
    compare.ensure_llama()
    rows = []
    with tempfile.TemporaryDirectory() as root:
        for arch in a.archs.split(","):
            rows.append(check(a.nanovllm, arch, root, a.tokens, a.margin))
    if a.json:
        json.dump(rows, open(a.json, "w"), indent=1)
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
