"""GPTQ and AWQ 4-bit safetensors checkpoints in numpy, written from the format descriptions
(AutoGPTQ / GPTQModel `QuantLinear` packing, AutoAWQ `WQLinear_GEMM` packing, transformers'
GPTQConfig / AwqConfig fields), independent of nanovllm's C++ (src/loader/int4_*.cc).

A quantized linear X (weight [N, K] = [out, in]) is stored as:
  GPTQ  X.qweight int32 [K/8, N]  bits 4j..4j+3 of qweight[i, n] = code of input row 8i + j
        X.qzeros  int32 [G, N/8]  bits 4j..4j+3 of qzeros[g, c]  = zero of column 8c + j,
                                  minus 1 in checkpoint_format "gptq" (v1), as is in "gptq_v2"
        X.scales  f16   [G, N]
        X.g_idx   int32 [K]       group of each input row (k // group_size unless desc_act)
  AWQ   X.qweight int32 [K, N/8]  bits 4i..4i+3 of qweight[k, c] = code of column 8c + ORDER[i],
        X.qzeros  int32 [G, N/8]  ORDER = [0, 2, 4, 6, 1, 3, 5, 7]; zero without offset
        X.scales  f16   [G, N]    group of input row k: k // group_size
  W[n, k] = scales[g, n] * (code[k, n] - zero[g, n]), g = g_idx[k]; computed here as one float32
  multiplication of the f16 scale by the (exact) integer difference.

Functions: `dequantize_module(tensors, prefix, qcfg)` -> float32 [N, K];
`dequantized_checkpoint(model_dir, out_dir)` writes an HF directory of the dequantized
model (quantized modules in f32, other tensors in their own dtype); `quantize(w, method, group, sym, desc_act, v2, rng)` and `convert(model_dir, out_dir, ...)`
write GPTQ / AWQ checkpoints from a dense one (round-to-nearest, an independent writer).
"""
import json
import os
import shutil
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st_reader  # noqa: E402

AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]
LINEARS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def nibbles(words):
    """int32 [..., C] -> uint8 [..., C, 8]: nibble i (bits 4i..4i+3) at index i."""
    u = np.ascontiguousarray(words).astype(np.int64) & 0xFFFFFFFF
    return ((u[..., None] >> (4 * np.arange(8))) & 15).astype(np.uint8)


def from_nibbles(vals):
    """uint8 [..., C, 8] -> int32 [..., C] (inverse of nibbles)."""
    v = vals.astype(np.int64) & 15
    u = (v << (4 * np.arange(8))).sum(axis=-1)
    return u.astype(np.uint32).view(np.int32)


def qcfg_of(config):
    q = config["quantization_config"]
    method = q["quant_method"].lower()
    fmt = q.get("checkpoint_format", q.get("format", "gptq")) if method == "gptq" else "awq"
    return {"method": method, "group_size": q.get("group_size", 128), "v1": fmt == "gptq"}


def codes(tensors, prefix, qcfg):
    """The module's integer codes as [K, N]."""
    qw = tensors[prefix + ".qweight"]
    nib = nibbles(qw)  # GPTQ [K/8, N, 8]; AWQ [K, N/8, 8]
    if qcfg["method"] == "gptq":
        k8, n, _ = nib.shape
        return nib.transpose(0, 2, 1).reshape(k8 * 8, n)
    k, c, _ = nib.shape
    out = np.empty((k, c, 8), np.uint8)
    out[:, :, AWQ_ORDER] = nib  # nibble i -> column 8c + ORDER[i]
    return out.reshape(k, c * 8)


def zeros(tensors, prefix, qcfg):
    """Zero points [G, N] as integers (v1: stored + 1)."""
    nib = nibbles(tensors[prefix + ".qzeros"])  # [G, N/8, 8]
    g, c, _ = nib.shape
    if qcfg["method"] == "awq":
        out = np.empty((g, c, 8), np.int64)
        out[:, :, AWQ_ORDER] = nib
        return out.reshape(g, c * 8)
    z = nib.reshape(g, c * 8).astype(np.int64)
    return z + 1 if qcfg["v1"] else z


def dequantize_module(tensors, prefix, qcfg):
    """float32 [N, K] weight of module `prefix` (tensors as st_reader loads them)."""
    q = codes(tensors, prefix, qcfg).astype(np.int64)  # [K, N]
    z = zeros(tensors, prefix, qcfg)  # [G, N]
    s = tensors[prefix + ".scales"].astype(np.float32)  # f16 values, exact
    k = q.shape[0]
    if prefix + ".g_idx" in tensors:
        g = tensors[prefix + ".g_idx"].astype(np.int64)
    else:
        group = qcfg["group_size"] if qcfg["group_size"] > 0 else k
        g = np.arange(k) // group
    w = s[g, :] * (q - z[g, :]).astype(np.float32)  # [K, N], one f32 product each
    return np.ascontiguousarray(w.T.astype(np.float32))


