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
The 40-token prompt is longer than the window, so the Gemma 3 window is compared too. Random
models often continue greedily with one repeated token: the per-prefix comparison (see check())
is the informative one.
Not a test (needs the llama.cpp build): results go in docs/perf.md / the issue notes."""
import argparse
import json
import os
import struct
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


# The small MoE preset's tied head makes its next-token distributions so peaked (top-2 margins
# ~90) that llama.cpp reports every other token at probability 0: its final norm is scaled down
# (a different but equally valid checkpoint for both engines) so the log-probabilities compare.
FINAL_NORM_SCALE = {"qwen3_moe": 0.02}


def scale_final_norm(model_dir, scale, gemma):
    """model.norm.weight *= scale in place (f32 safetensors); Gemma stores w of (1 + w)."""
    path = os.path.join(model_dir, "model.safetensors")
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        h = json.loads(f.read(n))["model.norm.weight"]
    assert h["dtype"] == "F32", h
    b, e = h["data_offsets"]
    w = np.memmap(path, dtype=np.float32, mode="r+", offset=8 + n + b, shape=((e - b) // 4,))
    w[:] = scale * (1 + w) - 1 if gemma else scale * w
    w.flush()


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
    if arch in FINAL_NORM_SCALE:
        scale_final_norm(d, FINAL_NORM_SCALE[arch], arch == "gemma3_text")
    gguf_path = os.path.join(root, arch + ".gguf")
    compare.run(["/usr/bin/python3", os.path.join(HERE, "hf_to_gguf.py"), d, gguf_path],
                stdout=subprocess.DEVNULL, env=dict(os.environ, PYTHONPATH=os.path.join(compare.LLAMA, "gguf-py")))
    return d, gguf_path, cfg


def post(url, body, timeout=300):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


class LlamaServer:
    """llama-server on one GGUF, for the duration of a `with` block."""

    def __init__(self, gguf_path):
        self.port = compare.free_port()
        self.cmd = [os.path.join(compare.LLAMA_BIN, "llama-server"), "-m", gguf_path, "--port", str(self.port),
                    "-c", "512", "-np", "1", "-t", "2", "--no-warmup",
                    "-ctk", "f32", "-ctv", "f32", "-fa", "off"]  # f32 KV, no flash attention (f16 Q): less noise

    def __enter__(self):
        # The log goes to a file: a pipe nobody reads fills up and blocks the server.
        self.errf = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.DEVNULL, stderr=self.errf, text=True)
        self.url = f"http://127.0.0.1:{self.port}"
        for _ in range(600):
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as r:
                    if r.status == 200:
                        return self
            except OSError:
                if self.proc.poll() is not None:
                    self.errf.seek(0)
                    tail = self.errf.read()[-3000:]
                    self.errf.close()
                    raise SystemExit(f"llama-server exited:\n{tail}")
                time.sleep(0.2)
        self.__exit__()
        raise SystemExit("llama-server did not become healthy")

    def __exit__(self, *exc):
        self.proc.kill()
        self.proc.wait()
        self.errf.close()

    def complete(self, prompt, n, n_probs):
        """Greedy tokens, and per step [(id, logprob)] of llama.cpp's n_probs most probable."""
        r = post(self.url + "/completion", {"prompt": prompt, "n_predict": n, "temperature": 0, "top_k": 1,
                                            "n_probs": n_probs, "cache_prompt": False,
                                            # ignore_eos biases EOS to -inf (skewing log-probs): only
                                            # for the multi-token path
                                            "ignore_eos": n > 1, "post_sampling_probs": False})
        # The server withholds the probabilities of tokens that end inside a UTF-8 character
        # (random models emit byte tokens): callers ask for a few tokens and use the first.
        steps = r.get("completion_probabilities") or []
        tops = [[(int(t["id"]), float(t["logprob"])) for t in (s.get("top_logprobs") or [])] for s in steps]
        return [int(s["id"]) for s in steps], tops


def log_softmax(logits):
    m = logits.max(axis=-1, keepdims=True)
    return logits - m - np.log(np.exp(logits - m).sum(axis=-1, keepdims=True))


