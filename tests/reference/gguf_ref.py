#!/usr/bin/python3
"""GGUF reference on numpy only: writer, reader, GGML block (de)quantization and an HF -> GGUF
model converter, written from the GGUF spec and ggml's block definitions (ggml-common.h,
dequantize_row_* in ggml-quants.c), independently of the C++ loader it checks.

File layout (all little-endian), version 3:
    magic "GGUF" | u32 version | u64 n_tensors | u64 n_kv
    n_kv x (string key | u32 value type | value)       string = u64 byte length + UTF-8 bytes
    n_tensors x (string name | u32 n_dims | u64 ne[n_dims] | u32 ggml type | u64 offset)
    zero padding to `general.alignment` (u32, default 32)
    data section: each tensor at its offset (relative to the section start, a multiple of the
    alignment), zero padding between tensors and after the last.
Arrays are u32 element type | u64 count | elements; an array element may itself be an array.
ne[0] is the innermost (contiguous) dimension: numpy shape (rows, cols) is ne = [cols, rows].
Quantized rows are split into blocks along ne[0].

Dequantization computes in float32 in ggml's operation order (e.g. q2_K: (d*sc)*q - dmin*m),
without fused multiply-adds, so it is bit-exact with ggml's scalar C code compiled without
contraction. The quantizers are simpler than ggml's (a small range search per block) but
produce valid blocks with the usual error of each format.

CLI:
    gguf_ref.py convert MODEL_DIR OUT.gguf [--type Q4_K]     (also Q4_K_M, F32, F16, BF16, ...)
    gguf_ref.py dequant FILE.gguf TENSOR OUT.f32             (raw float32 in GGUF element order)
    gguf_ref.py info FILE.gguf
"""
import argparse
import json
import mmap
import os
import struct
import sys
from typing import Any, NamedTuple

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st_reader  # noqa: E402

F32 = np.float32

# ---------------------------------------------------------------------------------------------
# Metadata values

UINT8, INT8, UINT16, INT16, UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY, UINT64, INT64, FLOAT64 = \
    range(13)
_SCALAR = {UINT8: "<u1", INT8: "<i1", UINT16: "<u2", INT16: "<i2", UINT32: "<u4", INT32: "<i4",
           FLOAT32: "<f4", BOOL: "<u1", UINT64: "<u8", INT64: "<i8", FLOAT64: "<f8"}


class Val(NamedTuple):
    """A typed metadata value. For ARRAY, `value` is a list and `elem` the element type (the
    items of an array of arrays are Vals themselves)."""
    type: int
    value: Any
    elem: Any = None


def arr(elem, items):
    return Val(ARRAY, list(items), elem)


def _infer(x):
    """Python value -> Val (what llama.cpp's writer uses for such keys: u32 ints, f32 floats,
    i32 / f32 arrays)."""
    if isinstance(x, Val):
        return x
    if isinstance(x, (bool, np.bool_)):
        return Val(BOOL, bool(x))
    if isinstance(x, (int, np.integer)):
        return Val(UINT32 if 0 <= x < 2**32 else INT64, int(x))
    if isinstance(x, (float, np.floating)):
        return Val(FLOAT32, float(x))
    if isinstance(x, str):
        return Val(STRING, x)
    if isinstance(x, (list, tuple, np.ndarray)):
        items = list(x)
        if not items:
            return arr(INT32, [])
        first = _infer(items[0])
        elem = INT32 if first.type == UINT32 else first.type
        if elem == ARRAY:
            return arr(ARRAY, [_infer(v) for v in items])
        return arr(elem, [_infer(v).value for v in items])
    raise TypeError(f"no GGUF type for {type(x).__name__}")


def _str(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def _enc(v):
    """Encodes the value of a Val (without its type tag)."""
    if v.type == STRING:
        return _str(v.value)
    if v.type == ARRAY:
        head = struct.pack("<IQ", v.elem, len(v.value))
        if v.elem == STRING:
            return head + b"".join(_str(s) for s in v.value)
        if v.elem == ARRAY:
            return head + b"".join(_enc(_infer(a)) for a in v.value)  # each: type, count, items
        return head + np.array(v.value, dtype=_SCALAR[v.elem]).tobytes()
    return np.array(v.value, dtype=_SCALAR[v.type]).tobytes()

# ---------------------------------------------------------------------------------------------
# GGML types: name -> (type id, elements per block, bytes per block)


GGML_TYPES = {
    "F32": (0, 1, 4), "F16": (1, 1, 2), "Q4_0": (2, 32, 18), "Q4_1": (3, 32, 20),
    "Q5_0": (6, 32, 22), "Q5_1": (7, 32, 24), "Q8_0": (8, 32, 34), "Q2_K": (10, 256, 84),
    "Q3_K": (11, 256, 110), "Q4_K": (12, 256, 144), "Q5_K": (13, 256, 176),
    "Q6_K": (14, 256, 210), "IQ4_NL": (20, 32, 18), "IQ4_XS": (23, 256, 136),
    "I8": (24, 1, 1), "I16": (25, 1, 2), "I32": (26, 1, 4), "I64": (27, 1, 8), "F64": (28, 1, 8),
    "BF16": (30, 1, 2),
}
TYPE_NAMES = {v[0]: k for k, v in GGML_TYPES.items()}
# The types this module quantizes (the rest are read only).
QUANT_TYPES = ["F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K",
               "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS"]
# Byte offsets of the fp16 scale fields in each block (random_blocks keeps them finite).
F16_FIELDS = {"Q4_0": [0], "Q4_1": [0, 2], "Q5_0": [0], "Q5_1": [0, 2], "Q8_0": [0],
              "Q2_K": [80, 82], "Q3_K": [108], "Q4_K": [0, 2], "Q5_K": [0, 2], "Q6_K": [208],
              "IQ4_NL": [0], "IQ4_XS": [0]}
# The IQ4 non-linear codebook (kvalues_iq4nl), ascending.
IQ4_VALUES = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113],
                      dtype=np.float32)


def block_size(t):
    return GGML_TYPES[t][1]


def type_size(t):
    return GGML_TYPES[t][2]


def nbytes(t, n_elements):
    _, bs, ts = GGML_TYPES[t]
    if n_elements % bs:
        raise ValueError(f"{t}: {n_elements} elements is not a multiple of the block size {bs}")
    return n_elements // bs * ts

# ---------------------------------------------------------------------------------------------
# Bit-field helpers, shared by the block layouts below. nb = number of blocks.


def _h(b, off):
    """fp16 field at byte `off` of every block -> float32 [nb, 1]."""
    return b[:, off:off + 2].copy().view("<f2").astype(F32)


def _h_bytes(x):
    """float32 [nb] -> fp16 bytes [nb, 2] (round to nearest even, as ggml's FP32_TO_FP16)."""
    return np.asarray(x, F32).astype("<f2").view(np.uint8).reshape(-1, 2)


def _f16r(x):
    """The float32 value an fp16 field will hold."""
    return np.asarray(x, F32).astype(np.float16).astype(F32)


