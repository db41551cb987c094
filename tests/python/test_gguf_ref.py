"""Self-checks of the numpy GGUF reference (tests/reference/gguf_ref.py), needing neither the C++
build nor llama.cpp (bench/peer/gguf_ref_check.py compares it with llama.cpp's implementation):
block layouts from hand-built blocks, quantize -> dequantize error bounds per type, writer ->
reader round trips, corrupt files rejected, HF -> GGUF conversion, tokenizer metadata, the CLI.
Run: /usr/bin/python3 -m pytest -q tests/python/test_gguf_ref.py"""
import json
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

REF = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference")
sys.path.insert(0, REF)
import gguf_ref as G  # noqa: E402
import st_reader  # noqa: E402

SHARED = os.environ.get("NANOVLLM_SHARED_DATA",
                        os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "shared", "data"))
F32 = np.float32


def h(v):
    return list(np.float16(v).tobytes())


# ---- block layouts: hand-built blocks, expected values written out from ggml-common.h ----

def test_type_table():
    # sizeof(block_*) from the struct definitions (fp16 = 2 bytes, QK_K = 256)
    want = {"Q4_0": (32, 2 + 16), "Q4_1": (32, 4 + 16), "Q5_0": (32, 2 + 4 + 16), "Q5_1": (32, 4 + 4 + 16),
            "Q8_0": (32, 2 + 32), "Q2_K": (256, 16 + 64 + 4), "Q3_K": (256, 32 + 64 + 12 + 2),
            "Q4_K": (256, 4 + 12 + 128), "Q5_K": (256, 4 + 12 + 32 + 128), "Q6_K": (256, 128 + 64 + 16 + 2),
            "IQ4_NL": (32, 2 + 16), "IQ4_XS": (256, 2 + 2 + 4 + 128), "F32": (1, 4), "F16": (1, 2), "BF16": (1, 2)}
    for t, (bs, ts) in want.items():
        assert (G.block_size(t), G.type_size(t)) == (bs, ts), t
    assert [G.GGML_TYPES[t][0] for t in G.QUANT_TYPES] == [0, 1, 30, 2, 3, 6, 7, 8, 10, 11, 12, 13, 14, 20, 23]


def deq(t, blk):
    b = bytes(blk)
    assert len(b) == G.type_size(t)
    return G.dequantize(b, t)


def test_layout_legacy():
    nib = [j | ((15 - j) << 4) for j in range(16)]  # element j: j, element j+16: 15-j
    lo, hi = np.arange(16), 15 - np.arange(16)
    assert np.array_equal(deq("Q4_0", h(0.5) + nib), np.r_[lo - 8, hi - 8] * 0.5)
    assert np.array_equal(deq("Q4_1", h(2) + h(-3) + nib), np.r_[lo, hi] * 2.0 - 3)
    assert np.array_equal(deq("IQ4_NL", h(0.5) + nib), G.IQ4_VALUES[np.r_[lo, hi]] * 0.5)
    # q5: bit i of the u32 qh is bit 4 of element i
    qh = list(struct.pack("<I", (1 << 0) | (1 << 20) | (1 << 31)))
    q = np.r_[np.full(16, 1), np.full(16, 2)]
    q[[0, 20, 31]] += 16
    assert np.array_equal(deq("Q5_0", h(1) + qh + [0x21] * 16), q - 16.0)
    assert np.array_equal(deq("Q5_1", h(1) + h(0.5) + qh + [0x21] * 16), q + 0.5)
    qs = list(np.arange(-16, 16, dtype=np.int8).view(np.uint8))
    assert np.array_equal(deq("Q8_0", h(0.25) + qs), np.arange(-16, 16) * 0.25)
    assert np.array_equal(G.dequantize(np.float16([1.5, -2]).tobytes(), "F16"), [1.5, -2])
    assert np.array_equal(G.dequantize(bytes([0x80, 0x3F, 0x00, 0xC0]), "BF16"), [1.0, -2.0])


E = np.arange(256)
HALF, J, SUB16, SUB32 = E // 128, (E % 128) // 32, E // 16, E // 32  # element -> position parts