def dequantized_checkpoint(model_dir, out_dir):
    """An HF directory holding the exact dequantization of a GPTQ / AWQ checkpoint: the
    quantized modules' weights in f32, every other tensor in its own dtype (BF16 stays BF16, so
    the engine runs it through the same kernel as in the quantized checkpoint; F16 / F32 as
    F32)."""
    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    qcfg = qcfg_of(cfg)
    tensors = st_reader.load_model_dir(model_dir)
    dtypes = {}
    for f in sorted(os.listdir(model_dir)):
        if f.endswith(".safetensors"):
            dtypes.update(st_reader.file_dtypes(os.path.join(model_dir, f)))
    prefixes = sorted(n[: -len(".qweight")] for n in tensors if n.endswith(".qweight"))
    out = {}
    for p in prefixes:
        out[p + ".weight"] = ("F32", dequantize_module(tensors, p, qcfg))
    fields = {p + f for p in prefixes for f in (".qweight", ".qzeros", ".scales", ".g_idx")}
    for n, t in tensors.items():
        if n in fields:
            continue
        if dtypes.get(n) == "BF16":  # exact: the values came from bf16
            out[n] = ("BF16", st_reader.f32_to_bf16_bits(t.astype(np.float32)))
        else:
            out[n] = ("F32", t.astype(np.float32))
    os.makedirs(out_dir, exist_ok=True)
    st_reader.save_file(os.path.join(out_dir, "model.safetensors"), out)
    del cfg["quantization_config"]
    cfg["torch_dtype"] = "float32"
    json.dump(cfg, open(os.path.join(out_dir, "config.json"), "w"), indent=1)
    for n in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        if os.path.exists(os.path.join(model_dir, n)):
            shutil.copy(os.path.join(model_dir, n), out_dir)
    return str(out_dir)


def quantize(w, method, group, sym=True, desc_act=False, v2=False, perm=None):
    """Round-to-nearest GPTQ / AWQ quantization of w [N, K] (float) -> {field: (tag, array)}.
    perm: GPTQ act-order visit order of the input rows (desc_act)."""
    w = np.asarray(w, np.float32)
    n, k = w.shape
    group = group if group > 0 else k
    order = np.asarray(perm) if desc_act else np.arange(k)
    g_idx = np.empty(k, np.int32)
    g_idx[order] = np.arange(k) // group
    ng = k // group
    wg = w[:, order].reshape(n, ng, group)  # groups in visit order
    lo, hi = wg.min(axis=2), wg.max(axis=2)
    if method == "awq":
        scale = (np.maximum(hi - lo, 1e-5) / 15).astype(np.float16).astype(np.float32)
        zero = np.clip(-np.round(lo / scale), 0, 15).astype(np.int64)
    else:
        lo, hi = np.minimum(lo, 0), np.maximum(hi, 0)
        if sym:
            hi = np.maximum(-lo, hi)
            lo = np.where(lo < 0, -hi, lo)
        both0 = (lo == 0) & (hi == 0)
        lo, hi = np.where(both0, -1, lo), np.where(both0, 1, hi)
        scale = ((hi - lo) / 15).astype(np.float16).astype(np.float32)
        zero = np.full(scale.shape, 8, np.int64) if sym else \
            np.clip(np.round(-lo / scale), 0 if v2 else 1, 15).astype(np.int64)
    scale = np.maximum(scale, np.float32(2.0 ** -24))
    q = np.clip(np.round(w / scale[:, g_idx]) + zero[:, g_idx], 0, 15).astype(np.uint8)  # [N, K]
    out = {"scales": ("F16", scale.T.astype(np.float16))}
    zs = zero.T.astype(np.int64)  # [G, N]
    if method == "awq":
        zn = zs.reshape(ng, n // 8, 8)[:, :, AWQ_ORDER]
        out["qzeros"] = ("I32", from_nibbles(zn))
        qn = q.T.reshape(k, n // 8, 8)[:, :, AWQ_ORDER]
        out["qweight"] = ("I32", from_nibbles(qn))
    else:
        out["qzeros"] = ("I32", from_nibbles((zs - (0 if v2 else 1)).reshape(ng, n // 8, 8)))
        out["qweight"] = ("I32", from_nibbles(q.T.reshape(k // 8, 8, n).transpose(0, 2, 1)))
        out["g_idx"] = ("I32", g_idx)
    return out


def convert(model_dir, out_dir, method, group, sym=True, desc_act=False, v2=False, seed=0):
    """A GPTQ / AWQ checkpoint of a dense HF directory (projections q/k/v/o/gate/up/down);
    projections of one input share a random act-order permutation, as GPTQ's shared Hessian
    makes them."""
    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    tensors = st_reader.load_model_dir(model_dir)
    rng = np.random.default_rng(seed)
    perms = {}
    out = {}
    for name in sorted(tensors):
        t = tensors[name]
        parts = name.split(".")
        if len(parts) >= 2 and parts[-1] == "weight" and parts[-2] in LINEARS:
            prefix = name[: -len(".weight")]
            key = prefix.replace("k_proj", "q_proj").replace("v_proj", "q_proj").replace("up_proj", "gate_proj")
            if key not in perms:
                perms[key] = rng.permutation(t.shape[1])
            for f, v in quantize(t, method, group, sym, desc_act, v2, perms[key]).items():
                out[prefix + "." + f] = v
        else:
            out[name] = ("F32", t.astype(np.float32))
    os.makedirs(out_dir, exist_ok=True)
    st_reader.save_file(os.path.join(out_dir, "model.safetensors"), out)
    if method == "awq":
        cfg["quantization_config"] = {"quant_method": "awq", "bits": 4, "group_size": group,
                                      "zero_point": True, "version": "gemm"}
    else:
        cfg["quantization_config"] = {"quant_method": "gptq", "bits": 4, "group_size": group,
                                      "desc_act": desc_act, "sym": sym,
                                      "checkpoint_format": "gptq_v2" if v2 else "gptq"}
    cfg["torch_dtype"] = "float32"
    json.dump(cfg, open(os.path.join(out_dir, "config.json"), "w"), indent=1)
    for n in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        if os.path.exists(os.path.join(model_dir, n)):
            shutil.copy(os.path.join(model_dir, n), out_dir)
    return str(out_dir)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "dequantize":
        print(dequantized_checkpoint(sys.argv[2], sys.argv[3]))
    else:
        sys.exit("usage: int4_ref.py dequantize GPTQ_OR_AWQ_DIR OUT_DIR")