def _nib_unpack(qs, n):
    """Nibbles: each group of n bytes holds 2n elements, low nibbles first then high ones."""
    nb = qs.shape[0]
    g = qs.reshape(nb, -1, n)
    return np.stack([g & 15, g >> 4], axis=2).reshape(nb, -1)


def _nib_pack(q, n):
    nb = q.shape[0]
    g = q.reshape(nb, -1, 2, n).astype(np.uint8)
    return (g[:, :, 0] | (g[:, :, 1] << 4)).reshape(nb, -1)


_SH8 = np.arange(8, dtype=np.uint8).reshape(1, 8, 1)
_SH2 = (2 * np.arange(4, dtype=np.uint8)).reshape(1, 1, 4, 1)


def _bits_unpack(b):
    """32 bytes -> 256 bits: element 32*i + l is bit i of byte l (q3_K hmask, q5_K qh)."""
    return ((b[:, None, :] >> _SH8) & 1).reshape(b.shape[0], -1)


def _bits_pack(q):
    return (q.reshape(-1, 8, 32).astype(np.uint8) << _SH8).sum(1, dtype=np.uint8)


def _crumbs_unpack(b):
    """64 bytes -> 256 2-bit values: element 128*h + 32*j + l is bits 2j..2j+1 of byte
    32*h + l (q2_K / q3_K qs, q6_K qh)."""
    nb = b.shape[0]
    return ((b.reshape(nb, 2, 1, 32) >> _SH2) & 3).reshape(nb, -1)


def _crumbs_pack(q):
    nb = q.shape[0]
    return (q.reshape(nb, 2, 4, 32).astype(np.uint8) << _SH2).sum(2, dtype=np.uint8).reshape(nb, -1)


def _div(a, b):
    """a / b, 0 where b == 0 (all-zero blocks)."""
    a, b = np.broadcast_arrays(np.asarray(a, F32), np.asarray(b, F32))
    return np.divide(a, b, out=np.zeros(a.shape, F32), where=b != 0)


def _absmax_signed(x):
    """The element of largest magnitude along the last axis, with its sign."""
    i = np.abs(x).argmax(-1)
    return np.take_along_axis(x, i[..., None], -1)[..., 0]


def _q(x, scale, lo, hi):
    """round(x / scale) clamped to [lo, hi] (scale broadcast over the last axis)."""
    return np.clip(np.rint(_div(x, scale[..., None])), lo, hi).astype(np.int32)


def _shrink(x, scale, offset, lo, hi):
    """Per block (last axis of x), the grid x ~= scale * q + offset (q in [lo, hi]) narrowed by
    the factor among a few <= 1 that gives the least squared error: clipping a few outliers
    beats a coarser grid. Returns (scale, offset)."""
    best = (scale, offset, np.full(scale.shape, np.inf, F32))
    for f in (1.0, 0.95, 0.9, 0.85, 0.8, 0.75, 0.7):
        s, o = (scale * f).astype(F32), (offset * f).astype(F32)
        q = _q(x - o[..., None], s, lo, hi)
        err = ((q * s[..., None] + o[..., None] - x) ** 2).sum(-1)
        better = err < best[2]
        best = tuple(np.where(better, new, old) for new, old in zip((s, o, err), best))
    return best[0], best[1]


def _iq4_index(v):
    """Index of the nearest IQ4 codebook value."""
    return np.searchsorted((IQ4_VALUES[1:] + IQ4_VALUES[:-1]) / 2, v).astype(np.uint8)


def _iq4_scale(x):
    """Per block (last axis) a float scale for the IQ4 codebook: the largest-magnitude element
    mapped onto one of several codebook points near either end, the best by squared error."""
    m = _absmax_signed(x)
    best, best_err = np.zeros_like(m), np.full(m.shape, np.inf, F32)
    for target in (-127, -120, -113, -106, -99, -92, 113, 107, 101, 95, 89):
        d = (m / F32(target)).astype(F32)
        err = ((IQ4_VALUES[_iq4_index(_div(x, d[..., None]))] * d[..., None] - x) ** 2).sum(-1)
        better = err < best_err
        best, best_err = np.where(better, d, best), np.where(better, err, best_err)
    return best

# ---------------------------------------------------------------------------------------------
# Block formats. Each dequantizer takes blocks [nb, bytes per block] (uint8) and returns
# float32 [nb, elements per block]; each quantizer takes float32 [nb, elements per block] and
# returns uint8 [nb, bytes per block].

# q4_0 (32): d fp16 | qs[16]. q_j = low nibble of qs[j], q_{j+16} = high nibble; x = (q - 8) * d.


def _deq_q4_0(b):
    return (_nib_unpack(b[:, 2:], 16).astype(np.int8) - 8).astype(F32) * _h(b, 0)


def _quant_q4_0(x):
    d = _f16r(_shrink(x, _absmax_signed(x) / -8, np.zeros(len(x), F32), -8, 7)[0])  # extreme -> -8
    q = _q(x, d, -8, 7) + 8
    return np.hstack([_h_bytes(d), _nib_pack(q, 16)])

# q4_1 (32): d fp16 | m fp16 | qs[16] (nibbles as q4_0); x = q * d + m.


def _deq_q4_1(b):
    return _nib_unpack(b[:, 4:], 16).astype(F32) * _h(b, 0) + _h(b, 2)


def _quant_q4_1(x, qmax=15):
    lo = x.min(-1)
    d, m = _shrink(x, (x.max(-1) - lo) / qmax, lo, 0, qmax)
    d, m = _f16r(d), _f16r(m)
    return d, m, _q(x - m[:, None], d, 0, qmax)


def _quant_q4_1_blocks(x):
    d, m, q = _quant_q4_1(x)
    return np.hstack([_h_bytes(d), _h_bytes(m), _nib_pack(q, 16)])

# q5_0 (32): d fp16 | qh u32 | qs[16]. Bit i of qh is bit 4 of element i (the low 4 bits as
# q4_0); x = (q - 16) * d.  q5_1 (32): d fp16 | m fp16 | qh u32 | qs[16]; x = q * d + m.


def _q5_unpack(b):
    qh = b[:, :4].copy().view("<u4")
    hi = (qh >> np.arange(32, dtype=np.uint32)) & 1
    return _nib_unpack(b[:, 4:], 16) | (hi << 4).astype(np.uint8)


def _q5_pack(q):
    hi = ((q >> 4) & 1).astype(np.uint32) << np.arange(32, dtype=np.uint32)
    qh = hi.sum(1, dtype=np.uint32).astype("<u4").view(np.uint8).reshape(-1, 4)
    return np.hstack([qh, _nib_pack(q & 15, 16)])


def _deq_q5_0(b):
    return (_q5_unpack(b[:, 2:]).astype(np.int8) - 16).astype(F32) * _h(b, 0)


def _quant_q5_0(x):
    d = _f16r(_shrink(x, _absmax_signed(x) / -16, np.zeros(len(x), F32), -16, 15)[0])
    return np.hstack([_h_bytes(d), _q5_pack(_q(x, d, -16, 15) + 16)])