def test_layout_q2_K_q3_K():
    # qs byte 0xE4 holds 0,1,2,3 in bits 0-1, 2-3, 4-5, 6-7: element 128h + 32j + l reads shift 2j
    sc = [(i % 16) | (1 << 4) for i in range(16)]  # scale i, min 1
    y = deq("Q2_K", sc + [0xE4] * 64 + h(1) + h(0.5))
    assert np.array_equal(y, SUB16 * J - 0.5)
    # q3_K: hmask bit 4h + j of byte l is set for h = 0 only, so the second half subtracts 4
    s = [(4 * i + 3) for i in range(16)]  # 6-bit scales, value s - 32
    packed = [(s[b] & 15) | ((s[8 + b] & 15) << 4) for b in range(4)] + \
             [(s[4 + b] & 15) | ((s[12 + b] & 15) << 4) for b in range(4)] + \
             [(s[b] >> 4) | ((s[4 + b] >> 4) << 2) | ((s[8 + b] >> 4) << 4) | ((s[12 + b] >> 4) << 6) for b in range(4)]
    y = deq("Q3_K", [0x0F] * 32 + [0xE4] * 64 + packed + h(0.5))
    assert np.array_equal(y, 0.5 * (np.array(s)[SUB16] - 32) * (J - 4 * HALF))


def k4_scales(sc, m):
    """The 12-byte 6-bit scale/min packing of q4_K / q5_K, written from get_scale_min_k4."""
    b = [0] * 12
    for j in range(4):
        b[j] = sc[j] | ((sc[j + 4] >> 4) << 6)
        b[j + 4] = m[j] | ((m[j + 4] >> 4) << 6)
        b[j + 8] = (sc[j + 4] & 15) | ((m[j + 4] & 15) << 4)
    return b


