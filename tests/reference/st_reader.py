"""Minimal safetensors reader/writer on numpy only.

Layout of a .safetensors file: u64 little-endian header length N, then N bytes of JSON
({name: {"dtype", "shape", "data_offsets": [begin, end]}, optional "__metadata__"}), then
the raw tensor bytes; offsets are relative to the end of the header.

Tensors are returned as float64 arrays (the reference computes in float64): BF16 is widened
exactly by placing its 16 bits in the top half of a float32; F16 goes through numpy float16.
"""
import json
import os
import struct

import numpy as np

# safetensors dtype tag -> (numpy storage dtype, bytes per element)
_STORAGE = {
    "F64": (np.dtype("<f8"), 8),
    "F32": (np.dtype("<f4"), 4),
    "F16": (np.dtype("<f2"), 2),
    "BF16": (np.dtype("<u2"), 2),
    "I64": (np.dtype("<i8"), 8),
    "I32": (np.dtype("<i4"), 4),
    "I16": (np.dtype("<i2"), 2),
    "I8": (np.dtype("i1"), 1),
    "U8": (np.dtype("u1"), 1),
    "BOOL": (np.dtype("?"), 1),
}


def bf16_bits_to_f32(bits):
    """uint16 bf16 bit patterns -> float32 values (exact)."""
    return (bits.astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16_bits(x):
    """float32 -> bf16 bits with round-to-nearest-even (used by tests to build bf16 files)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounding = ((u >> 16) & 1) + 0x7FFF
    return ((u + rounding) >> 16).astype(np.uint16)


def read_header(path):
    """Returns (header dict without __metadata__, absolute offset of the data section)."""
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) != 8:
            raise ValueError(f"{path}: too short for a safetensors header")
        (n,) = struct.unpack("<Q", raw)
        size = os.path.getsize(path)
        if n > size - 8:
            raise ValueError(f"{path}: header length {n} exceeds file size {size}")
        header = json.loads(f.read(n).decode("utf-8"))
    header.pop("__metadata__", None)
    return header, 8 + n


def load_file(path, names=None):
    """Loads tensors of one file as {name: float64 ndarray} (or int arrays for int dtypes)."""
    header, base = read_header(path)
    data = np.memmap(path, dtype=np.uint8, mode="r")
    out = {}
    for name, info in header.items():
        if names is not None and name not in names:
            continue
        tag = info["dtype"]
        if tag not in _STORAGE:
            raise ValueError(f"{path}: tensor {name}: unsupported dtype {tag}")
        storage, width = _STORAGE[tag]
        shape = tuple(int(d) for d in info["shape"])
        begin, end = (int(v) for v in info["data_offsets"])
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if end - begin != count * width or base + end > data.shape[0]:
            raise ValueError(f"{path}: tensor {name}: bad data_offsets {begin},{end} for {tag}{list(shape)}")
        arr = np.frombuffer(data[base + begin:base + end].tobytes(), dtype=storage).reshape(shape)
        if tag == "BF16":
            arr = bf16_bits_to_f32(arr).astype(np.float64)
        elif tag in ("F16", "F32", "F64"):
            arr = arr.astype(np.float64)
        out[name] = arr
    return out


def file_dtypes(path):
    header, _ = read_header(path)
    return {name: info["dtype"] for name, info in header.items()}


def load_model_dir(model_dir):
    """All tensors of model.safetensors, or of the shards named by model.safetensors.index.json."""
    single = os.path.join(model_dir, "model.safetensors")
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(single):
        return load_file(single)
    if os.path.exists(index):
        with open(index) as f:
            weight_map = json.load(f)["weight_map"]
        out = {}
        for shard in sorted(set(weight_map.values())):
            out.update(load_file(os.path.join(model_dir, shard)))
        return out
    raise FileNotFoundError(f"{model_dir}: no model.safetensors or model.safetensors.index.json")


def save_file(path, tensors):
    """Writes {name: (dtype_tag, ndarray)} as a safetensors file (for self-tests).

    For "BF16" the array must already hold uint16 bit patterns."""
    header = {}
    blobs = []
    offset = 0
    for name in sorted(tensors):
        tag, arr = tensors[name]
        storage, _ = _STORAGE[tag]
        raw = np.ascontiguousarray(arr).astype(storage, copy=False).tobytes()
        header[name] = {"dtype": tag, "shape": list(arr.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)  # keep the data 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)