def _deq_q5_1(b):
    return _q5_unpack(b[:, 4:]).astype(F32) * _h(b, 0) + _h(b, 2)


def _quant_q5_1(x):
    d, m, q = _quant_q4_1(x, 31)
    return np.hstack([_h_bytes(d), _h_bytes(m), _q5_pack(q)])

# q8_0 (32): d fp16 | qs int8[32]; x = q * d.


def _deq_q8_0(b):
    return b[:, 2:].view(np.int8).astype(F32) * _h(b, 0)


def _quant_q8_0(x):
    d = _f16r(np.abs(x).max(-1) / 127)
    return np.hstack([_h_bytes(d), _q(x, d, -127, 127).astype(np.int8).view(np.uint8)])

# K-quants: super-blocks of 256 elements in sub-blocks of 16 or 32, with sub-block scales
# quantized against an fp16 super-block scale d (and dmin for the mins).


def _k_asym(x, qmax, smax):
    """x [nb, nsub, n] ~= (d*sc) * q - (dmin*m), q in [0, qmax], sc, m in [0, smax]. The mins are
    stored as non-negative offsets, so each sub-block's range is extended to include 0."""
    lo = np.minimum(x.min(-1), 0)
    s, lo = _shrink(x, (x.max(-1) - lo) / qmax, lo, 0, qmax)
    d, dmin = _f16r(s.max(-1) / smax), _f16r(-lo.min(-1) / smax)
    sc = np.clip(np.ceil(_div(s, d[:, None])), 0, smax)  # ceil: the top of the range still fits
    m = np.clip(np.rint(_div(-lo, dmin[:, None])), 0, smax)
    q = _q(x + (dmin[:, None] * m)[..., None], d[:, None] * sc, 0, qmax)
    return d, dmin, sc.astype(np.uint8), m.astype(np.uint8), q.reshape(x.shape[0], -1)


def _k_sym(x, qmax, smax):
    """x [nb, nsub, n] ~= (d*sc) * q, q in [-qmax, qmax-1], sc in [-smax, smax-1]: the largest-
    magnitude element (sub-block scale) maps to -qmax (-smax)."""
    s = _shrink(x, _absmax_signed(x) / -qmax, np.zeros(x.shape[:-1], F32), -qmax, qmax - 1)[0]
    d = _f16r(_absmax_signed(s) / -smax)
    sc = np.clip(np.rint(_div(s, d[:, None])), -smax, smax - 1)
    q = _q(x, d[:, None] * sc, -qmax, qmax - 1)
    return d, sc.astype(np.int32), q.reshape(x.shape[0], -1)

# q2_K (256, 16 sub-blocks of 16): scales[16] (low nibble sc, high nibble m) | qs[64] (2-bit,
# _crumbs layout) | d fp16 | dmin fp16; x = (d*sc) * q - dmin*m, sub-block = element // 16.


def _deq_q2_K(b):
    sc = b[:, :16]
    dl = _h(b, 80) * (sc & 15).astype(F32)
    ml = _h(b, 82) * (sc >> 4).astype(F32)
    q = _crumbs_unpack(b[:, 16:80]).astype(F32).reshape(-1, 16, 16)
    return (dl[..., None] * q - ml[..., None]).reshape(-1, 256)


def _quant_q2_K(x):
    d, dmin, sc, m, q = _k_asym(x.reshape(-1, 16, 16), 3, 15)
    return np.hstack([sc | (m << 4), _crumbs_pack(q), _h_bytes(d), _h_bytes(dmin)])

# q3_K (256, 16 sub-blocks of 16): hmask[32] | qs[64] (low 2 bits, _crumbs layout) | scales[12]
# (16 x 6 bits, below) | d fp16. The 3-bit value is low2 - (hmask bit ? 0 : 4), hmask bit of
# element 32*i + l being bit i of hmask[l]; x = d * (sc - 32) * q.
# Scales: 4 low bits of sc[0..7] in the low nibbles of bytes 0..7, of sc[8..15] in their high
# nibbles; the 2 high bits of sc[i], sc[i+4], sc[i+8], sc[i+12] in byte 8+i, bits 0-1, 2-3, 4-5, 6-7.


def _q3_scales_unpack(s):
    lo = np.concatenate([s[:, :8] & 15, s[:, :8] >> 4], axis=1)
    hi = (s[:, None, 8:12] >> _SH2[0]) & 3  # [nb, 4 (i // 4), 4 (i % 4)]
    return (lo | (hi.reshape(-1, 16) << 4)).astype(np.int32) - 32


def _q3_scales_pack(sc):
    u = (sc + 32).astype(np.uint8)
    lo = (u[:, :8] & 15) | ((u[:, 8:] & 15) << 4)
    hi = ((u >> 4).reshape(-1, 4, 4) << _SH2[0]).sum(1, dtype=np.uint8)
    return np.hstack([lo, hi])


def _deq_q3_K(b):
    q = _crumbs_unpack(b[:, 32:96]).astype(np.int8) - 4 * (1 - _bits_unpack(b[:, :32])).astype(np.int8)
    dl = _h(b, 108) * _q3_scales_unpack(b[:, 96:108]).astype(F32)
    return (dl[..., None] * q.astype(F32).reshape(-1, 16, 16)).reshape(-1, 256)


def _quant_q3_K(x):
    d, sc, q = _k_sym(x.reshape(-1, 16, 16), 4, 32)
    u = q + 4  # 0..7: bit 2 goes to hmask (set = "do not subtract 4")
    return np.hstack([_bits_pack(u >> 2), _crumbs_pack(u & 3), _q3_scales_pack(sc), _h_bytes(d)])

# q4_K (256, 8 sub-blocks of 32): d fp16 | dmin fp16 | scales[12] | qs[128]. Elements 64c..64c+31
# are the low nibbles of qs[32c..32c+31], the next 32 their high nibbles; x = (d*sc) * q - dmin*m.
# scales[12] packs 8 6-bit scales sc and mins m: for j < 4, sc[j] = bits 0-5 of byte j and
# m[j] = bits 0-5 of byte j+4; for j >= 4, byte j+4 holds the low 4 bits of sc[j] (low nibble)
# and m[j] (high nibble), and their 2 high bits are bits 6-7 of bytes j-4 (sc) and j (m).
# q5_K (256): d | dmin | scales[12] | qh[32] | qs[128]: q4_K plus bit 4 of element 32*i + l in
# bit i of qh[l].


def _k4_scales_unpack(s):
    sc = np.concatenate([s[:, :4] & 63, (s[:, 8:] & 15) | ((s[:, :4] >> 6) << 4)], axis=1)
    m = np.concatenate([s[:, 4:8] & 63, (s[:, 8:] >> 4) | ((s[:, 4:8] >> 6) << 4)], axis=1)
    return sc.astype(F32), m.astype(F32)