def test_layout_q4_K_q5_K():
    sc, m = [7 * j + 5 for j in range(8)], [60 - 3 * j for j in range(8)]
    l = E % 32
    qs = [(i & 15) | ((15 - (i & 15)) << 4) for i in range(128)]  # byte 32c + l: l & 15, 15 - (l & 15)
    q = np.where((E // 32) % 2 == 0, l & 15, 15 - (l & 15))
    want = (F32(0.25) * np.array(sc, F32)[SUB32]) * q - F32(0.125) * np.array(m, F32)[SUB32]
    assert np.array_equal(deq("Q4_K", h(0.25) + h(0.125) + k4_scales(sc, m) + qs), want)
    qh = [1 << (i % 8) for i in range(32)]  # element 32i + l has bit 4 when l % 8 == i
    q5 = q + 16 * (l % 8 == SUB32)
    want = (F32(0.25) * np.array(sc, F32)[SUB32]) * q5 - F32(0.125) * np.array(m, F32)[SUB32]
    assert np.array_equal(deq("Q5_K", h(0.25) + h(0.125) + k4_scales(sc, m) + qh + qs), want)


def test_layout_q6_K():
    rng = np.random.default_rng(0)
    ql, qh = rng.integers(0, 256, 128), rng.integers(0, 256, 64)
    sc = np.arange(16) - 8
    want = []
    for e in range(256):
        hh, g, l = e // 128, (e % 128) // 32, e % 32
        low = (ql[64 * hh + 32 * (g % 2) + l] >> (4 * (g // 2))) & 15
        high = (qh[32 * hh + l] >> (2 * g)) & 3
        want.append(F32(0.5) * F32(sc[e // 16]) * F32((low | (high << 4)) - 32))
    y = deq("Q6_K", list(ql) + list(qh) + list(sc.astype(np.int8).view(np.uint8)) + h(0.5))
    assert np.array_equal(y, np.array(want, F32))


def test_layout_iq4_xs():
    # sub-block i: low 4 bits of its scale in nibble i % 2 of scales_l[i // 2], high 2 bits in
    # bits 2i..2i+1 of the u16 scales_h; qs 0x80: first 16 elements code 0, next 16 code 8
    ls = [(0xA if i % 2 == 0 else 0x5) | (((0xE4E4 >> (2 * i)) & 3) << 4) for i in range(8)]
    y = deq("IQ4_XS", h(0.5) + list(struct.pack("<H", 0xE4E4)) + [0x5A] * 4 + [0x80] * 128)
    code = np.where(E % 32 < 16, -127, 1)
    assert np.array_equal(y, (F32(0.5) * (np.array(ls, F32)[SUB32] - 32)) * code)


# ---- quantize -> dequantize ----

# RMS relative error bounds on normal(0, 1) data (measured: Q8_0 0.54%, Q6_K 1.9%, Q5_* 3.8-4.3%,
# Q4_* and IQ4_* 7.6-8.3%, Q3_K 14.8%, Q2_K 28.8%): what each format gives with simple scales.
BOUNDS = {"F32": 0, "F16": 3e-4, "BF16": 2.5e-3, "Q8_0": 0.007, "Q6_K": 0.025, "Q5_0": 0.05, "Q5_1": 0.05,
          "Q5_K": 0.05, "Q4_0": 0.095, "Q4_1": 0.09, "Q4_K": 0.09, "IQ4_NL": 0.09, "IQ4_XS": 0.09,
          "Q3_K": 0.17, "Q2_K": 0.32}


def rel_rms(y, x):
    return float(np.sqrt(np.mean((y.astype(np.float64) - x) ** 2) / np.mean(x.astype(np.float64) ** 2)))


@pytest.mark.parametrize("t", G.QUANT_TYPES)
def test_roundtrip_error(t):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(256 * 256).astype(F32)
    b = G.quantize(x, t)
    assert len(b) == G.nbytes(t, x.size)
    assert rel_rms(G.dequantize(b, t), x) <= BOUNDS[t]
    for scale in (1e-3, 50.0):  # the fp16 scales follow the data's magnitude
        assert rel_rms(G.dequantize(G.quantize(x * scale, t), t), x * scale) <= BOUNDS[t] * 1.05
    # outliers stay represented (error relative to the outlier), zero blocks stay exactly zero
    z = np.zeros(4 * 256, F32)
    z[5], z[300] = 40.0, -3.0
    y = G.dequantize(G.quantize(z, t), t)
    assert np.all(np.isfinite(y)) and abs(y[5] - 40) <= 40 * max(BOUNDS[t], 1e-3) * 3
    assert not y[512:].any()


@pytest.mark.parametrize("t", G.QUANT_TYPES)
def test_random_blocks(t):
    rng = np.random.default_rng(2)
    b = G.random_blocks(t, 64, rng)
    assert len(b) == 64 * G.type_size(t)
    y = G.dequantize(b, t)
    assert y.size == 64 * G.block_size(t) and np.all(np.isfinite(y)) and np.abs(y).max() > 0
    if t in G.F16_FIELDS:  # scales finite, of both signs, magnitude 1e-4..1
        d = np.frombuffer(b, np.uint8).reshape(64, -1)[:, G.F16_FIELDS[t][0]:][:, :2].copy().view("<f2")
        assert np.all(np.isfinite(d)) and (d > 0).any() and (d < 0).any() and np.abs(d).max() <= 1


def test_quantize_rejects_partial_blocks():
    with pytest.raises(ValueError):
        G.quantize(np.zeros(100, F32), "Q4_0")
    with pytest.raises(ValueError):
        G.dequantize(b"\0" * 17, "Q4_0")


# ---- writer / reader ----

def all_values():
    V = G.Val
    return {"general.architecture": "test", "a.u8": V(G.UINT8, 255), "a.i8": V(G.INT8, -128),
            "a.u16": V(G.UINT16, 65535), "a.i16": V(G.INT16, -32768), "a.u32": 4000000000,
            "a.i32": V(G.INT32, -7), "a.f32": 0.375, "a.bool": True, "a.str": "ünï ▁code",
            "a.u64": V(G.UINT64, 2**64 - 1), "a.i64": V(G.INT64, -2**63), "a.f64": V(G.FLOAT64, 1 / 3),
            "a.empty": "", "a.ints": [1, -2, 3], "a.strs": ["x", "", "ÿ"], "a.floats": [0.5, -2.25],
            "a.bools": [True, False], "a.u64s": G.arr(G.UINT64, [0, 2**64 - 1]),
            "a.nested": [[1, 2], ["a"], G.arr(G.FLOAT32, [])],
            "a.nested2": G.arr(G.ARRAY, [G.arr(G.ARRAY, [G.arr(G.INT8, [-1])])])}


def some_tensors(rng, types=G.QUANT_TYPES):
    out = []
    for i, t in enumerate(types):
        shape = (3, 2 * G.block_size(t)) if i % 2 else (2, 1, G.block_size(t))
        out.append(G.Tensor(f"w{i}.{t}", shape, t, G.quantize(rng.standard_normal(int(np.prod(shape))), t)))
    out.append(G.Tensor("vec", (5,), "F32", np.arange(5, dtype=F32).tobytes()))  # not a multiple of 32
    return out


@pytest.mark.parametrize("align", [None, 1, 8, 64, 256])
def test_write_read_roundtrip(align):
    kv = all_values()
    if align:
        kv["general.alignment"] = align
    tensors = some_tensors(np.random.default_rng(3))
    buf = G.gguf_bytes(kv, tensors)
    f = G.GGUFFile(buf)
    a = align or 32
    assert f.version == 3 and f.alignment == a and f.data_start % a == 0 and len(buf) % a == 0
    assert list(f.kv) == list(kv) and all(f.kv[k] == G._infer(v) for k, v in kv.items())
    assert f.get("a.f64") == 1 / 3 and f.get("a.nested")[0] == G.arr(G.INT32, [1, 2])
    assert list(f.tensors) == [t.name for t in tensors]
    for t in tensors:
        ti = f.tensors[t.name]
        assert ti.shape == tuple(t.shape) and ti.ne == tuple(reversed(t.shape)) and ti.type == t.type
        assert ti.offset % a == 0 and f.tensor_bytes(t.name).tobytes() == t.data
        assert np.array_equal(f.tensor(t.name), G.dequantize(t.data, t.type).reshape(t.shape))
    assert struct.unpack_from("<4sIQQ", buf) == (b"GGUF", 3, len(tensors), len(kv))


def test_write_file_and_lazy_data(tmp_path):
    calls = []
    t = G.Tensor("x", (2, 32), "Q8_0", lambda: calls.append(1) or G.quantize(np.arange(64) - 32, "Q8_0"))
    G.write_gguf(tmp_path / "x.gguf", {"general.architecture": "t"}, [t])
    assert calls == [1]
    y = G.GGUFFile(str(tmp_path / "x.gguf")).tensor("x")
    assert y.shape == (2, 32) and np.abs(y.reshape(-1) - (np.arange(64) - 32)).max() <= 32 / 127 / 2 * 1.01
    assert G.GGUFFile(G.gguf_bytes({}, [])).tensors == {}


def corrupt_cases():
    """(label, bytes) of files the reader must reject."""
    rng = np.random.default_rng(4)
    kv = {"general.architecture": "t", "k.s": "abc", "k.a": [1, 2, 3]}
    ta = G.Tensor("a", (4, 32), "Q4_0", G.quantize(rng.standard_normal(128), "Q4_0"))
    tb = G.Tensor("b", (64,), "F32", rng.standard_normal(64).astype(F32).tobytes())
    good = G.gguf_bytes(kv, [ta, tb])
    f = G.GGUFFile(good)
    ks, ka, ia, ib = f.kv_pos["k.s"], f.kv_pos["k.a"], f.tensors["a"].info_pos, f.tensors["b"].info_pos

    def variant(kv=kv, tensors=(ta, tb), **kw):
        return G.gguf_bytes(kv, tensors, **kw)

    def patched(fmt, pos, value):
        b = bytearray(good)
        struct.pack_into(fmt, b, pos, value)
        return bytes(b)

    return [
        ("magic", variant(magic=b"GGUG")), ("version 1", variant(version=1)), ("version 4", variant(version=4)),
        ("n_tensors + 1", variant(n_tensors=3)), ("huge n_kv", variant(n_kv=2**63)),
        ("unaligned offset", variant(offsets={"b": 72})), ("offset past end", variant(offsets={"b": 1 << 20})),
        ("overlap", variant(offsets={"b": 32})),
        ("short data", variant(tensors=[ta._replace(data=ta.data[:-18])], check=False)),
        ("partial block", variant(tensors=[G.Tensor("a", (2, 16), "Q4_0", b"\0" * 18)], check=False)),
        ("5 dims", variant(tensors=[G.Tensor("a", (1, 1, 1, 1, 4), "F32", b"\0" * 16)])),
        ("alignment 48", variant(dict(kv, **{"general.alignment": 48}))),
        ("alignment 0", variant(dict(kv, **{"general.alignment": 0}), alignment=32)),
        ("alignment i32", variant(dict(kv, **{"general.alignment": G.Val(G.INT32, 32)}))),
        ("duplicate key", variant(list(kv.items()) + [("k.s", "again")])),
        ("duplicate tensor", variant(tensors=[ta, tb, tb])),
        ("value type 13", patched("<I", ks + 8 + 3, 13)),  # the u32 after the key "k.s"
        ("array of type 99", patched("<I", ka + 8 + 3 + 4, 99)),
        ("ggml type 5", patched("<I", ia + 8 + 1 + 4 + 16, 5)),  # after name "a", n_dims, 2 dims
        ("bad utf-8", patched("<B", ks + 8 + 3 + 4 + 8, 0xFF)),
        ("long string", patched("<Q", ks + 8 + 3 + 4, 2**40)),
        ("long array", patched("<Q", ka + 8 + 3 + 4 + 4, 2**40)),
    ] + [(f"truncated at {n}", good[:n]) for n in (0, 3, 20, ks + 5, ka + 30, ib + 4, f.tensors["b"].start + 10,
                                                    len(good) - 1)]


@pytest.mark.parametrize("label,buf", corrupt_cases(), ids=lambda v: v if isinstance(v, str) else "")
def test_corrupt_rejected(label, buf):
    with pytest.raises(ValueError):
        G.GGUFFile(buf)


# ---- HF model directory -> GGUF ----

def gpt2_chars():
    """GPT-2's byte -> printable character map (ids 0..255 in that order)."""
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    cs = bs[:]
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + len(cs) - 188)
    return [chr(c) for c in cs]


def write_tokenizer(d, kind):
    """A small byte-level BPE (Qwen-like) or SentencePiece-style (Llama 2-like) tokenizer.json."""
    if kind == "gpt2":
        vocab = {c: i for i, c in enumerate(gpt2_chars())}
        merges = [["Ġ", "t"], ["h", "e"], ["Ġt", "he"]]
        added = [("<|endoftext|>", True), ("<|im_start|>", False), ("<think>", False)]
        tok = {"pre_tokenizer": {"type": "ByteLevel"}, "decoder": {"type": "ByteLevel"}}
        cfg = {"add_bos_token": False, "pad_token": "<|endoftext|>", "chat_template": "{{ messages }}"}
    else:
        vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, **{f"<0x{b:02X}>": 3 + b for b in range(256)}}
        merges = [["▁", "a"], ["a", "b"], ["▁a", "b"], ["b", "a"], ["▁", "b"]]
        added = [("<unk>", True), ("<s>", True), ("</s>", True)]
        tok = {"normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"}]},
               "decoder": {"type": "Sequence", "decoders": [{"type": "ByteFallback"}]}}
        cfg = {"add_bos_token": True, "bos_token": "<s>", "eos_token": {"content": "</s>"}}
        for c in ("▁", "a", "b"):
            vocab[c] = len(vocab)
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    n = len(vocab)
    tok["added_tokens"] = [{"id": vocab.get(s, n + i), "content": s, "special": sp} for i, (s, sp) in enumerate(added)
                           if s not in vocab or kind != "gpt2"]
    tok["model"] = {"type": "BPE", "vocab": vocab, "merges": merges if kind == "gpt2" else [" ".join(m) for m in merges],
                    **({"unk_token": "<unk>", "byte_fallback": True} if kind != "gpt2" else {})}
    with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False)
    with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f)
    return len(vocab) + sum(1 for a in tok["added_tokens"] if a["id"] >= len(vocab))


def make_model_dir(d, arch, dtype="F32", rope_scaling=None, seed=0):
    """A 2-layer model: hidden 256, 4 heads of 64, 2 kv heads, intermediate 288 (ffn_down rows are
    not whole 256-blocks: the K-quant fallback), untied lm_head; returns (config, HF tensors)."""
    os.makedirs(d, exist_ok=True)
    n_tok = write_tokenizer(d, "spm" if arch == "llama" else "gpt2")
    cfg = {"model_type": arch, "hidden_size": 256, "intermediate_size": 288, "num_hidden_layers": 2,
           "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "vocab_size": n_tok + 3,
           "max_position_embeddings": 1024, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
           "tie_word_embeddings": False, "bos_token_id": None, "eos_token_id": [2, 3],
           "attention_bias": arch == "llama", "rope_scaling": rope_scaling}
    rng = np.random.default_rng(seed)
    w = {"model.embed_tokens.weight": (cfg["vocab_size"], 256), "model.norm.weight": (256,),
         "lm_head.weight": (cfg["vocab_size"], 256)}
    for i in range(2):
        p = f"model.layers.{i}."
        w.update({p + "input_layernorm.weight": (256,), p + "post_attention_layernorm.weight": (256,),
                  p + "self_attn.q_proj.weight": (256, 256), p + "self_attn.k_proj.weight": (128, 256),
                  p + "self_attn.v_proj.weight": (128, 256), p + "self_attn.o_proj.weight": (256, 256),
                  p + "mlp.gate_proj.weight": (288, 256), p + "mlp.up_proj.weight": (288, 256),
                  p + "mlp.down_proj.weight": (256, 288)})
        if arch != "qwen3":  # qwen2 always, llama with attention_bias
            w.update({p + "self_attn.q_proj.bias": (256,), p + "self_attn.k_proj.bias": (128,),
                      p + "self_attn.v_proj.bias": (128,)})
        if arch == "llama":
            w[p + "self_attn.o_proj.bias"] = (256,)
        if arch == "qwen3":
            w.update({p + "self_attn.q_norm.weight": (64,), p + "self_attn.k_norm.weight": (64,)})
    hf = {k: (rng.standard_normal(s) * 0.05).astype(F32) for k, s in w.items()}
    if dtype == "BF16":
        hf = {k: st_reader.bf16_bits_to_f32(st_reader.f32_to_bf16_bits(v)) for k, v in hf.items()}
        st_reader.save_file(os.path.join(d, "model.safetensors"),
                            {k: ("BF16", st_reader.f32_to_bf16_bits(v)) for k, v in hf.items()})
    else:
        st_reader.save_file(os.path.join(d, "model.safetensors"), {k: ("F32", v) for k, v in hf.items()})
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)
    return cfg, hf


