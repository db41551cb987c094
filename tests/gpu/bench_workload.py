"""nano-vLLM's bench.py workload and its memory roofline (standard library only).

The workload, draw for draw as in bench.py (and `nanovllm bench`): random.seed(seed); per
sequence a prompt of randint(min_in, max_in) ids, each randint(0, max_token_id); after all
prompts, one max_tokens = randint(min_out, max_out) per sequence. Temperature 0.6, ignore_eos.

The roofline: decode is bound by device-memory reads. With every sequence of the workload
resident (256 <= max_num_seqs, the KV cache holds them all on an 80 GB GPU), decode step t
(t >= 1: the prefill samples the first token) reads the weights once plus the K and V of every
context token of the sequences still running (prompt + t tokens each). Output tokens / (bytes / bandwidth) is the best output tok/s any
engine can reach at that bandwidth; prefill time is left out, so the bound is optimistic.
"""
import random


def make_workload(num_seqs=256, min_in=100, max_in=1024, min_out=100, max_out=1024,
                  max_token_id=10000, seed=0):
    rng = random.Random(seed)
    prompts = [[rng.randint(0, max_token_id) for _ in range(rng.randint(min_in, max_in))]
               for _ in range(num_seqs)]
    max_tokens = [rng.randint(min_out, max_out) for _ in range(num_seqs)]
    return prompts, max_tokens


def weight_bytes(cfg, dtype_bytes=2):
    """Bytes of one read of every weight of a Qwen3/Qwen2/Llama config.json dict."""
    h, i, n = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    d = cfg.get("head_dim") or h // cfg["num_attention_heads"]
    q, kv = cfg["num_attention_heads"] * d, cfg["num_key_value_heads"] * d
    per_layer = h * (q + 2 * kv) + q * h + 3 * h * i + 2 * h
    if cfg.get("model_type") == "qwen3":
        per_layer += 2 * d  # q_norm, k_norm
    if cfg.get("attention_bias"):
        per_layer += q + 2 * kv
    # The LM head [vocab, hidden] is read fully each step; of the input embedding (the same
    # matrix when tied) only one row per sequence, which is left out.
    return dtype_bytes * (n * per_layer + h + cfg["vocab_size"] * h)


def kv_bytes_per_token(cfg, dtype_bytes=2):
    d = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    return cfg["num_hidden_layers"] * cfg["num_key_value_heads"] * d * 2 * dtype_bytes


def decode_steps(prompts, max_tokens):
    """(running sequences, their summed context) of every decode step, all sequences resident.
    The prefill samples each sequence's first token; decode step t (t >= 1) runs the sequences
    with max_tokens > t, each attending over its prompt + t tokens (the query token included)."""
    lens = sorted(zip(max_tokens, (len(p) for p in prompts)))
    steps, start = [], 0
    ctx_sum = sum(p for _, p in lens)
    for t in range(1, max(max_tokens)):
        while start < len(lens) and lens[start][0] <= t:
            ctx_sum -= lens[start][1]
            start += 1
        running = len(lens) - start
        if running == 0:
            break
        steps.append((running, ctx_sum + running * t))
    return steps


def decode_bytes(cfg, prompts, max_tokens, dtype_bytes=2, w=None, kv=None):
    """Bytes every decode step of the workload must read, summed over the steps: the weights
    once per step (w, default: every weight at dtype_bytes) plus kv bytes per context token."""
    w = weight_bytes(cfg, dtype_bytes) if w is None else w
    kv = kv_bytes_per_token(cfg, dtype_bytes) if kv is None else kv
    return sum(w + ctx * kv for _, ctx in decode_steps(prompts, max_tokens))


def roofline_tokens_per_s(cfg, prompts, max_tokens, bandwidth_bytes_per_s, dtype_bytes=2):
    return sum(max_tokens) / (decode_bytes(cfg, prompts, max_tokens, dtype_bytes) /
                              bandwidth_bytes_per_s)