def _k4_scales_pack(sc, m):
    return np.hstack([sc[:, :4] | ((sc[:, 4:] >> 4) << 6), m[:, :4] | ((m[:, 4:] >> 4) << 6),
                      (sc[:, 4:] & 15) | ((m[:, 4:] & 15) << 4)])


def _deq_k4(b, q):
    sc, m = _k4_scales_unpack(b[:, 4:16])
    d1, m1 = _h(b, 0) * sc, _h(b, 2) * m
    return (d1[..., None] * q.astype(F32).reshape(-1, 8, 32) - m1[..., None]).reshape(-1, 256)


def _deq_q4_K(b):
    return _deq_k4(b, _nib_unpack(b[:, 16:], 32))


def _deq_q5_K(b):
    return _deq_k4(b, _nib_unpack(b[:, 48:], 32) | (_bits_unpack(b[:, 16:48]) << 4))


def _quant_q4_K(x):
    d, dmin, sc, m, q = _k_asym(x.reshape(-1, 8, 32), 15, 63)
    return np.hstack([_h_bytes(d), _h_bytes(dmin), _k4_scales_pack(sc, m), _nib_pack(q, 32)])


def _quant_q5_K(x):
    d, dmin, sc, m, q = _k_asym(x.reshape(-1, 8, 32), 31, 63)
    return np.hstack([_h_bytes(d), _h_bytes(dmin), _k4_scales_pack(sc, m), _bits_pack(q >> 4),
                      _nib_pack(q & 15, 32)])

# q6_K (256, 16 sub-blocks of 16): ql[128] | qh[64] | scales int8[16] | d fp16. Element
# 128*h + 32*g + l (g < 4, l < 32): low 4 bits = nibble g // 2 of ql[64*h + 32*(g % 2) + l],
# high 2 bits = bits 2g..2g+1 of qh[32*h + l]; x = (d * sc[element // 16]) * (q - 32).


def _deq_q6_K(b):
    q = (_nib_unpack(b[:, :128], 64) | (_crumbs_unpack(b[:, 128:192]) << 4)).astype(np.int8) - 32
    dl = _h(b, 208) * b[:, 192:208].view(np.int8).astype(F32)
    return (dl[..., None] * q.astype(F32).reshape(-1, 16, 16)).reshape(-1, 256)


def _quant_q6_K(x):
    d, sc, q = _k_sym(x.reshape(-1, 16, 16), 32, 128)
    u = q + 32
    return np.hstack([_nib_pack(u & 15, 64), _crumbs_pack(u >> 4),
                      sc.astype(np.int8).view(np.uint8), _h_bytes(d)])

# iq4_nl (32): d fp16 | qs[16] (nibbles as q4_0); x = d * IQ4_VALUES[q].
# iq4_xs (256, 8 sub-blocks of 32): d fp16 | scales_h u16 | scales_l[4] | qs[128] (nibbles:
# 16 bytes per sub-block). 6-bit ls of sub-block i: low 4 bits = nibble i % 2 of scales_l[i // 2],
# high 2 bits = bits 2i..2i+1 of scales_h; x = (d * (ls - 32)) * IQ4_VALUES[q].


def _deq_iq4_nl(b):
    return _h(b, 0) * IQ4_VALUES[_nib_unpack(b[:, 2:], 16)]


def _quant_iq4_nl(x):
    d = _f16r(_iq4_scale(x))
    return np.hstack([_h_bytes(d), _nib_pack(_iq4_index(_div(x, d[:, None])), 16)])


def _deq_iq4_xs(b):
    sh = b[:, 2:4].copy().view("<u2").astype(np.int32)  # [nb, 1]
    sl = b[:, 4:8]
    lo = np.stack([sl & 15, sl >> 4], axis=2).reshape(-1, 8)  # sub-block i: nibble i % 2 of byte i // 2
    ls = lo.astype(np.int32) | (((sh >> (2 * np.arange(8))) & 3) << 4)
    dl = _h(b, 0) * (ls - 32).astype(F32)
    v = IQ4_VALUES[_nib_unpack(b[:, 8:], 16)].reshape(-1, 8, 32)
    return (dl[..., None] * v).reshape(-1, 256)


def _quant_iq4_xs(x):
    x = x.reshape(-1, 8, 32)
    s = _iq4_scale(x)
    d = _f16r(_absmax_signed(s) / -32)
    ls = np.clip(np.rint(_div(s, d[:, None])), -32, 31).astype(np.int32) + 32
    q = _iq4_index(_div(x, (d[:, None] * (ls - 32).astype(F32))[..., None]))
    sh = ((ls >> 4) << (2 * np.arange(8))).sum(1).astype("<u2").view(np.uint8).reshape(-1, 2)
    sl = (ls[:, 0::2] & 15) | ((ls[:, 1::2] & 15) << 4)
    return np.hstack([_h_bytes(d), sh, sl.astype(np.uint8), _nib_pack(q.reshape(len(x), -1), 16)])


_BLOCK_CODECS = {
    "Q4_0": (_deq_q4_0, _quant_q4_0), "Q4_1": (_deq_q4_1, _quant_q4_1_blocks),
    "Q5_0": (_deq_q5_0, _quant_q5_0), "Q5_1": (_deq_q5_1, _quant_q5_1),
    "Q8_0": (_deq_q8_0, _quant_q8_0), "Q2_K": (_deq_q2_K, _quant_q2_K),
    "Q3_K": (_deq_q3_K, _quant_q3_K), "Q4_K": (_deq_q4_K, _quant_q4_K),
    "Q5_K": (_deq_q5_K, _quant_q5_K), "Q6_K": (_deq_q6_K, _quant_q6_K),
    "IQ4_NL": (_deq_iq4_nl, _quant_iq4_nl), "IQ4_XS": (_deq_iq4_xs, _quant_iq4_xs),
}
_PLAIN = {"F32": "<f4", "F16": "<f2", "F64": "<f8", "I8": "i1", "I16": "<i2", "I32": "<i4",
          "I64": "<i8"}


def dequantize(data, ttype):
    """Bytes (or a uint8 array) of `ttype` -> float32 1-D array, in element order."""
    raw = np.frombuffer(data, np.uint8) if isinstance(data, (bytes, bytearray, memoryview)) \
        else np.ascontiguousarray(data, np.uint8).reshape(-1)
    _, bs, ts = GGML_TYPES[ttype]
    if raw.size % ts:
        raise ValueError(f"{ttype}: {raw.size} bytes is not a multiple of the block size {ts}")
    if ttype == "BF16":
        return st_reader.bf16_bits_to_f32(raw.view("<u2"))
    if ttype in _PLAIN:
        return raw.view(_PLAIN[ttype]).astype(F32)
    return _BLOCK_CODECS[ttype][0](raw.reshape(-1, ts)).reshape(-1)