def rope_half(x, pos, theta=10000.0):
    """HF rotate-half RoPE on [..., D]: pairs (i, i + D/2)."""
    d = x.shape[-1]
    ang = pos * theta ** (-np.arange(0, d, 2) / d)
    a, b = x[..., :d // 2], x[..., d // 2:]
    return np.concatenate([a * np.cos(ang) - b * np.sin(ang), b * np.cos(ang) + a * np.sin(ang)], -1)


def rope_interleaved(x, pos, theta=10000.0):
    """llama.cpp's LLAMA_ROPE_TYPE_NORM: pairs (2i, 2i+1)."""
    d = x.shape[-1]
    ang = pos * theta ** (-np.arange(0, d, 2) / d)
    a, b = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2], out[..., 1::2] = a * np.cos(ang) - b * np.sin(ang), b * np.cos(ang) + a * np.sin(ang)
    return out


def test_permute_qk_matches_rope_layouts():
    """Permuted rows under interleaved RoPE give the same attention scores as HF's rows under
    rotate-half RoPE (the reason for the permutation), for weights and biases alike."""
    rng = np.random.default_rng(5)
    n_head, d, hidden = 3, 8, 5
    wq, wk = rng.standard_normal((n_head * d, hidden)), rng.standard_normal((n_head * d, hidden))
    bq = rng.standard_normal(n_head * d)
    x1, x2 = rng.standard_normal(hidden), rng.standard_normal(hidden)
    q_hf = rope_half((wq @ x1 + bq).reshape(n_head, d), 3)
    k_hf = rope_half((wk @ x2).reshape(n_head, d), 7)
    pq, pk, pb = G.permute_qk(wq, n_head), G.permute_qk(wk, n_head), G.permute_qk(bq, n_head)
    q_gg = rope_interleaved((pq @ x1 + pb).reshape(n_head, d), 3)
    k_gg = rope_interleaved((pk @ x2).reshape(n_head, d), 7)
    assert np.allclose((q_hf * k_hf).sum(-1), (q_gg * k_gg).sum(-1))
    assert np.array_equal(G.permute_qk(np.arange(8.0), 1), [0, 4, 1, 5, 2, 6, 3, 7])