def check(nanovllm, arch, root, n, margin_bound, max_lp_diff=0.01):
    """Two comparisons. (1) Every prefix of a 40-token random prompt (lengths 8..40): llama.cpp's
    next-token distribution (its 8 most probable tokens and their log-probabilities) against
    ours at that position, from one `nanovllm logits` call: top-1 agreement and the largest
    log-probability difference. These prefixes give distinct distributions even where a random
    model's greedy continuation degenerates into repeats. (2) llama.cpp's greedy continuation of
    the whole prompt (n tokens), teacher-forced through our logits: our argmax must be
    llama.cpp's token wherever its top-2 margin exceeds margin_bound."""
    model_dir, gguf_path, cfg = make(nanovllm, arch, root)
    rng = np.random.RandomState(7)
    prompt = [int(i) for i in rng.randint(1000, 20000, size=40)]
    lengths = range(8, len(prompt) + 1)
    with LlamaServer(gguf_path) as srv:
        prefix_tops = {}
        for L in lengths:
            tops = srv.complete(prompt[:L], 4, 8)[1]
            if tops and tops[0]:
                prefix_tops[L] = tops[0]
        ref_tokens, tops = srv.complete(prompt, n, 2)
    n = len(ref_tokens)  # the last may be withheld (a token ending inside a UTF-8 character)
    npy = os.path.join(root, arch + ".npy")
    seq = prompt + ref_tokens[:-1]
    compare.run([nanovllm, "logits", "--model", model_dir, "--prompt-ids", ",".join(map(str, seq)), "--out", npy],
                stdout=subprocess.DEVNULL)
    lp = log_softmax(np.load(npy).astype(np.float64))
    # (1) prefixes
    prefix_agree, prefix_diff, compared = 0, 0.0, 0
    for L, top in prefix_tops.items():
        row = lp[L - 1]
        prefix_agree += int(np.argmax(row)) == top[0][0]
        # tokens llama.cpp gives probability ~0 (log-prob -FLT_MAX or below -30) are not compared
        diffs = [abs(row[i] - l) for i, l in top if l > -30]
        compared += len(diffs)
        prefix_diff = max([prefix_diff] + diffs)
    # (2) greedy path
    path = lp[len(prompt) - 1:]
    ours = path.argmax(axis=1)
    margins = [t[0][1] - t[1][1] if len(t) > 1 else float("inf") for t in tops]
    agree = int(np.sum(ours == np.array(ref_tokens)))
    bad = [i for i in range(n) if ours[i] != ref_tokens[i] and margins[i] > margin_bound]
    row = {"arch": arch, "preset": PRESET[arch], "prefixes": len(prefix_tops), "prefix_top1_agree": prefix_agree,
           "prefix_distinct_top1": len({t[0][0] for t in prefix_tops.values()}), "prefix_max_logprob_diff": prefix_diff,
           "prefix_logprobs_compared": compared,
           "greedy_steps": n, "greedy_top1_agree": agree, "greedy_distinct_tokens": len(set(ref_tokens)),
           "disagreements": [{"step": i, "llama": ref_tokens[i], "ours": int(ours[i]), "llama_margin": margins[i]}
                             for i in range(n) if ours[i] != ref_tokens[i]],
           "ok": not bad and prefix_agree == len(prefix_tops) and prefix_diff <= max_lp_diff}
    print(f"{arch:12s} {PRESET[arch]:6s} prefixes: top-1 {prefix_agree}/{len(prefix_tops)} "
          f"({row['prefix_distinct_top1']} distinct), max |log-prob diff| over llama.cpp's top 8 (log-prob > -30: {compared}) {prefix_diff:.2e}; "
          f"greedy {n} tokens: top-1 {agree}/{n} ({len(set(ref_tokens))} distinct), "
          f"disagreements beyond a {margin_bound} margin: {len(bad)}", flush=True)
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--archs", default="qwen3,qwen3_moe,mistral,gemma3_text")
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--margin", type=float, default=0.01, help="log-prob margin below which a step is a tie")
    ap.add_argument("--max-logprob-diff", type=float, default=0.01,
                    help="largest |log-prob difference| allowed on the prefixes (llama.cpp's f16 GELU table: ~3e-3)")
    ap.add_argument("--nanovllm", default=os.path.join(compare.ROOT, "build", "nanovllm"))
    ap.add_argument("--json")
    a = ap.parse_args()
    compare.ensure_llama()
    rows = []
    with tempfile.TemporaryDirectory() as root:
        for arch in a.archs.split(","):
            rows.append(check(a.nanovllm, arch, root, a.tokens, a.margin, a.max_logprob_diff))
    if a.json:
        json.dump(rows, open(a.json, "w"), indent=1)
    ok = all(r["ok"] for r in rows)
    print("all architectures agree with llama.cpp" if ok else "DISAGREEMENT: see above")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