def quantize(x, ttype, chunk=1 << 16):
    """float32 values (any shape, size a multiple of the block size) -> bytes of `ttype`,
    blocks taken along the flattened order (rows of a tensor whose ne[0] is a multiple of the
    block size never share a block)."""
    x = np.ascontiguousarray(x, F32).reshape(-1)
    nbytes(ttype, x.size)
    if ttype == "F32":
        return x.astype("<f4").tobytes()
    if ttype == "F16":
        return x.astype("<f2").tobytes()
    if ttype == "BF16":
        return st_reader.f32_to_bf16_bits(x).astype("<u2").tobytes()
    bs = block_size(ttype)
    blocks = x.reshape(-1, bs)
    return b"".join(_BLOCK_CODECS[ttype][1](blocks[i:i + chunk]).astype(np.uint8).tobytes()
                    for i in range(0, len(blocks), chunk))


def random_blocks(ttype, n_blocks, rng):
    """n_blocks random but valid blocks of `ttype` (bytes): random bits everywhere except the
    fp16 scales, which get finite values of either sign and magnitude 1e-4..1; float types get
    finite normal(0, 1) values."""
    _, bs, ts = GGML_TYPES[ttype]
    if ttype in ("F32", "F16", "BF16"):
        return quantize(rng.standard_normal(n_blocks).astype(F32), ttype)
    b = rng.integers(0, 256, size=(n_blocks, ts), dtype=np.uint8)
    for off in F16_FIELDS[ttype]:
        v = rng.choice([-1, 1], n_blocks) * 10.0 ** rng.uniform(-4, 0, n_blocks)
        b[:, off:off + 2] = _h_bytes(v)
    return b.tobytes()

# ---------------------------------------------------------------------------------------------
# Writer


class Tensor(NamedTuple):
    """A tensor to write: numpy-order shape (ne reversed), a GGML type name, and its bytes (or a
    zero-argument function returning them, called while writing)."""
    name: str
    shape: tuple
    type: str
    data: Any


def _pad(n, align):
    return (align - n % align) % align


def gguf_chunks(kv, tensors, *, alignment=None, version=3, magic=b"GGUF", n_kv=None,
                n_tensors=None, offsets=None, check=True):
    """Yields the bytes of a GGUF file. kv: {key: value or Val} in file order (or a list of
    (key, value) pairs, which may repeat a key); tensors: Tensor list. The keyword arguments make
    deliberately broken files: a layout alignment other than general.alignment, another version
    / magic, wrong counts, {name: offset} overrides, and check=False to accept data whose size
    does not match shape and type."""
    kv = [(k, _infer(v)) for k, v in (kv.items() if isinstance(kv, dict) else kv)]
    if alignment is None:
        alignment = dict(kv)["general.alignment"].value if "general.alignment" in dict(kv) else 32
    tensors = list(tensors)
    head = [magic + struct.pack("<IQQ", version, len(tensors) if n_tensors is None else n_tensors,
                                len(kv) if n_kv is None else n_kv)]
    head += [_str(k) + struct.pack("<I", v.type) + _enc(v) for k, v in kv]
    pos, sizes = 0, []
    for t in tensors:
        size = nbytes(t.type, int(np.prod(t.shape, dtype=np.int64)))
        sizes.append(size)
        off = (offsets or {}).get(t.name, pos)
        ne = [int(d) for d in reversed(t.shape)]
        head.append(_str(t.name) + struct.pack(f"<I{len(ne)}QIQ", len(ne), *ne, GGML_TYPES[t.type][0], off))
        pos += size + _pad(size, alignment)
    head = b"".join(head)
    yield head + b"\0" * _pad(len(head), alignment)
    for t, size in zip(tensors, sizes):
        data = bytes(t.data() if callable(t.data) else t.data)
        if check and len(data) != size:
            raise ValueError(f"{t.name}: {len(data)} bytes, {t.type}{list(t.shape)} needs {size}")
        yield data
        yield b"\0" * _pad(len(data), alignment)


def gguf_bytes(kv, tensors, **kw):
    """The whole file as bytes (see gguf_chunks for the keyword arguments); tests patch or
    truncate them to make corrupt files."""
    return b"".join(gguf_chunks(kv, tensors, **kw))


def write_gguf(path, kv, tensors, **kw):
    with open(path, "wb") as f:
        for c in gguf_chunks(kv, tensors, **kw):
            f.write(c)

# ---------------------------------------------------------------------------------------------
# Reader


class TensorInfo(NamedTuple):
    name: str
    ne: tuple        # GGUF order (ne[0] innermost)
    type: str
    offset: int      # relative to the data section
    start: int       # absolute file offset of the data
    nbytes: int
    info_pos: int    # absolute file offset of the tensor info record (its name string)

    @property
    def shape(self):
        return tuple(reversed(self.ne))