@pytest.mark.parametrize("arch", ["qwen3", "qwen2", "llama", "mistral"])
def test_convert_f32(tmp_path, arch):
    cfg, hf = make_model_dir(str(tmp_path / "m"), arch, "BF16" if arch == "qwen2" else "F32")
    types = G.model_to_gguf(str(tmp_path / "m"), str(tmp_path / "m.gguf"), "F32")
    f = G.GGUFFile(str(tmp_path / "m.gguf"))
    a = {"mistral": "llama"}.get(arch, arch)
    assert f.get("general.architecture") == a and f.get("general.file_type") == 0
    want = {"context_length": 1024, "embedding_length": 256, "block_count": 2, "feed_forward_length": 288,
            "attention.head_count": 4, "attention.head_count_kv": 2, "attention.key_length": 64,
            "attention.value_length": 64, "rope.freq_base": 10000.0, "attention.layer_norm_rms_epsilon": F32(1e-6)}
    if a == "llama":
        want.update({"rope.dimension_count": 64, "vocab_size": cfg["vocab_size"]})
    for k, v in want.items():
        assert f.get(f"{a}.{k}") == v, k
    assert f.kv[f"{a}.context_length"].type == G.UINT32 and f.kv[f"{a}.rope.freq_base"].type == G.FLOAT32
    assert set(types.values()) == {"F32"} and len(f.tensors) == len(hf)
    for name, w in hf.items():
        g = G.gguf_tensor_name(name)
        expect = w
        if a == "llama" and (".q_proj." in name or ".k_proj." in name):
            expect = G.permute_qk(w, 4 if ".q_proj." in name else 2)
        assert f.tensors[g].shape == w.shape and np.array_equal(f.tensor(g), expect), name
    assert list(f.tensors)[0] == "token_embd.weight" and list(f.tensors)[-2:] == ["output.weight", "output_norm.weight"]


