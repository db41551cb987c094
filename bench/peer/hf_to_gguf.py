"""Converts a Qwen3 model directory of ours (config.json, *.safetensors, tokenizer.json; e.g.
from `nanovllm make-model`) to a GGUF file for llama.cpp, with llama.cpp's own gguf-py (found on
PYTHONPATH) and numpy only: no torch, no transformers. Weights are copied as stored (bf16, f16
or f32); llama-quantize makes the Q8_0 / Q4_0 files from it.

usage: PYTHONPATH=<llama.cpp>/gguf-py python3 hf_to_gguf.py MODEL_DIR OUT.gguf"""
import json
import os
import struct
import sys

import numpy as np
import gguf  # llama.cpp's gguf-py

ST_DTYPES = {"BF16": (np.uint16, gguf.GGMLQuantizationType.BF16),
             "F16": (np.float16, gguf.GGMLQuantizationType.F16),
             "F32": (np.float32, gguf.GGMLQuantizationType.F32)}


def safetensors(model_dir):
    """Yields (name, numpy array of the stored bits, GGML type) for every tensor."""
    for fn in sorted(os.listdir(model_dir)):
        if not fn.endswith(".safetensors"):
            continue
        path = os.path.join(model_dir, fn)
        with open(path, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(n))
        header.pop("__metadata__", None)
        data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n)
        for name, h in header.items():
            if h["dtype"] not in ST_DTYPES:
                raise SystemExit(f"{name}: dtype {h['dtype']} not supported")
            np_dt, gg = ST_DTYPES[h["dtype"]]
            b, e = h["data_offsets"]
            yield name, np.frombuffer(data[b:e], dtype=np_dt).reshape(h["shape"]), gg


def gguf_name(hf):
    """HF parameter name -> llama.cpp tensor name (None: not needed)."""
    if hf == "model.embed_tokens.weight":
        return "token_embd.weight"
    if hf == "model.norm.weight":
        return "output_norm.weight"
    if hf == "lm_head.weight":
        return "output.weight"
    parts = hf.split(".")
    if parts[:2] != ["model", "layers"]:
        return None
    i, rest = parts[2], ".".join(parts[3:])
    table = {
        "input_layernorm.weight": "attn_norm", "post_attention_layernorm.weight": "ffn_norm",
        "self_attn.q_proj.weight": "attn_q", "self_attn.k_proj.weight": "attn_k",
        "self_attn.v_proj.weight": "attn_v", "self_attn.o_proj.weight": "attn_output",
        "self_attn.q_norm.weight": "attn_q_norm", "self_attn.k_norm.weight": "attn_k_norm",
        "mlp.gate_proj.weight": "ffn_gate", "mlp.up_proj.weight": "ffn_up",
        "mlp.down_proj.weight": "ffn_down",
    }
    return f"blk.{i}.{table[rest]}.weight" if rest in table else None


def add_tokenizer(w, model_dir, vocab_size, cfg):
    """Byte-level BPE vocabulary from tokenizer.json (Qwen2/Qwen3 pre-tokenizer)."""
    with open(os.path.join(model_dir, "tokenizer.json"), encoding="utf-8") as f:
        tok = json.load(f)
    ids = dict(tok["model"]["vocab"])
    special = set()
    for a in tok.get("added_tokens", []):
        ids[a["content"]] = a["id"]
        if a.get("special"):
            special.add(a["id"])
    by_id = {v: k for k, v in ids.items()}
    tokens, types = [], []
    for i in range(vocab_size):
        if i in by_id:
            tokens.append(by_id[i])
            types.append(gguf.TokenType.CONTROL if i in special else gguf.TokenType.NORMAL)
        else:
            tokens.append(f"[PAD{i}]")
            types.append(gguf.TokenType.UNUSED)
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    eos = cfg.get("eos_token_id", 151645)
    w.add_eos_token_id(eos[0] if isinstance(eos, list) else eos)
    w.add_bos_token_id(cfg.get("bos_token_id", 151643))
    w.add_pad_token_id(cfg.get("bos_token_id", 151643))
    w.add_add_bos_token(False)


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    model_dir, out = sys.argv[1], sys.argv[2]
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    if cfg.get("model_type") != "qwen3":
        raise SystemExit(f"model_type {cfg.get('model_type')!r}: this converter writes qwen3 only")
    arch = "qwen3"
    w = gguf.GGUFWriter(out, arch)
    w.add_name(os.path.basename(os.path.normpath(model_dir)))
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(cfg["num_key_value_heads"])
    head_dim = cfg.get("head_dim", cfg["hidden_size"] // cfg["num_attention_heads"])
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_rope_freq_base(cfg.get("rope_theta", 1000000.0))
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    add_tokenizer(w, model_dir, cfg["vocab_size"], cfg)
    file_type = None
    for name, arr, gg in safetensors(model_dir):
        g = gguf_name(name)
        if g is None or (g == "output.weight" and cfg.get("tie_word_embeddings")):
            continue
        if arr.ndim == 1:  # norms: llama.cpp wants f32
            arr = (arr.astype(np.uint32) << 16).view(np.float32) if gg == gguf.GGMLQuantizationType.BF16 \
                else arr.astype(np.float32)
            w.add_tensor(g, np.ascontiguousarray(arr))
            continue
        file_type = gg
        w.add_tensor(g, arr, raw_dtype=gg)
    ftype = {gguf.GGMLQuantizationType.BF16: gguf.LlamaFileType.MOSTLY_BF16,
             gguf.GGMLQuantizationType.F16: gguf.LlamaFileType.MOSTLY_F16}.get(file_type, gguf.LlamaFileType.ALL_F32)
    w.add_file_type(ftype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