class GGUFFile:
    """Parses a GGUF file (path or bytes) and checks it: magic, version 2/3, bounds of every
    string / array / tensor, value and tensor types, unique keys and names, alignment (a u32
    power of two), tensor offsets aligned and data inside the file, rows whole blocks.
    Raises ValueError on any violation. kv: {key: Val}; tensors: {name: TensorInfo}."""

    MAX_DIMS = 4

    def __init__(self, src):
        if isinstance(src, (str, os.PathLike)):
            with open(src, "rb") as f:  # an mmap slices into bytes much faster than a memmap
                self._raw = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) \
                    if os.fstat(f.fileno()).st_size else b""
        else:
            self._raw = bytes(src)
        self.buf = np.frombuffer(self._raw, np.uint8)  # tensor data views
        self.pos = 0
        if self._take(4) != b"GGUF":
            raise ValueError("bad magic (not a GGUF file)")
        self.version, n_tensors, n_kv = self._unpack("<IQQ")
        if self.version not in (2, 3):
            raise ValueError(f"unsupported GGUF version {self.version}")
        if n_kv > len(self.buf) or n_tensors > len(self.buf):
            raise ValueError(f"implausible counts: {n_tensors} tensors, {n_kv} keys")
        self.kv, self.kv_pos = {}, {}
        for _ in range(n_kv):
            at = self.pos
            key = self._string()
            if key in self.kv:
                raise ValueError(f"duplicate key {key!r}")
            self.kv[key] = self._value(self._unpack("<I")[0])
            self.kv_pos[key] = at
        a = self.kv.get("general.alignment", Val(UINT32, 32))
        if a.type != UINT32 or a.value <= 0 or a.value & (a.value - 1):
            raise ValueError(f"general.alignment must be a u32 power of two, got {a}")
        self.alignment = a.value
        infos = []
        for _ in range(n_tensors):
            at = self.pos
            name = self._string()
            (nd,) = self._unpack("<I")
            if not 1 <= nd <= self.MAX_DIMS:
                raise ValueError(f"tensor {name!r}: {nd} dimensions")
            ne = self._unpack(f"<{nd}Q")
            tid, off = self._unpack("<IQ")
            if tid not in TYPE_NAMES:
                raise ValueError(f"tensor {name!r}: unknown ggml type {tid}")
            infos.append((name, ne, TYPE_NAMES[tid], off, at))
        self.data_start = self.pos + _pad(self.pos, self.alignment)
        self.tensors = {}
        for name, ne, t, off, at in infos:
            if name in self.tensors:
                raise ValueError(f"duplicate tensor {name!r}")
            if ne[0] % block_size(t):
                raise ValueError(f"tensor {name!r}: ne[0]={ne[0]} not a multiple of {t}'s block")
            n = int(np.prod(ne, dtype=np.float64))
            if n >= 2**62:
                raise ValueError(f"tensor {name!r}: too many elements")
            size = nbytes(t, n)
            if off % self.alignment:
                raise ValueError(f"tensor {name!r}: offset {off} not aligned to {self.alignment}")
            if self.data_start + off + size > len(self.buf):
                raise ValueError(f"tensor {name!r}: data [{off}, {off + size}) past the end of the file")
            self.tensors[name] = TensorInfo(name, tuple(ne), t, off, self.data_start + off, size, at)
        spans = sorted((ti.offset, ti.offset + ti.nbytes, ti.name) for ti in self.tensors.values())
        for (_, e0, a0), (b1, _, a1) in zip(spans, spans[1:]):
            if b1 < e0:
                raise ValueError(f"tensors {a0!r} and {a1!r} overlap")

    def _take(self, n):
        if n > len(self.buf) - self.pos:
            raise ValueError(f"truncated file: need {n} bytes at offset {self.pos}")
        b = self._raw[self.pos:self.pos + n]
        self.pos += n
        return b

    def _unpack(self, fmt):
        return struct.unpack(fmt, self._take(struct.calcsize(fmt)))

    def _string(self):
        (n,) = self._unpack("<Q")
        return self._take(n).decode("utf-8")

    def _value(self, vt):
        if vt == STRING:
            return Val(STRING, self._string())
        if vt == ARRAY:
            et, n = self._unpack("<IQ")
            if et == STRING or et == ARRAY:
                if n > len(self.buf) - self.pos:
                    raise ValueError(f"array of {n} elements past the end of the file")
                items = [self._value(et) for _ in range(n)]
                return arr(et, [v.value for v in items] if et == STRING else items)
            if et not in _SCALAR:
                raise ValueError(f"unknown array element type {et}")
            w = np.dtype(_SCALAR[et]).itemsize
            if n > (len(self.buf) - self.pos) // w:
                raise ValueError(f"array of {n} elements past the end of the file")
            a = np.frombuffer(self._take(n * w), _SCALAR[et])
            return arr(et, (a != 0).tolist() if et == BOOL else a.tolist())
        if vt not in _SCALAR:
            raise ValueError(f"unknown value type {vt} at offset {self.pos - 4}")
        (v,) = np.frombuffer(self._take(np.dtype(_SCALAR[vt]).itemsize), _SCALAR[vt]).tolist()
        return Val(vt, bool(v) if vt == BOOL else v)

    def get(self, key, default=None):
        """Plain value of a key (lists for arrays)."""
        v = self.kv.get(key)
        return default if v is None else v.value

    def tensor_bytes(self, name):
        ti = self.tensors[name]
        return self.buf[ti.start:ti.start + ti.nbytes]

    def tensor(self, name):
        """Dequantized float32 array in numpy-order shape."""
        ti = self.tensors[name]
        return dequantize(self.tensor_bytes(name), ti.type).reshape(ti.shape)

# ---------------------------------------------------------------------------------------------
# HF model directory -> GGUF, laid out as llama.cpp's converter (+ llama-quantize) would.


ARCHS = {"qwen3": "qwen3", "qwen2": "qwen2", "llama": "llama", "mistral": "llama", "qwen3_moe": "qwen3moe"}
_LAYER = {"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
          "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
          "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm",
          "self_attn.k_norm": "attn_k_norm", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
          "mlp.down_proj": "ffn_down", "mlp.gate": "ffn_gate_inp"}
# general.file_type (llama_ftype) per requested type.
FILE_TYPES = {"F32": 0, "F16": 1, "Q4_0": 2, "Q4_1": 3, "Q8_0": 7, "Q5_0": 8, "Q5_1": 9,
              "Q2_K": 10, "Q3_K": 11, "Q4_K": 14, "Q4_K_M": 15, "Q5_K": 16, "Q6_K": 18,
              "IQ4_NL": 25, "IQ4_XS": 30, "BF16": 32}
# llama-quantize's replacement when a row (ne[0]) is not a whole number of 256-blocks; F16 when
# that does not fit either.
_FALLBACK = {"Q2_K": "Q4_0", "Q3_K": "Q4_0", "Q4_K": "Q5_0", "Q5_K": "Q5_1", "Q6_K": "Q8_0",
             "IQ4_XS": "IQ4_NL"}
TOKEN_NORMAL, TOKEN_UNKNOWN, TOKEN_CONTROL, TOKEN_USER_DEFINED, TOKEN_UNUSED, TOKEN_BYTE = range(1, 7)


def gguf_tensor_name(hf):
    """HF parameter name -> llama.cpp tensor name (None: not converted)."""
    fixed = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
             "lm_head.weight": "output.weight"}
    if hf in fixed:
        return fixed[hf]
    p = hf.split(".")
    if p[:2] != ["model", "layers"] or p[-1] not in ("weight", "bias"):
        return None
    base = _LAYER.get(".".join(p[3:-1]))
    return f"blk.{p[2]}.{base}.{p[-1]}" if base else None


def tensor_type(gname, shape, ttype):
    """The GGML type a tensor gets: F32 for 1-D tensors; the Q4_K_M-like recipe (attn_v,
    ffn_down and output (a tied token_embd: model_to_gguf) in Q6_K, the rest Q4_K); the fallback for rows that are not whole blocks."""
    if len(shape) == 1 or gname.endswith("ffn_gate_inp.weight"):  # llama-quantize keeps routers F32
        return "F32"
    t = ttype
    if ttype == "Q4_K_M":
        t = "Q6_K" if gname.endswith(("attn_v.weight", "ffn_down.weight", "ffn_down_exps.weight")) \
            or gname == "output.weight" else "Q4_K"
    if shape[-1] % block_size(t):
        t = _FALLBACK.get(t, t)
        if shape[-1] % block_size(t):
            t = "F16"
    return t


