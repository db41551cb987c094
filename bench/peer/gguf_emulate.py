#!/usr/bin/python3
"""llama.cpp's arithmetic on a GGUF file, emulated in numpy: the numpy reference forward
(tests/reference/ref_model.py, float64) on the exactly dequantized weights, except that every
product with a block-quantized weight first rounds its input activations the way ggml's CPU
backend does (the weight type's `vec_dot_type`):

    Q4_0, Q5_0, Q8_0, IQ4_NL -> Q8_0: per 32 values d = amax / 127 (f32), q = round(x * 127 /
                                 amax) to nearest even (the AVX2 quantizer), the product uses fp16(d).
    Q4_1, Q5_1              -> Q8_1: as Q8_0, plus s = fp16(d * sum q) for the weight mins:
                                 y = sum_b dw_b dx_b (qw . qx)_b + mw_b s_b.
    Q2_K .. Q6_K, IQ4_XS    -> Q8_K: per 256 values the signed extreme value `max`,
                                 iscale = -127 / max, q = min(127, round(iscale x)), d = 1/iscale (f32).
    F16 / BF16              -> the activations rounded to F16 / BF16.
    F32                     -> unchanged.

Attention (f32 KV cache, no flash attention in llama_logits.c) stays exact. Used by
gguf_check.py --emulate to test whether the difference between the two engines on one file is
llama.cpp's activation rounding (then llama.cpp vs this emulation is ~0) rather than a bug on
either side. Shapes: x [T, K], weights [N, K] (rows of the numpy/HF order)."""
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "reference"))
import gguf_ref as G  # noqa: E402
import ref_model  # noqa: E402
from ref_config import load_config  # noqa: E402

VEC_DOT = {"Q4_0": "Q8_0", "Q5_0": "Q8_0", "Q8_0": "Q8_0", "IQ4_NL": "Q8_0", "Q4_1": "Q8_1",
           "Q5_1": "Q8_1", "Q2_K": "Q8_K", "Q3_K": "Q8_K", "Q4_K": "Q8_K", "Q5_K": "Q8_K",
           "Q6_K": "Q8_K", "IQ4_XS": "Q8_K", "F16": "F16", "BF16": "BF16", "F32": "F32"}


def _f16(x):
    return np.asarray(x, np.float32).astype(np.float16).astype(np.float64)


def _bf16(x):
    b = np.ascontiguousarray(x, np.float32).view(np.uint32)
    b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
    return b.view(np.float32).astype(np.float64)


def quant_q8_0(x):
    """x [T, K] -> (q [T, K/32, 32] ints as float64, d [T, K/32] fp16-rounded, d32 f32 d)."""
    xb = np.asarray(x, np.float32).reshape(x.shape[0], -1, 32)
    amax = np.abs(xb).max(-1)
    d = amax / np.float32(127)
    # ggml's AVX2 quantize_row_q8_0: id = 127 / amax (not 1 / d: they can differ by an ulp)
    idv = np.where(amax > 0, np.float32(127) / np.where(amax > 0, amax, 1), 0).astype(np.float32)
    q = np.rint(xb * idv[..., None])
    return q.astype(np.float64), _f16(d), d


def quant_q8_k(x):
    xb = np.asarray(x, np.float32).reshape(x.shape[0], -1, 256)
    idx = np.abs(xb).argmax(-1)
    mx = np.take_along_axis(xb, idx[..., None], -1)[..., 0]
    safe = np.where(mx != 0, mx, 1).astype(np.float32)
    iscale = np.where(mx != 0, np.float32(-127) / safe, 0).astype(np.float32)
    q = np.minimum(127, np.rint(xb * iscale[..., None]))
    d = np.where(iscale != 0, np.float32(1) / np.where(iscale != 0, iscale, 1), 0).astype(np.float32)
    return q.astype(np.float64), d.astype(np.float64)


class QLinear:
    """One weight [N, K] with its GGUF type; mins [N, K/32] for Q4_1/Q5_1 (else None)."""

    def __init__(self, w, ttype, mins=None):
        self.w, self.t, self.mins = w, ttype, mins
        self.base = w if mins is None else w - np.repeat(mins, 32, axis=1)

    def __call__(self, x):
        kind = VEC_DOT[self.t]
        if kind == "F32":
            return x @ self.w.T
        if kind == "F16":
            return _f16(x) @ self.w.T
        if kind == "BF16":
            return _bf16(x) @ self.w.T
        if kind == "Q8_K":
            q, d = quant_q8_k(x)
            return (q * d[..., None]).reshape(x.shape) @ self.w.T
        q, d, d32 = quant_q8_0(x)
        y = (q * d[..., None]).reshape(x.shape) @ self.base.T
        if kind == "Q8_1":
            s = _f16(d32.astype(np.float64) * q.sum(-1))  # [T, K/32]
            y = y + s @ self.mins.T
        return y


def _mins(f, g):
    """Q4_1/Q5_1 weight mins: the fp16 m at byte 2 of every block, [rows, K/32]."""
    ti = f.tensors[g]
    b = f.tensor_bytes(g).reshape(-1, G.type_size(ti.type))
    return b[:, 2:4].copy().view(np.float16).astype(np.float64).reshape(ti.shape[0], -1)


def _unpermute(w, heads):
    rows = w.shape[0]
    return w.reshape(heads, rows // heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


class EmulatedModel(ref_model.RefModel):
    """RefModel whose linears (and LM head) go through QLinear."""

    def __init__(self, gguf_path, model_dir):
        f = G.GGUFFile(gguf_path)
        cfg_json = json.load(open(os.path.join(model_dir, "config.json")))
        c = load_config(model_dir)
        llama = cfg_json["model_type"] in ("llama", "mistral")
        weights, self.q = {}, {}
        names = [n for n in G._safetensors(model_dir)]
        for hf in names:
            g = G.gguf_tensor_name(hf)
            if g is None or g not in f.tensors:
                continue  # the tied lm_head
            ti = f.tensors[g]
            w = f.tensor(g).astype(np.float64)
            mins = _mins(f, g) if ti.type in ("Q4_1", "Q5_1") else None
            if llama and (".attn_q." in g or ".attn_k." in g) and w.ndim == 2:
                h = c.num_attention_heads if ".attn_q." in g else c.num_key_value_heads
                w = _unpermute(w, h)
                mins = None if mins is None else _unpermute(mins, h)
            weights[hf] = w
            if w.ndim == 2:
                self.q[hf] = QLinear(w, ti.type, mins)
        super().__init__(c, weights)
        self._by_id = {id(w): self.q[n] for n, w in weights.items() if n in self.q}
        head = "lm_head.weight" if "lm_head.weight" in self.q else "model.embed_tokens.weight"
        self.head = self.q[head]

    def _linear(self, x, L, name):  # replaces RefModel's exact x @ W^T
        y = self._by_id[id(L[name])](x)
        b = L.get(name + "_b")
        return y if b is None else y + b

    def forward(self, ids, cache=None):
        return self.head(self.hidden(ids, cache))


def logits(gguf_path, model_dir, ids):
    """[T, V] float64 logits of one prompt under llama.cpp's activation rounding."""
    return EmulatedModel(gguf_path, model_dir).forward(ids)


def exact_logits(gguf_path, model_dir, ids):
    """[T, V] float64 logits of the exactly dequantized weights (no activation rounding)."""
    m = EmulatedModel(gguf_path, model_dir)
    for ql in m.q.values():
        ql.t = "F32"
    return m.forward(ids)
