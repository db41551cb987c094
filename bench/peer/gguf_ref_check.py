#!/usr/bin/python3
"""Cross-checks the numpy GGUF reference (tests/reference/gguf_ref.py) against llama.cpp's own
implementation: its gguf-py package (quants.py dequantizers, GGUFReader, GGUFWriter) and its
built tools (llama-quantize, llama-bench), from compare.py's cached checkout (.cache/peer/).
Not a test (CI has no llama.cpp); the self-checks that need nothing are tests/python/test_gguf_ref.py.

    /usr/bin/python3 bench/peer/gguf_ref_check.py [--llama-cpp DIR] [--nanovllm BIN] [--quick]

  1. dequantize: random valid blocks of every type, bit for bit equal to gguf-py's dequantize;
     also gguf-py's dequantization of gguf_ref's quantized blocks.
  2. a file from gguf_ref's writer (every value type, nested arrays, every tensor type, default
     and 64-byte alignment) read by gguf.GGUFReader; a file from gguf.GGUFWriter read by gguf_ref.
  3. model_to_gguf(F32) vs bench/peer/hf_to_gguf.py (gguf-py) on make-model models: same
     tensors (names, shapes, values: the llama q/k permutation) and metadata.
  4. llama-quantize on a gguf_ref F32 file, to every type: gguf_ref reads the output, its
     dequantization equals gguf-py's, and the error of ggml's quantizers vs gguf_ref's is shown.
  5. llama-bench loads and runs gguf_ref conversions in every type.
  6. llama.cpp's tokenizer (llama-server /tokenize) on gguf_ref conversions = nanovllm's
     tokenize (HF semantics): SentencePiece-style stories260K, Qwen3 and Llama 3 byte-level BPE.
Exits non-zero when a check fails."""
import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(SRC, "tests", "reference"))
import gguf_ref as G  # noqa: E402

FAILS = []


def check(ok, what):
    print(("  ok   " if ok else "  FAIL ") + what)
    if not ok:
        FAILS.append(what)


def rel_rms(y, x):
    return float(np.sqrt(np.mean((y.astype(np.float64) - x) ** 2) / np.mean(x.astype(np.float64) ** 2)))


def gguf_deq(gguf, raw, t, shape=None):
    """gguf-py's dequantization of raw bytes of type t (rows of whole blocks)."""
    from gguf import quants
    qt = gguf.GGMLQuantizationType[t]
    raw = np.frombuffer(bytes(raw), np.uint8)
    if t == "F32":
        return raw.view("<f4")
    return quants.dequantize(raw.reshape(-1, G.type_size(t)), qt).reshape(-1).astype(np.float32)


def same_bits(a, b):
    return a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32))


def check_dequant(gguf, rng):
    print("1. dequantization vs gguf-py (gguf/quants.py)")
    x = rng.standard_normal(256 * 512).astype(np.float32)
    for t in G.QUANT_TYPES:
        n = 20000 if G.block_size(t) > 1 else 65536
        raw = G.random_blocks(t, n, rng)
        mine = G.dequantize(raw, t)
        q = G.quantize(x, t)
        check(same_bits(mine, gguf_deq(gguf, raw, t)) and same_bits(G.dequantize(q, t), gguf_deq(gguf, q, t)),
              f"{t:7s} {n} random blocks and gguf_ref-quantized blocks: bit-exact")