def permute_qk(w, n_head):
    """HF's rotate-half q/k rows -> llama.cpp's interleaved RoPE pairs: per head, row i of the
    first half and row i of the second half become rows 2i and 2i+1 (weights and biases)."""
    rows = w.shape[0]
    return w.reshape(n_head, 2, rows // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _safetensors(model_dir):
    """{name: (shape, load)} for every tensor of the directory's *.safetensors; load() returns
    the float32 values (bf16 / f16 widen exactly)."""
    files = sorted(f for f in os.listdir(model_dir) if f.endswith(".safetensors"))
    if not files:
        raise ValueError(f"{model_dir}: no *.safetensors")
    out = {}
    for fn in files:
        path = os.path.join(model_dir, fn)
        header, base = st_reader.read_header(path)
        for name, h in header.items():
            if h["dtype"] not in ("BF16", "F16", "F32"):
                raise ValueError(f"{name}: dtype {h['dtype']} not supported")

            def load(path=path, h=h, base=base):
                b, e = h["data_offsets"]
                raw = np.memmap(path, np.uint8, mode="r")[base + b:base + e]
                a = st_reader.bf16_bits_to_f32(raw.view("<u2")) if h["dtype"] == "BF16" \
                    else raw.view("<f2" if h["dtype"] == "F16" else "<f4").astype(F32)
                return a.reshape(h["shape"])
            out[name] = (tuple(h["shape"]), load)
    return out


def _read_json(path):
    if not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _token_id(tok_cfg, key, ids):
    v = tok_cfg.get(key)
    if isinstance(v, dict):
        v = v.get("content")
    return ids.get(v) if isinstance(v, str) else None


def tokenizer_kv(model_dir, vocab_size, cfg):
    """tokenizer.* metadata from tokenizer.json (+ tokenizer_config.json): "gpt2" for byte-level
    BPE, "llama" (SentencePiece) for BPE over U+2581-marked text with <0xAB> byte tokens."""
    tok = _read_json(os.path.join(model_dir, "tokenizer.json"))
    tok_cfg = _read_json(os.path.join(model_dir, "tokenizer_config.json"))
    model = tok["model"]
    if model.get("type", "BPE") != "BPE":
        raise ValueError(f"tokenizer model {model.get('type')!r}: only BPE is converted")
    ids = dict(model["vocab"])
    added = {a["id"]: a for a in tok.get("added_tokens", [])}
    ids.update({a["content"]: i for i, a in added.items()})
    by_id = {i: s for s, i in ids.items()}
    merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])]
    byte_level = "ByteLevel" in json.dumps([tok.get("pre_tokenizer"), tok.get("decoder")])
    unk = ids.get(model.get("unk_token")) if model.get("unk_token") else None
    if not byte_level:
        first = {}  # token -> rank of the first merge producing it
        for r, m in enumerate(merges):
            a, b = m.split(" ", 1)
            first.setdefault(a + b, r)
    tokens, types, scores = [], [], []
    for i in range(vocab_size):
        s = by_id.get(i)
        if s is None:
            tokens.append(f"[PAD{i}]")
            types.append(TOKEN_UNUSED)
            scores.append(-1e9)
            continue
        tokens.append(s)
        if i in added:  # llama.cpp's converter also treats <|...|> as control whatever "special" says
            special = added[i].get("special") or (s.startswith("<|") and s.endswith("|>"))
            t = TOKEN_CONTROL if special else TOKEN_USER_DEFINED
        elif not byte_level and len(s) == 6 and s.startswith("<0x") and s.endswith(">"):
            t = TOKEN_BYTE
        else:
            t = TOKEN_NORMAL
        if i == unk:
            t = TOKEN_UNKNOWN
        types.append(t)
        if not byte_level:  # a SentencePiece BPE merges the highest-scoring pair first
            scores.append(0.0 if t != TOKEN_NORMAL and t != TOKEN_BYTE
                          else -float(first[s]) if s in first else -float(len(merges) + i))
    kv = {"tokenizer.ggml.model": "gpt2" if byte_level else "llama"}
    if byte_level:
        kv["tokenizer.ggml.pre"] = "qwen2" if cfg.get("model_type", "").startswith("qwen") else "llama-bpe"
    else:
        kv["tokenizer.ggml.pre"] = "default"
    kv["tokenizer.ggml.tokens"] = arr(STRING, tokens)
    if not byte_level:
        kv["tokenizer.ggml.scores"] = arr(FLOAT32, scores)
    kv["tokenizer.ggml.token_type"] = arr(INT32, types)
    if byte_level:
        kv["tokenizer.ggml.merges"] = arr(STRING, merges)
    # Special ids: config.json first (the model's own), then tokenizer_config.json's strings.
    bos, eos = cfg.get("bos_token_id"), cfg.get("eos_token_id")
    bos = _token_id(tok_cfg, "bos_token", ids) if bos is None else bos
    eos = _token_id(tok_cfg, "eos_token", ids) if eos is None else eos
    eos = eos[0] if isinstance(eos, list) else eos
    pad = _token_id(tok_cfg, "pad_token", ids)
    for key, v in (("bos", bos), ("eos", eos), ("unknown", unk), ("padding", pad)):
        if v is not None:
            kv[f"tokenizer.ggml.{key}_token_id"] = Val(UINT32, int(v))
    add_bos = tok_cfg.get("add_bos_token")
    if add_bos is None:  # the post-processor's template for one sequence starts with BOS
        single = (tok.get("post_processor") or {}).get("single") or []
        add_bos = bool(single) and "SpecialToken" in single[0] and bos is not None and \
            ids.get(single[0]["SpecialToken"]["id"]) == bos
    kv["tokenizer.ggml.add_bos_token"] = bool(add_bos)
    kv["tokenizer.ggml.add_eos_token"] = bool(tok_cfg.get("add_eos_token", False))
    if not byte_level:
        prefix = "Prepend" in json.dumps(tok.get("normalizer")) or \
            "Metaspace" in json.dumps(tok.get("pre_tokenizer"))
        kv["tokenizer.ggml.add_space_prefix"] = bool(tok_cfg.get("add_prefix_space", prefix))
    tmpl = tok_cfg.get("chat_template")
    if isinstance(tmpl, list):  # named templates: the default one
        tmpl = next((t["template"] for t in tmpl if t.get("name") == "default"), tmpl[0]["template"])
    if tmpl is None and os.path.exists(os.path.join(model_dir, "chat_template.jinja")):
        with open(os.path.join(model_dir, "chat_template.jinja"), encoding="utf-8") as f:
            tmpl = f.read()
    if tmpl:
        kv["tokenizer.chat_template"] = tmpl
    return kv


def llama3_rope_factors(cfg, head_dim):
    """rope_freqs.weight of llama3 rope scaling: the divisor of each frequency."""
    rs = cfg["rope_scaling"]
    freqs = 1.0 / (cfg.get("rope_theta", 10000.0) ** (np.arange(0, head_dim, 2) / head_dim))
    factor, lo, hi = rs.get("factor", 8.0), rs.get("low_freq_factor", 1.0), rs.get("high_freq_factor", 4.0)
    old = rs.get("original_max_position_embeddings", 8192)
    wavelen = 2 * np.pi / freqs
    smooth = (old / wavelen - lo) / (hi - lo)
    mid = 1 / ((1 - smooth) / factor + smooth)
    return np.where(wavelen < old / hi, 1.0, np.where(wavelen > old / lo, factor, mid)).astype(F32)