@pytest.mark.parametrize("ttype", ["Q8_0", "Q4_K", "Q4_K_M", "Q6_K", "IQ4_XS", "Q2_K", "BF16", "F16"])
def test_convert_quantized(tmp_path, ttype):
    cfg, hf = make_model_dir(str(tmp_path / "m"), "qwen3")
    types = G.model_to_gguf(str(tmp_path / "m"), str(tmp_path / "m.gguf"), ttype)
    f = G.GGUFFile(str(tmp_path / "m.gguf"))
    assert f.get("general.file_type") == G.FILE_TYPES[ttype]
    assert f.get("general.quantization_version") == (None if ttype in ("F16", "BF16") else 2)
    for name, w in hf.items():
        g = G.gguf_tensor_name(name)
        t = types[g]
        if w.ndim == 1:
            assert t == "F32" and np.array_equal(f.tensor(g), w)
            continue
        if ttype == "Q4_K_M":
            base = "Q6_K" if g.endswith(("attn_v.weight", "ffn_down.weight")) or g == "output.weight" else "Q4_K"
        else:
            base = ttype
        fallback = {"Q4_K": "Q5_0", "Q6_K": "Q8_0", "IQ4_XS": "IQ4_NL", "Q2_K": "Q4_0"}
        assert t == (fallback.get(base, base) if g.endswith("ffn_down.weight") else base), g  # 288 columns
        assert rel_rms(f.tensor(g), w) <= BOUNDS[t] * 1.2, g