def check_files(gguf, tmp, rng):
    print("2. writer / reader vs gguf.GGUFReader / gguf.GGUFWriter")
    V = G.Val
    kv = {"general.architecture": "test", "t.u8": V(G.UINT8, 200), "t.i8": V(G.INT8, -100),
          "t.u16": V(G.UINT16, 60000), "t.i16": V(G.INT16, -30000), "t.u32": V(G.UINT32, 4000000000),
          "t.i32": V(G.INT32, -2000000000), "t.f32": V(G.FLOAT32, 0.5), "t.bool": V(G.BOOL, True),
          "t.str": "héllo ▁ wörld", "t.u64": V(G.UINT64, 2**63 + 5), "t.i64": V(G.INT64, -2**62),
          "t.f64": V(G.FLOAT64, 1e-300), "t.arr_i32": [1, -2, 3], "t.arr_str": ["a", "", "ü"],
          "t.arr_f32": G.arr(G.FLOAT32, [0.25, -1.5]), "t.arr_bool": G.arr(G.BOOL, [True, False]),
          "t.nested": G.arr(G.ARRAY, [G.arr(G.INT32, [1, 2]), G.arr(G.STRING, ["x"]), G.arr(G.UINT8, [])])}
    tensors, values = [], {}
    for i, t in enumerate(G.QUANT_TYPES):
        shape = (3, 2 * G.block_size(t)) if i % 2 else (2, 1, 3 * G.block_size(t))
        x = rng.standard_normal(int(np.prod(shape))).astype(np.float32)
        tensors.append(G.Tensor(f"t{i}.{t}", shape, t, G.quantize(x, t)))
        values[f"t{i}.{t}"] = G.dequantize(tensors[-1].data, t).reshape(shape)
    for align in (None, 64):
        kv2 = dict(kv, **({"general.alignment": V(G.UINT32, align)} if align else {}))
        path = os.path.join(tmp, f"w{align}.gguf")
        G.write_gguf(path, kv2, tensors)
        r = gguf.GGUFReader(path)
        mine = G.GGUFFile(path)
        ok = True
        for k, v in kv2.items():
            f, want = r.fields[k], G._infer(v)
            # the field's bytes as GGUFReader split them (gguf-py's contents() does not rebuild
            # nested arrays), then the decoded value where it can
            raw = b"".join(np.asarray(part).tobytes() for part in f.parts)
            good = raw == G._str(k) + np.uint32(want.type).tobytes() + G._enc(want) and mine.kv[k] == want
            if not (want.type == G.ARRAY and want.elem == G.ARRAY):
                got = f.contents()
                if want.type == G.FLOAT32 or want.elem == G.FLOAT32:
                    got = np.float32(got).tolist()
                good &= f.types[0] == want.type and got == want.value
            if not good:
                print("    mismatch", k, f.types, f.contents(), want)
            ok &= good
        for t in r.tensors:
            tt = G.TYPE_NAMES[int(t.tensor_type)]
            mt = mine.tensors[t.name]
            ok &= tt == mt.type and list(t.shape) == list(mt.ne) and t.data_offset == mt.start
            ok &= same_bits(gguf_deq(gguf, t.data.tobytes(), tt), values[t.name].reshape(-1))
            ok &= same_bits(mine.tensor(t.name), values[t.name])
        check(ok and len(r.tensors) == len(tensors),
              f"gguf_ref writer (alignment {align or 'default 32'}) -> GGUFReader: {len(kv2)} keys, "
              f"{len(tensors)} tensors of every type")
    path = os.path.join(tmp, "gw.gguf")
    w = gguf.GGUFWriter(path, "test")
    w.add_uint8("a.u8", 7)
    w.add_int16("a.i16", -5)
    w.add_float64("a.f64", 2.5)
    w.add_bool("a.b", False)
    w.add_string("a.s", "ok")
    w.add_array("a.arr", [1, 2, 3])
    w.add_array("a.arrs", ["p", "q"])
    w.add_uint32("general.alignment", 128)
    x = rng.standard_normal((4, 256)).astype(np.float32)
    w.add_tensor("x_f32", x)
    from gguf import quants
    qx = quants.quantize(x, gguf.GGMLQuantizationType.Q8_0)
    w.add_tensor("x_q8", qx, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    f = G.GGUFFile(path)
    ok = f.get("a.u8") == 7 and f.kv["a.i16"] == G.Val(G.INT16, -5) and f.get("a.f64") == 2.5 and \
        f.get("a.b") is False and f.get("a.s") == "ok" and f.get("a.arr") == [1, 2, 3] and \
        f.get("a.arrs") == ["p", "q"] and f.alignment == 128 and f.get("general.architecture") == "test"
    ok &= np.array_equal(f.tensor("x_f32"), x) and f.tensors["x_q8"].type == "Q8_0"
    ok &= same_bits(f.tensor("x_q8").reshape(-1), quants.dequantize(qx, gguf.GGMLQuantizationType.Q8_0).reshape(-1))
    check(ok, "gguf.GGUFWriter file (alignment 128, Q8_0 from gguf-py's quantizer) -> gguf_ref reader")


def make_model(bin_, arch, out, preset="tiny", dtype="f32"):
    if not os.path.exists(os.path.join(out, "config.json")):
        subprocess.run([bin_, "make-model", "--arch", arch, "--preset", preset, "--dtype", dtype, "--out", out],
                       check=True, capture_output=True)
    return out


def check_vs_hf_to_gguf(gguf, tmp, bin_, llama_cpp):
    print("3. model_to_gguf vs bench/peer/hf_to_gguf.py (llama.cpp's gguf-py)")
    env = dict(os.environ, PYTHONPATH=os.path.join(llama_cpp, "gguf-py"))
    models = [(a, make_model(bin_, a, os.path.join(tmp, f"{a}-tiny"))) for a in ("qwen3", "llama", "mistral")]
    models.append(("qwen3_moe-small", make_model(bin_, "qwen3_moe", os.path.join(tmp, "qwen3_moe-small"), "small")))
    models.append(("llama-bias", os.path.join(tmp, "llama-bias")))
    subprocess.run([bin_, "make-model", "--arch", "llama", "--preset", "tiny", "--dtype", "bf16", "--attention-bias",
                    "--out", models[-1][1]], check=True, capture_output=True)
    st = os.path.join(SRC, "..", "shared", "data", "models", "stories260K-hf")
    if os.path.isdir(st):
        models.append(("stories260K-hf", st))
    for label, d in models:
        theirs, mine = os.path.join(tmp, f"{label}-ref.gguf"), os.path.join(tmp, f"{label}-mine.gguf")
        subprocess.run([sys.executable, os.path.join(HERE, "hf_to_gguf.py"), d, theirs], check=True,
                       capture_output=True, env=env)
        G.model_to_gguf(d, mine, "F32")
        r, m = gguf.GGUFReader(theirs), G.GGUFFile(mine)
        names_r = {t.name for t in r.tensors}
        extra = sorted(set(m.tensors) - names_r)  # hf_to_gguf.py drops biases; llama.cpp's llama has them
        ok, notes = names_r <= set(m.tensors) and all(n.endswith(".bias") for n in extra), []
        if not ok:
            notes.append(f"tensors only in ref {sorted(names_r - set(m.tensors))}, only in mine {extra}")
        for t in r.tensors:
            if t.name not in m.tensors:
                continue
            tt = G.TYPE_NAMES[int(t.tensor_type)]
            ref = gguf_deq(gguf, t.data.tobytes(), tt)
            good = list(t.shape) == list(m.tensors[t.name].ne) and same_bits(ref, m.tensor(t.name).reshape(-1))
            if not good:
                notes.append(f"{t.name} differs")
            ok &= good
        same, differ, only_ref, only_mine = 0, [], [], []
        for k, f in r.fields.items():
            if k.startswith("GGUF."):
                continue
            if k not in m.kv:
                only_ref.append(k)
                continue
            a, b = f.contents(), m.get(k)
            if isinstance(a, float):
                a, b = np.float32(a), np.float32(b)
            if a == b and f.types[-1] == (m.kv[k].elem if m.kv[k].type == G.ARRAY else m.kv[k].type):
                same += 1
            else:
                differ.append(k)
        only_mine = [k for k in m.kv if k not in r.fields]
        check(ok, f"{label}: {len(names_r)} tensors equal (names, shapes, values)" +
              (f"; {len(extra)} biases hf_to_gguf.py drops" if extra else "") + (f": {notes}" if notes else ""))
        print(f"       metadata: {same} keys equal; differ {differ}; only in hf_to_gguf {only_ref}; "
              f"only in gguf_ref {only_mine}")


LQ_TYPES = {"Q4_0": "Q4_0", "Q4_1": "Q4_1", "Q5_0": "Q5_0", "Q5_1": "Q5_1", "Q8_0": "Q8_0", "Q2_K": "Q2_K",
            "Q3_K": "Q3_K_S", "Q4_K": "Q4_K_S", "Q5_K": "Q5_K_S", "Q6_K": "Q6_K", "IQ4_NL": "IQ4_NL",
            "IQ4_XS": "IQ4_XS", "F16": "F16", "BF16": "BF16"}


def check_llama_quantize(gguf, tmp, bin_, llama_cpp):
    print("4. llama-quantize (--pure) on a gguf_ref F32 file; gguf_ref reads its output")
    d = make_model(bin_, "qwen3", os.path.join(tmp, "qwen3-small"), "small", "f32")
    f32 = os.path.join(tmp, "qwen3-small-f32.gguf")
    G.model_to_gguf(d, f32, "F32")
    src = G.GGUFFile(f32)
    orig = {n: src.tensor(n) for n in src.tensors}  # the F32 weights
    print(f"       {'type':7s} {'ggml err':>9s} {'gguf_ref err':>12s}   (RMS relative error over the 2-D weights)")
    for t, ft in LQ_TYPES.items():
        out = os.path.join(tmp, f"lq-{t}.gguf")
        p = subprocess.run([os.path.join(llama_cpp, "build", "bin", "llama-quantize"), "--pure", f32, out, ft, "8"],
                           capture_output=True, text=True)
        if p.returncode:
            check(False, f"llama-quantize {ft}: {p.stderr[-300:]}")
            continue
        q = G.GGUFFile(out)
        ok, e_ggml, e_mine, n = True, 0.0, 0.0, 0
        for rt in q.tensors.values():  # (gguf.GGUFReader: 30 s on a 152k-token vocabulary)
            ti = q.tensors[rt.name]
            rows = min(ti.shape[0], 2048) if len(ti.ne) == 2 else 1  # the embedding: its first rows
            nb = ti.nbytes // (ti.shape[0] if len(ti.ne) == 2 else 1) * rows
            y = G.dequantize(q.tensor_bytes(rt.name)[:nb], ti.type)
            ok &= same_bits(y, gguf_deq(gguf, q.tensor_bytes(rt.name)[:nb], ti.type))
            if len(ti.ne) == 2:
                x = orig[rt.name][:rows].reshape(-1)
                e_ggml += rel_rms(y, x) ** 2
                e_mine += rel_rms(G.dequantize(G.quantize(x, ti.type), ti.type), x) ** 2
                n += 1
        types = sorted({ti.type for ti in q.tensors.values() if len(ti.ne) == 2})
        check(ok and types == [t], f"{t:7s} ({ft}): {len(q.tensors)} tensors read, 2-D types {types}, "
              f"dequantization bit-exact with gguf-py")
        print(f"       {t:7s} {np.sqrt(e_ggml / n) * 100:8.3f}% {np.sqrt(e_mine / n) * 100:11.3f}%")


def check_llama_bench(tmp, bin_, llama_cpp, types):
    print("5. llama-bench loads and runs gguf_ref conversions")
    for arch in ("qwen3", "llama"):
        d = make_model(bin_, arch, os.path.join(tmp, f"{arch}-small-bf16"), "small", "bf16")
        for t in types:
            out = os.path.join(tmp, f"bench-{arch}-{t}.gguf")
            G.model_to_gguf(d, out, t)
            p = subprocess.run([os.path.join(llama_cpp, "build", "bin", "llama-bench"), "-m", out, "-p", "8", "-n", "2",
                                "-t", "4", "-r", "1"], capture_output=True, text=True, timeout=300)
            rows = [ln for ln in p.stdout.splitlines()  # the pp8 and tg2 rows of its table
                    if ln.startswith("| ") and "t/s" not in ln and "---" not in ln]
            check(p.returncode == 0 and len(rows) == 2, f"{arch} {t}: llama-bench ran it as " +
                  (rows[0].split("|")[1].strip() if rows else p.stderr[-300:]))


TEXTS = ["Once upon a time, there was a little girl named Lily. She loved to play outside.",
         "  two leading spaces,  double  spaces and a trailing one ", "line\nbreaks\n\ttabs\r\n",
         "Ünïcödé, emoji 🙂 and 日本語 fall back to bytes", "numbers 12345 and 3.14159, don't we'll"]


def llama_tokenize(llama_cpp, gguf_path, texts):
    """Token ids of each text from llama-server's /tokenize (no special tokens added)."""
    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        port = so.getsockname()[1]
    proc = subprocess.Popen([os.path.join(llama_cpp, "build", "bin", "llama-server"), "-m", gguf_path, "--port",
                             str(port), "-c", "256", "-np", "1", "-t", "2", "--no-warmup"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                with urllib.request.urlopen(url + "/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                if proc.poll() is not None:
                    raise RuntimeError(f"llama-server exited {proc.returncode} on {gguf_path}")
                time.sleep(0.2)
        out = []
        for t in texts:
            req = urllib.request.Request(url + "/tokenize", data=json.dumps({"content": t, "add_special": False,
                                                                              "parse_special": True}).encode(),
                                         headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=60) as r:
                out.append(json.loads(r.read())["tokens"])
        return out
    finally:
        proc.kill()
        proc.wait()


def check_tokenizers(tmp, bin_, llama_cpp):
    print("6. llama.cpp's tokenizer on gguf_ref conversions vs nanovllm tokenize (HF tokenizer.json)")
    st = os.path.join(SRC, "..", "shared", "data", "models", "stories260K-hf")
    dirs = [("stories260K-hf (llama / SentencePiece)", st)] if os.path.isdir(st) else []
    dirs += [(f"{a} (gpt2 / {p})", make_model(bin_, a, os.path.join(tmp, f"{a}-tiny")))
             for a, p in (("qwen3", "qwen2"), ("llama", "llama-bpe"))]
    for label, d in dirs:
        out = os.path.join(tmp, "tok.gguf")
        G.model_to_gguf(d, out, "F32")
        f = G.GGUFFile(out)
        toks = f.get("tokenizer.ggml.tokens")
        # the model's BOS / EOS spelled inside a text: split out as control tokens by both
        texts = TEXTS + [f"{toks[f.get('tokenizer.ggml.bos_token_id')]} and {toks[f.get('tokenizer.ggml.eos_token_id')]}"
                         " inside a text"]
        batch = os.path.join(tmp, "texts.json")
        with open(batch, "w", encoding="utf-8") as fo:
            json.dump(texts, fo)
        want = json.loads(subprocess.run([bin_, "tokenize", "--tokenizer", d, "--batch", "--file", batch],
                                         capture_output=True, text=True, check=True).stdout)
        got = llama_tokenize(llama_cpp, out, texts)
        bad = [t for t, a, b in zip(texts, got, want) if a != b]
        check(not bad, f"{label}: {len(texts)} texts, {sum(map(len, want))} tokens identical" +
              (f"; differ on {bad}" if bad else ""))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--llama-cpp", default=os.path.join(SRC, ".cache", "peer", "llama.cpp"))
    ap.add_argument("--nanovllm", default=os.environ.get("NANOVLLM_BIN", os.path.join(SRC, "build", "nanovllm")))
    ap.add_argument("--quick", action="store_true", help="checks 1-3 only (no llama.cpp tools)")
    args = ap.parse_args()
    sys.path.insert(0, os.path.join(args.llama_cpp, "gguf-py"))
    import gguf
    rng = np.random.default_rng(1)
    with tempfile.TemporaryDirectory() as tmp:
        check_dequant(gguf, rng)
        check_files(gguf, tmp, rng)
        check_vs_hf_to_gguf(gguf, tmp, args.nanovllm, args.llama_cpp)
        if not args.quick:
            check_llama_quantize(gguf, tmp, args.nanovllm, args.llama_cpp)
            check_llama_bench(tmp, args.nanovllm, args.llama_cpp, list(G.FILE_TYPES))
            check_tokenizers(tmp, args.nanovllm, args.llama_cpp)
    print(f"{len(FAILS)} failed" if FAILS else "all passed")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