def model_to_gguf(model_dir, out_path, ttype="F16", name=None):
    """Converts an HF model directory (qwen3, qwen2, llama, mistral, qwen3_moe with every layer
    sparse) to GGUF with its 2-D weights and stacked experts ([E, out, in] as
    blk.N.ffn_{gate,up,down}_exps) in `ttype` (a GGML type name, or Q4_K_M for the mixed
    recipe); routers stay F32, as llama-quantize leaves them. Returns {tensor name: GGML type}."""
    if ttype not in FILE_TYPES:
        raise ValueError(f"type {ttype!r}: one of {', '.join(FILE_TYPES)}")
    cfg = _read_json(os.path.join(model_dir, "config.json"))
    mt = cfg.get("model_type")
    if mt not in ARCHS:
        raise ValueError(f"model_type {mt!r}: converts {', '.join(ARCHS)}")
    a = ARCHS[mt]
    n_head, n_kv = cfg["num_attention_heads"], cfg.get("num_key_value_heads", cfg["num_attention_heads"])
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // n_head
    kv = {"general.architecture": a, "general.name": name or os.path.basename(os.path.normpath(model_dir)),
          f"{a}.context_length": cfg["max_position_embeddings"],
          f"{a}.embedding_length": cfg["hidden_size"], f"{a}.block_count": cfg["num_hidden_layers"],
          f"{a}.feed_forward_length": cfg["intermediate_size"], f"{a}.attention.head_count": n_head,
          f"{a}.attention.head_count_kv": n_kv, f"{a}.attention.key_length": head_dim,
          f"{a}.attention.value_length": head_dim,
          f"{a}.rope.freq_base": float(cfg.get("rope_theta", 10000.0)),
          f"{a}.attention.layer_norm_rms_epsilon": float(cfg["rms_norm_eps"])}
    if a == "qwen3moe":  # llama.cpp's qwen3moe: every layer sparse, top-k weights renormalized
        if cfg.get("mlp_only_layers") or cfg.get("decoder_sparse_step", 1) != 1 or not cfg.get("norm_topk_prob", True):
            raise ValueError("qwen3_moe: llama.cpp's qwen3moe needs every layer sparse and norm_topk_prob")
        kv[f"{a}.expert_count"] = cfg["num_experts"]
        kv[f"{a}.expert_used_count"] = cfg["num_experts_per_tok"]
        kv[f"{a}.expert_feed_forward_length"] = cfg["moe_intermediate_size"]
    if a == "llama":
        kv[f"{a}.vocab_size"] = cfg["vocab_size"]
        kv[f"{a}.rope.dimension_count"] = head_dim
    rs = cfg.get("rope_scaling") or {}
    rope_type = rs.get("rope_type", rs.get("type"))
    extra = []
    if rope_type in ("linear", "yarn"):
        kv[f"{a}.rope.scaling.type"] = rope_type
        kv[f"{a}.rope.scaling.factor"] = float(rs["factor"])
        if rope_type == "yarn":
            kv[f"{a}.rope.scaling.original_context_length"] = rs["original_max_position_embeddings"]
    elif rope_type == "llama3":
        f = llama3_rope_factors(cfg, head_dim)
        extra.append(Tensor("rope_freqs.weight", f.shape, "F32", f.tobytes()))
    elif rope_type not in (None, "default"):
        raise ValueError(f"rope_scaling {rope_type!r} not converted")
    kv["general.file_type"] = FILE_TYPES[ttype]
    if ttype not in ("F32", "F16", "BF16"):
        kv["general.quantization_version"] = 2
    kv.update(tokenizer_kv(model_dir, cfg["vocab_size"], cfg))

    tied = cfg.get("tie_word_embeddings", False)
    found = {}  # gguf name -> (shape, load)
    experts = {}  # (layer, gate|up|down) -> {expert: (shape, load)}
    for hf, (shape, load) in _safetensors(model_dir).items():
        p = hf.split(".")
        if len(p) == 8 and p[3:5] == ["mlp", "experts"] and p[-1] == "weight":
            experts.setdefault((int(p[2]), p[6].removesuffix("_proj")), {})[int(p[5])] = (shape, load)
            continue
        g = gguf_tensor_name(hf)
        if g is not None and not (g == "output.weight" and tied):
            found[g] = (shape, load)
    for (layer, proj), by_e in experts.items():  # stacked [E, out, in] as ffn_{proj}_exps
        parts = [by_e[e] for e in range(len(by_e))]
        found[f"blk.{layer}.ffn_{proj}_exps.weight"] = (
            (len(parts),) + tuple(parts[0][0]),
            lambda parts=parts: np.stack([ld() for _, ld in parts]))

    def order(g):  # token_embd, the blocks by number, then output_norm / output
        p = g.split(".")
        return (1, int(p[1]), g) if p[0] == "blk" else (0 if g == "token_embd.weight" else 2, 0, g)

    def data(g, t, load):
        def get():
            w = load()
            if a == "llama" and (".attn_q." in g or ".attn_k." in g):
                w = permute_qk(w, n_head if ".attn_q." in g else n_kv)
            return quantize(w, t)
        return get

    tensors = list(extra)
    for g in sorted(found, key=order):
        shape, load = found[g]
        # llama-quantize gives a tied token_embd the output's type (Q6_K in a Q4_K_M file).
        t = tensor_type("output.weight" if tied and g == "token_embd.weight" and ttype == "Q4_K_M" else g,
                        shape, ttype)
        tensors.append(Tensor(g, shape, t, data(g, t, load)))
    write_gguf(out_path, kv, tensors)
    return {t.name: t.type for t in tensors}


# ---------------------------------------------------------------------------------------------


def _show(v, limit=8):
    if v.type == ARRAY:
        items = [_show(x) if isinstance(x, Val) else repr(x) for x in v.value[:limit]]
        more = f", ... ({len(v.value)})" if len(v.value) > limit else ""
        return f"[{', '.join(items)}{more}]"
    return repr(v.value)[:200]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("convert", help="HF model directory -> GGUF")
    c.add_argument("model_dir")
    c.add_argument("out")
    c.add_argument("--type", default="F16", choices=list(FILE_TYPES))
    d = sub.add_parser("dequant", help="one tensor -> raw little-endian float32")
    d.add_argument("file")
    d.add_argument("tensor")
    d.add_argument("out")
    i = sub.add_parser("info", help="print metadata and tensors")
    i.add_argument("file")
    args = ap.parse_args(argv)
    if args.cmd == "convert":
        types = model_to_gguf(args.model_dir, args.out, args.type)
        counts = {}
        for t in types.values():
            counts[t] = counts.get(t, 0) + 1
        print(f"wrote {args.out}: {len(types)} tensors ({', '.join(f'{n} {t}' for t, n in sorted(counts.items()))})")
    elif args.cmd == "dequant":
        f = GGUFFile(args.file)
        if args.tensor not in f.tensors:
            raise SystemExit(f"{args.file}: no tensor {args.tensor!r}")
        f.tensor(args.tensor).astype("<f4").tofile(args.out)
    else:
        f = GGUFFile(args.file)
        print(f"GGUF v{f.version}, alignment {f.alignment}, data at {f.data_start}")
        for k, v in f.kv.items():
            print(f"  {k} = {_show(v)}")
        for t in f.tensors.values():
            print(f"  {t.name:32s} {t.type:6s} {list(t.ne)} @{t.offset}")


if __name__ == "__main__":
    main()
