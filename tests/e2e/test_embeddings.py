"""Embeddings (issue 31 item 4): `nanovllm serve` on random tiny Qwen3 embedding models
(`make-model --pooling last|mean|cls`: sentence-transformers' modules.json, 1_Pooling, Normalize,
detected by --task auto) against the numpy reference (tests/reference/ref_model.py: the final
normed hidden states, pooled and L2-normalized). Chunked prefill (--policy mixed with a small
token budget) for mean and cls, so pooling spans chunks. Also: `dimensions` (Matryoshka
truncation, renormalized), base64 = float bytes, the official OpenAI Node SDK's
embeddings.create (it asks for base64 and decodes it), and the wrong-task errors both ways."""
import base64
import os
import shutil
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))

import numpy as np  # noqa: E402

import server_util as su  # noqa: E402
from ref_model import RefModel  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NPM_DIR = os.path.join(ROOT, "third_party", "npm", "node_modules")
TOL = 2e-4  # f32 weights: max |c - r| over unit vectors


def reference(ref, ids, mode):
    h = ref.hidden(ids)  # [T, H] float64
    v = h.mean(axis=0) if mode == "mean" else h[0] if mode == "cls" else h[-1]
    return v / np.linalg.norm(v)


def prompts(vocab, n, seed):
    rng = np.random.default_rng(seed)
    return [[int(x) for x in rng.integers(0, min(vocab, 150000), size=int(rng.integers(3, 41)))] for _ in range(n)]


def check(cond, msg):
    if not cond:
        raise AssertionError(msg)


def run_case(binary, tmp, mode, extra):
    model = os.path.join(tmp, "emb-" + mode)
    subprocess.run([binary, "make-model", "--arch", "qwen3", "--preset", "tiny", "--dtype", "f32", "--seed", "5",
                    "--pooling", mode, "--out", model], check=True, capture_output=True, timeout=300)
    ref = RefModel.from_dir(model)
    ids = prompts(ref.c.vocab_size, 6, seed=len(mode))
    with su.Server(["--model", model, "--threads", "2"] + extra, os.path.join(tmp, mode + ".log")) as srv:
        st, _, r = srv.post_json("/v1/embeddings", {"input": ids})
        check(st == 200, r)
        check(r["object"] == "list" and [d["index"] for d in r["data"]] == list(range(len(ids))), r)
        check(r["usage"]["prompt_tokens"] == sum(len(p) for p in ids), r["usage"])
        worst = 0.0
        for d, p in zip(r["data"], ids):
            got = np.asarray(d["embedding"], dtype=np.float64)
            want = reference(ref, p, mode)
            check(got.shape == want.shape, f"{mode}: shape {got.shape} vs {want.shape}")
            worst = max(worst, float(np.abs(got - want).max()))
        check(worst <= TOL, f"{mode}: max |c - r| = {worst:.2e} > {TOL}")
        # dimensions: the first 8 components, renormalized; base64 = little-endian f32 bytes.
        st, _, r8 = srv.post_json("/v1/embeddings", {"input": ids[0], "dimensions": 8, "encoding_format": "base64"})
        check(st == 200, r8)
        raw = base64.b64decode(r8["data"][0]["embedding"])
        v8 = np.asarray(struct.unpack("<8f", raw), dtype=np.float64)
        w8 = reference(ref, ids[0], mode)[:8]
        check(np.abs(v8 - w8 / np.linalg.norm(w8)).max() <= TOL, f"{mode}: dimensions 8: {v8} vs {w8}")
        # The wrong task and bad input are 400s naming the field.
        st, _, e = srv.post_json("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}]})
        check(st == 400 and e["error"]["code"] == "wrong_task", e)
        for body, param in [({}, "input"), ({"input": []}, "input"), ({"input": [[1, 2], "x", 3]}, "input"),
                            ({"input": "x", "dimensions": 0}, "dimensions"),
                            ({"input": "x", "dimensions": 100000}, "dimensions"),
                            ({"input": "x", "encoding_format": "int8"}, "encoding_format"),
                            ({"input": [[1] * 5000]}, "input"), ({"input": ["a"] * 2049}, "input")]:
            st, _, e = srv.post_json("/v1/embeddings", body)
            check(st == 400 and e["error"]["param"] == param, f"{body}: {st} {e}")
        sdk = sdk_check(srv, model, ids[1], reference(ref, ids[1], mode))
    return worst, sdk


def sdk_check(srv, model, ids, want):
    """The official OpenAI Node SDK's embeddings.create (base64 on the wire, decoded by the SDK)."""
    node = shutil.which("node")
    if not node or not os.path.isfile(os.path.join(NPM_DIR, "openai", "package.json")):
        return "skipped (node or the npm openai package absent: make deps)"
    script = """
const { createRequire } = require('node:module');
const r = createRequire(process.env.NPM_DIR + '/');
const sdk = r('openai'); const OpenAI = sdk.OpenAI ?? sdk.default ?? sdk;
const c = new OpenAI({ baseURL: process.env.BASE_URL, apiKey: 'none', maxRetries: 0 });
c.embeddings.create({ model: process.env.MODEL, input: [JSON.parse(process.env.IDS)] })
  .then((e) => console.log(JSON.stringify(e.data[0].embedding)))
  .catch((e) => { console.error(e); process.exit(1); });
"""
    env = dict(os.environ, NPM_DIR=NPM_DIR, BASE_URL=f"http://{su.HOST}:{srv.port}/v1", MODEL=model,
               IDS=str(ids))
    p = subprocess.run([node, "-e", script], env=env, capture_output=True, text=True, timeout=120)
    check(p.returncode == 0, p.stderr[-2000:])
    got = np.asarray(__import__("json").loads(p.stdout), dtype=np.float64)
    check(np.abs(got - want).max() <= TOL, "SDK embedding differs from the reference")
    return "ok"


def main():
    try:
        binary = su.nanovllm_bin()
    except RuntimeError as e:
        print(f"SKIP: {e}")
        return su.SKIP
    tmp = su.make_tmpdir("embeddings_")
    try:
        for mode, extra in [("last", []), ("mean", ["--policy", "mixed", "--max-num-batched-tokens", "16"]),
                            ("cls", ["--policy", "mixed", "--max-num-batched-tokens", "16"])]:
            worst, sdk = run_case(binary, tmp, mode, extra)
            print(f"ok: {mode} pooling {' '.join(extra) or '(prefill-first)'}: max |c - r| = {worst:.1e}; SDK {sdk}")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