def test_tensor_type_fallback():
    assert G.tensor_type("blk.0.ffn_down.weight", (64, 172), "Q4_K") == "F16"  # not even 32-blocks
    assert G.tensor_type("blk.0.ffn_down.weight", (64, 160), "Q4_K") == "Q5_0"
    assert G.tensor_type("blk.0.attn_q.weight", (64, 512), "Q4_K_M") == "Q4_K"
    assert G.tensor_type("blk.0.attn_v.weight", (64, 512), "Q4_K_M") == "Q6_K"
    assert G.tensor_type("blk.0.attn_norm.weight", (512,), "Q4_K") == "F32"


def test_rope_scaling(tmp_path):
    rs = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 64}
    make_model_dir(str(tmp_path / "a"), "llama", rope_scaling=rs)
    G.model_to_gguf(str(tmp_path / "a"), str(tmp_path / "a.gguf"), "F32")
    r = G.GGUFFile(str(tmp_path / "a.gguf")).tensor("rope_freqs.weight")
    wavelen = 2 * np.pi * 10000.0 ** (np.arange(0, 64, 2) / 64)
    assert r.shape == (32,) and np.all(r[wavelen < 16] == 1) and np.all(r[wavelen > 64] == 8)
    mid = (wavelen >= 16) & (wavelen <= 64)
    assert mid.any() and np.all((r[mid] >= 1) & (r[mid] <= 8))
    make_model_dir(str(tmp_path / "b"), "qwen3", rope_scaling={"rope_type": "yarn", "factor": 4.0,
                                                               "original_max_position_embeddings": 256})
    G.model_to_gguf(str(tmp_path / "b"), str(tmp_path / "b.gguf"), "F32")
    f = G.GGUFFile(str(tmp_path / "b.gguf"))
    assert f.get("qwen3.rope.scaling.type") == "yarn" and f.get("qwen3.rope.scaling.factor") == 4.0
    assert f.get("qwen3.rope.scaling.original_context_length") == 256


def test_tokenizer_gpt2(tmp_path):
    d = str(tmp_path / "m")
    cfg, _ = make_model_dir(d, "qwen3")
    kv = G.tokenizer_kv(d, cfg["vocab_size"], cfg)
    toks, types = kv["tokenizer.ggml.tokens"].value, kv["tokenizer.ggml.token_type"].value
    assert kv["tokenizer.ggml.model"] == "gpt2" and kv["tokenizer.ggml.pre"] == "qwen2"
    assert toks[:3] == ["!", '"', "#"] and toks[256:259] == ["Ġt", "he", "Ġthe"]
    assert toks[259:] == ["<|endoftext|>", "<|im_start|>", "<think>", "[PAD262]", "[PAD263]", "[PAD264]"]
    assert types[258:] == [1, 3, 3, 4, 5, 5, 5]  # special / <|...|> -> control, other added -> user-defined
    assert kv["tokenizer.ggml.merges"].value == ["Ġ t", "h e", "Ġt he"] and "tokenizer.ggml.scores" not in kv
    assert kv["tokenizer.ggml.eos_token_id"].value == 2 and "tokenizer.ggml.bos_token_id" not in kv
    assert kv["tokenizer.ggml.padding_token_id"].value == 259 and kv["tokenizer.ggml.add_bos_token"] is False
    assert kv["tokenizer.chat_template"] == "{{ messages }}"


def hf_bpe(word, ranks):
    """HF BPE on one pre-tokenized word: merge the lowest-ranked adjacent pair, leftmost first."""
    w = list(word)
    while True:
        c = [(ranks[p], i) for i, p in enumerate(zip(w, w[1:])) if p in ranks]
        if not c:
            return w
        i = min(c)[1]
        w[i:i + 2] = [w[i] + w[i + 1]]


