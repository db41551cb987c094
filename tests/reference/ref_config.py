"""config.json -> RefConfig, following the defaults of transformers' Llama/Qwen2/Qwen3 configs."""
import json
import math
import os
from dataclasses import dataclass, field

import numpy as np

ARCHS = {
    "LlamaForCausalLM": "llama",
    "Qwen2ForCausalLM": "qwen2",
    "Qwen3ForCausalLM": "qwen3",
    "Qwen3MoeForCausalLM": "qwen3_moe",
    "MistralForCausalLM": "mistral",
    "Gemma3ForCausalLM": "gemma3",
}


@dataclass
class RefConfig:
    arch: str                 # llama | qwen2 | qwen3
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    vocab_size: int
    rms_norm_eps: float
    rope_theta: float
    rope_scaling: dict = field(default_factory=dict)  # {} = plain RoPE
    tie_word_embeddings: bool = False
    qkv_bias: bool = False    # bias on q/k/v projections
    o_bias: bool = False      # bias on o_proj
    mlp_bias: bool = False    # bias on gate/up/down (Llama mlp_bias)
    qk_norm: bool = False     # Qwen3 per-head RMSNorm of q and k before RoPE
    max_position_embeddings: int = 2048
    bos_token_id: int = None
    eos_token_id: object = None
    # Qwen3-MoE (transformers' Qwen3MoeConfig defaults when absent)
    num_experts: int = 0
    num_experts_per_tok: int = 0
    moe_intermediate_size: int = 0
    norm_topk_prob: bool = False
    moe_layers: list = field(default_factory=list)  # per layer: sparse MoE block?
    # Sliding windows per layer (0 = full causal attention): Mistral, Gemma 3's local layers
    sliding_windows: list = field(default_factory=list)
    # Gemma 3
    act: str = "silu"             # silu | gelu_pytorch_tanh
    gemma: bool = False           # (1 + w) norms, sandwich norms, sqrt(H) embedding scale
    attn_scale: float = 0.0       # 0: 1/sqrt(head_dim); Gemma 3: query_pre_attn_scalar^-0.5
    rope_local_theta: float = 0.0  # > 0: sliding layers use plain RoPE with this base
    torch_dtype: str = "float32"


