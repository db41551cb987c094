"""Converts a model directory of ours (config.json, *.safetensors, tokenizer.json; e.g. from
`nanovllm make-model`) to a GGUF file for llama.cpp, with llama.cpp's own gguf-py (found on
PYTHONPATH) and numpy only: no torch, no transformers. Weights are copied as stored (bf16, f16
or f32); llama-quantize makes the Q8_0 / Q4_0 files from it.

Architectures (model_type -> llama.cpp arch): qwen3 -> qwen3; qwen3_moe -> qwen3moe (every layer
sparse: llama.cpp has no mlp_only_layers; experts stacked into [E, ...] tensors); llama and
mistral -> llama (q/k rows permuted to llama.cpp's interleaved RoPE; llama.cpp runs Mistral
without its sliding window); gemma3_text -> gemma3 (norm weights stored as 1 + w, as llama.cpp's
converter does; local layers' RoPE base and window pattern as keys; llama.cpp scales attention by
1/sqrt(head_dim) whatever query_pre_attn_scalar says, so that must equal head_dim).

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


ARCH = {"qwen3": "qwen3", "qwen3_moe": "qwen3moe", "llama": "llama", "mistral": "llama",
        "gemma3_text": "gemma3"}


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
        "mlp.down_proj.weight": "ffn_down", "mlp.gate.weight": "ffn_gate_inp",
        # Gemma 3's sandwich norms
        "pre_feedforward_layernorm.weight": "ffn_norm",
        "post_feedforward_layernorm.weight": "post_ffw_norm",
    }
    if GEMMA and rest == "post_attention_layernorm.weight":
        return f"blk.{i}.post_attention_norm.weight"
    return f"blk.{i}.{table[rest]}.weight" if rest in table else None


GEMMA = False  # set by main(): Gemma's post_attention_layernorm is a sandwich norm


def permute_qk(arr, n_head):
    """HF's rotate-half q/k rows -> llama.cpp's interleaved (GPT-J) RoPE layout: per head, the
    rows of the two halves alternate."""
    rows, cols = arr.shape
    d = rows // n_head
    return arr.reshape(n_head, 2, d // 2, cols).swapaxes(1, 2).reshape(rows, cols)


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
    w.add_tokenizer_pre("qwen2" if cfg.get("model_type", "").startswith("qwen") else "llama-bpe")
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
    mt = cfg.get("model_type")
    if mt not in ARCH:
        raise SystemExit(f"model_type {mt!r}: this converter writes {', '.join(ARCH)}")
    arch = ARCH[mt]
    global GEMMA
    GEMMA = arch == "gemma3"
    if mt == "qwen3_moe" and cfg.get("mlp_only_layers"):
        raise SystemExit("qwen3_moe with mlp_only_layers: llama.cpp's qwen3moe has sparse layers only")
    if GEMMA and cfg.get("query_pre_attn_scalar", 256) != cfg.get("head_dim", 256):
        raise SystemExit("gemma3: llama.cpp scales attention by 1/sqrt(head_dim): query_pre_attn_scalar "
                         "must equal head_dim")
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
    if arch == "llama":
        w.add_rope_dimension_count(head_dim)
    if arch == "qwen3moe":
        w.add_expert_count(cfg["num_experts"])
        w.add_expert_used_count(cfg["num_experts_per_tok"])
        w.add_expert_feed_forward_length(cfg["moe_intermediate_size"])
    if GEMMA:
        types = cfg.get("layer_types") or [
            "full_attention" if (i + 1) % cfg.get("sliding_window_pattern", 6) == 0 else "sliding_attention"
            for i in range(cfg["num_hidden_layers"])]
        w.add_sliding_window(cfg["sliding_window"])
        w.add_sliding_window_pattern([t == "sliding_attention" for t in types])
        w.add_rope_freq_base_swa(cfg.get("rope_local_base_freq", 10000.0))
    add_tokenizer(w, model_dir, cfg["vocab_size"], cfg)
    file_type = None
    experts = {}  # (layer, kind) -> {expert: array}
    for name, arr, gg in safetensors(model_dir):
        parts = name.split(".")
        if len(parts) > 6 and parts[3:5] == ["mlp", "experts"]:  # model.layers.L.mlp.experts.E.gate_proj.weight
            experts.setdefault((int(parts[2]), parts[6]), {})[int(parts[5])] = (arr, gg)
            continue
        g = gguf_name(name)
        if g is None or (g == "output.weight" and cfg.get("tie_word_embeddings", GEMMA)):
            continue
        if arr.ndim == 1:  # norms: llama.cpp wants f32
            arr = (arr.astype(np.uint32) << 16).view(np.float32) if gg == gguf.GGMLQuantizationType.BF16 \
                else arr.astype(np.float32)
            if GEMMA and name.endswith("norm.weight"):
                arr = arr + np.float32(1.0)  # Gemma's (1 + w)
            w.add_tensor(g, np.ascontiguousarray(arr))
            continue
        if arch == "llama" and g.endswith(("attn_q.weight", "attn_k.weight")):
            heads = cfg["num_attention_heads"] if g.endswith("attn_q.weight") else cfg["num_key_value_heads"]
            arr = permute_qk(arr, heads)
        if g.endswith("ffn_gate_inp.weight") and gg == gguf.GGMLQuantizationType.BF16:
            arr, gg = (arr.astype(np.uint32) << 16).view(np.float32), gguf.GGMLQuantizationType.F32  # router in f32
            w.add_tensor(g, np.ascontiguousarray(arr))
            continue
        file_type = gg
        w.add_tensor(g, np.ascontiguousarray(arr), raw_dtype=gg)
    for (layer, kind), by_e in sorted(experts.items()):
        gg = by_e[0][1]
        stacked = np.stack([by_e[e][0] for e in range(len(by_e))])  # [E, rows, cols]
        short = {"gate_proj": "gate", "up_proj": "up", "down_proj": "down"}[kind]
        w.add_tensor(f"blk.{layer}.ffn_{short}_exps.weight", np.ascontiguousarray(stacked), raw_dtype=gg)
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