def spm_by_score(word, vocab, scores):
    """llama.cpp's SentencePiece BPE: merge the adjacent pair whose concatenation is the
    highest-scoring token, leftmost first."""
    w = list(word)
    while True:
        c = [(-scores[vocab[a + b]], i) for i, (a, b) in enumerate(zip(w, w[1:])) if a + b in vocab]
        if not c:
            return w
        i = min(c)[1]
        w[i:i + 2] = [w[i] + w[i + 1]]


def check_spm_scores(model_dir, n_random, seed=0):
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    kv = G.tokenizer_kv(model_dir, cfg["vocab_size"], cfg)
    assert kv["tokenizer.ggml.model"] == "llama" and "tokenizer.ggml.merges" not in kv
    toks, scores = kv["tokenizer.ggml.tokens"].value, kv["tokenizer.ggml.scores"].value
    vocab = {t: i for i, t in enumerate(toks)}
    with open(os.path.join(model_dir, "tokenizer.json"), encoding="utf-8") as f:
        merges = json.load(f)["model"]["merges"]
    ranks = {tuple(m.split(" ") if isinstance(m, str) else m): r for r, m in enumerate(merges)}
    rng = np.random.default_rng(seed)
    chars = [t for t in toks if len(t) == 1]
    words = [t for t in toks if t.startswith("▁")] + \
        ["".join(rng.choice(chars, rng.integers(2, 9))) for _ in range(n_random)]
    assert all(hf_bpe(w, ranks) == spm_by_score(w, vocab, scores) for w in words)
    return kv


def test_tokenizer_spm(tmp_path):
    d = str(tmp_path / "m")
    cfg, _ = make_model_dir(d, "llama")
    kv = check_spm_scores(d, 500)
    toks, types = kv["tokenizer.ggml.tokens"].value, kv["tokenizer.ggml.token_type"].value
    scores = kv["tokenizer.ggml.scores"].value
    assert toks[259:] == ["▁", "a", "b", "▁a", "ab", "▁ab", "ba", "▁b", "[PAD267]", "[PAD268]", "[PAD269]"]
    assert types[:4] == [2, 3, 3, 6] and types[258:261] == [6, 1, 1] and types[-3:] == [5, 5, 5]
    assert scores[262:267] == [0.0, -1.0, -2.0, -3.0, -4.0] and max(scores[3:262]) < -4.0
    assert kv["tokenizer.ggml.bos_token_id"].value == 1 and kv["tokenizer.ggml.eos_token_id"].value == 2
    assert kv["tokenizer.ggml.unknown_token_id"].value == 0 and kv["tokenizer.ggml.add_bos_token"] is True
    assert kv["tokenizer.ggml.add_space_prefix"] is True and kv["tokenizer.ggml.pre"] == "default"


def test_tokenizer_stories260k():
    d = os.path.join(SHARED, "models", "stories260K-hf")
    if not os.path.isdir(d):
        pytest.skip(f"shared data absent: {d}")
    kv = check_spm_scores(d, 2000)
    types = kv["tokenizer.ggml.token_type"].value
    assert types[:4] == [2, 3, 3, 6] and types.count(6) == 256


def test_cli(tmp_path):
    cfg, hf = make_model_dir(str(tmp_path / "m"), "llama")
    cli = os.path.join(REF, "gguf_ref.py")
    out = subprocess.run([sys.executable, cli, "convert", str(tmp_path / "m"), str(tmp_path / "m.gguf"),
                          "--type", "Q8_0"], capture_output=True, text=True, check=True).stdout
    assert "wrote" in out and "Q8_0" in out
    subprocess.run([sys.executable, cli, "dequant", str(tmp_path / "m.gguf"), "blk.1.ffn_up.weight",
                    str(tmp_path / "up.f32")], check=True)
    y = np.fromfile(str(tmp_path / "up.f32"), "<f4")
    assert np.array_equal(y, G.GGUFFile(str(tmp_path / "m.gguf")).tensor("blk.1.ffn_up.weight").reshape(-1))
    assert rel_rms(y, hf["model.layers.1.mlp.up_proj.weight"].reshape(-1)) <= BOUNDS["Q8_0"]
    info = subprocess.run([sys.executable, cli, "info", str(tmp_path / "m.gguf")], capture_output=True,
                          text=True, check=True).stdout
    assert "general.architecture = 'llama'" in info and "blk.1.ffn_up.weight" in info
    p = subprocess.run([sys.executable, cli, "dequant", str(tmp_path / "m.gguf"), "nope", "x"], capture_output=True)
    assert p.returncode != 0