def parse_config(cfg):
    archs = cfg.get("architectures") or []
    arch = None
    for a in archs:
        if a in ARCHS:
            arch = ARCHS[a]
    if arch is None:
        mt = cfg.get("model_type")
        if mt in ("llama", "qwen2", "qwen3", "qwen3_moe", "mistral"):
            arch = mt
        elif mt == "gemma3_text":
            arch = "gemma3"
        else:
            raise ValueError(f"unsupported architecture {archs} / model_type {mt}")
    act = cfg.get("hidden_activation", "gelu_pytorch_tanh") if arch == "gemma3" else cfg.get("hidden_act", "silu")
    if act not in ("silu", "gelu_pytorch_tanh"):
        raise ValueError(f"unsupported hidden_act {act}")
    if cfg.get("use_sliding_window"):
        raise ValueError("use_sliding_window=true is not supported by the reference")
    hidden = int(cfg["hidden_size"])
    heads = int(cfg["num_attention_heads"])
    kv_heads = int(cfg.get("num_key_value_heads") or heads)
    head_dim = cfg.get("head_dim")
    head_dim = int(head_dim) if head_dim else (256 if arch == "gemma3" else hidden // heads)
    attention_bias = bool(cfg.get("attention_bias", False))
    # Transformers' per-arch bias layout: Qwen2 always has q/k/v bias and never o_proj bias;
    # Llama and Qwen3 put attention_bias on all four projections.
    if arch == "qwen2":
        qkv_bias, o_bias = True, False
    else:
        qkv_bias, o_bias = attention_bias, attention_bias
    rs = cfg.get("rope_scaling") or {}
    rope_theta = float(cfg.get("rope_theta", 10000.0))
    rope_local = 0.0
    if arch == "gemma3":
        rope_local = float(cfg.get("rope_local_base_freq", 10000.0))
        rp = cfg.get("rope_parameters") or {}
        if "full_attention" in rp or "sliding_attention" in rp:  # transformers 5 form
            full = dict(rp.get("full_attention") or {})
            rope_theta = float(full.pop("rope_theta", rope_theta))
            rs = full if full.get("rope_type", "default") != "default" else {}
            rope_local = float((rp.get("sliding_attention") or {}).get("rope_theta", rope_local))
    rope_type = rs.get("rope_type", rs.get("type", "default")) if rs else "default"
    if rope_type not in ("default", "linear", "llama3", "yarn"):
        raise ValueError(f"unsupported rope_scaling type {rope_type}")
    return RefConfig(
        arch=arch,
        hidden_size=hidden,
        intermediate_size=int(cfg["intermediate_size"]),
        num_hidden_layers=int(cfg["num_hidden_layers"]),
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=head_dim,
        vocab_size=int(cfg["vocab_size"]),
        rms_norm_eps=float(cfg.get("rms_norm_eps", 1e-6)),
        rope_theta=rope_theta,
        rope_scaling=dict(rs, rope_type=rope_type) if rope_type != "default" else {},
        tie_word_embeddings=bool(cfg.get("tie_word_embeddings", arch == "gemma3")),
        qkv_bias=qkv_bias,
        o_bias=o_bias,
        mlp_bias=bool(cfg.get("mlp_bias", False)) if arch == "llama" else False,
        qk_norm=(arch in ("qwen3", "qwen3_moe", "gemma3")),
        max_position_embeddings=int(cfg.get("max_position_embeddings", 2048)),
        bos_token_id=cfg.get("bos_token_id"),
        eos_token_id=cfg.get("eos_token_id"),
        sliding_windows=_sliding_windows(cfg, arch),
        act=act,
        gemma=(arch == "gemma3"),
        attn_scale=float(cfg.get("query_pre_attn_scalar", 256)) ** -0.5 if arch == "gemma3" else 0.0,
        rope_local_theta=rope_local,
        torch_dtype=str(cfg.get("torch_dtype", cfg.get("dtype", "float32"))),
        **_moe_fields(cfg, arch),
    )


def _sliding_windows(cfg, arch):
    """Mistral: sliding_window on every layer (MistralConfig's default 4096 when the key is
    absent, none when null). Gemma 3: on the layers whose layer_types entry is
    sliding_attention (or all but every sliding_window_pattern-th layer)."""
    n = int(cfg["num_hidden_layers"])
    if arch == "mistral":
        w = cfg["sliding_window"] if "sliding_window" in cfg else 4096
        return [int(w)] * n if w else []
    if arch == "gemma3":
        w = int(cfg.get("sliding_window") or 4096)
        types = cfg.get("layer_types")
        if types is None:
            pattern = int(cfg.get("sliding_window_pattern", 6))
            types = ["sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(n)]
        return [w if t == "sliding_attention" else 0 for t in types]
    return []


def _moe_fields(cfg, arch):
    """Qwen3MoeDecoderLayer: layer i is sparse when i is not in mlp_only_layers and
    num_experts > 0 and (i + 1) % decoder_sparse_step == 0."""
    if arch != "qwen3_moe":
        return {}
    n_layers = int(cfg["num_hidden_layers"])
    experts = int(cfg.get("num_experts", 128))
    step = int(cfg.get("decoder_sparse_step", 1))
    dense = set(cfg.get("mlp_only_layers") or [])
    return dict(
        num_experts=experts,
        num_experts_per_tok=int(cfg.get("num_experts_per_tok", 8)),
        moe_intermediate_size=int(cfg.get("moe_intermediate_size", 768)),
        norm_topk_prob=bool(cfg.get("norm_topk_prob", False)),
        moe_layers=[i not in dense and experts > 0 and (i + 1) % step == 0 for i in range(n_layers)],
    )


def load_config(model_dir):
    with open(os.path.join(model_dir, "config.json")) as f:
        return parse_config(json.load(f))


def rope_inv_freq(c):
    """Inverse frequencies [head_dim/2] in float64, after rope scaling.

    Plain: theta^(-2i/D). linear: divide by factor (same as dividing positions by factor).
    llama3: long wavelengths (> original_ctx/low_freq_factor) are divided by factor, short ones
    (< original_ctx/high_freq_factor) kept, and the band between interpolates linearly in
    original_ctx/wavelength."""
    d = c.head_dim
    inv = 1.0 / (c.rope_theta ** (np.arange(0, d, 2, dtype=np.float64) / d))
    rs = c.rope_scaling
    if not rs:
        return inv
    if rs["rope_type"] == "yarn":
        return _yarn_inv_freq(c, inv)
    factor = float(rs.get("factor", 1.0))
    if rs["rope_type"] == "linear":
        return inv / factor
    # llama3
    low = float(rs.get("low_freq_factor", 1.0))
    high = float(rs.get("high_freq_factor", 4.0))
    old_ctx = float(rs.get("original_max_position_embeddings", 8192))
    wavelen = 2.0 * math.pi / inv
    low_wavelen = old_ctx / low
    high_wavelen = old_ctx / high
    out = np.empty_like(inv)
    for i, (f, w) in enumerate(zip(inv, wavelen)):
        if w < high_wavelen:
            out[i] = f
        elif w > low_wavelen:
            out[i] = f / factor
        else:
            s = (old_ctx / w - low) / (high - low)
            out[i] = (1.0 - s) * f / factor + s * f
    return out


def _yarn_factor(c):
    """transformers 5: an explicit factor, else max_position_embeddings / original."""
    rs = c.rope_scaling
    orig = rs.get("original_max_position_embeddings") or c.max_position_embeddings
    factor = rs.get("factor")
    return float(factor) if factor is not None else c.max_position_embeddings / orig, float(orig)


def _yarn_inv_freq(c, inv):
    """YaRN (Peng et al. 2023, transformers' _compute_yarn_parameters): per dimension pair i, the
    number of full rotations its wavelength makes over the original context decides: more than
    beta_fast -> keep the frequency, fewer than beta_slow -> divide by factor, between -> a linear
    ramp in i between the two dimension bounds (floored/ceiled unless truncate is false)."""
    rs = c.rope_scaling
    factor, orig = _yarn_factor(c)
    d = c.head_dim
    beta_fast = float(rs.get("beta_fast") or 32)
    beta_slow = float(rs.get("beta_slow") or 1)

    def dim_for(rotations):  # dimension index whose wavelength fits `rotations` times in orig
        return d * math.log(orig / (rotations * 2 * math.pi)) / (2 * math.log(c.rope_theta))

    lo, hi = dim_for(beta_fast), dim_for(beta_slow)
    if rs.get("truncate", True):
        lo, hi = math.floor(lo), math.ceil(hi)
    lo, hi = max(lo, 0), min(hi, d - 1)
    if lo == hi:
        hi += 0.001
    ramp = np.clip((np.arange(d // 2, dtype=np.float64) - lo) / (hi - lo), 0.0, 1.0)
    keep = 1.0 - ramp  # weight of the original (extrapolated) frequency
    return inv / factor * (1.0 - keep) + inv * keep


def rope_attention_factor(c):
    """The factor cos and sin are multiplied by: YaRN's mscale (0.1 ln(factor) + 1, or the ratio
    of two mscales when mscale and mscale_all_dim are given, or attention_factor); else 1."""
    rs = c.rope_scaling
    if not rs or rs["rope_type"] != "yarn":
        return 1.0
    if rs.get("attention_factor") is not None:
        return float(rs["attention_factor"])
    factor, _ = _yarn_factor(c)

    def mscale(scale, m=1.0):
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

    m, m_all = rs.get("mscale"), rs.get("mscale_all_dim")
    if m and m_all:
        return mscale(factor, float(m)) / mscale(factor, float(m_all))
    return mscale(factor)
