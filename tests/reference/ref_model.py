"""Independent float64 numpy forward pass of HF LlamaForCausalLM / Qwen2ForCausalLM /
Qwen3ForCausalLM / Qwen3MoeForCausalLM / MistralForCausalLM / Gemma3ForCausalLM (decoder-only,
pre-norm, gated MLP, rotate-half RoPE, GQA, causal softmax, optional sliding window).

Gemma 3 (modeling_gemma3): RMSNorm scales by (1 + w); the attention output goes through
post_attention_layernorm before the residual add, the MLP input through pre_feedforward_layernorm
and its output through post_feedforward_layernorm; GELU(tanh) MLP; embeddings times sqrt(E)
(rounded to the checkpoint dtype, as transformers casts the scale to the weight dtype);
softmax scale query_pre_attn_scalar^-0.5; sliding layers use plain RoPE with
rope_local_base_freq, full layers rope_theta with rope_scaling.

Shapes: T = tokens in this call, S = cached + new tokens, E = hidden_size, D = head_dim,
Hq / Hkv = query / key-value heads, V = vocab_size, F = intermediate_size.
"""
import numpy as np

from ref_config import load_config, rope_attention_factor, rope_inv_freq
from st_reader import load_model_dir


def rms_norm(x, w, eps):
    """x [..., N] * rsqrt(mean(x^2) + eps) * w [N]."""
    ms = np.mean(x * x, axis=-1, keepdims=True)
    return x / np.sqrt(ms + eps) * w


def silu(x):
    return x / (1.0 + np.exp(-x))


def gelu_tanh(x):
    """gelu_pytorch_tanh: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))


def round_to_dtype(v, dtype):
    """A float rounded to bfloat16 / float16 (round to nearest even), as torch's .to() does."""
    if dtype == "bfloat16":
        b = np.array([v], dtype=np.float32).view(np.uint32)
        b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
        return float(b.view(np.float32)[0])
    if dtype == "float16":
        return float(np.float16(v))
    return float(v)


def rope_cos_sin(inv_freq, positions):
    """cos/sin [T, D] for integer positions [T]; both halves repeat the D/2 frequencies."""
    ang = np.asarray(positions, dtype=np.float64)[:, None] * inv_freq[None, :]  # [T, D/2]
    ang = np.concatenate([ang, ang], axis=-1)
    return np.cos(ang), np.sin(ang)


def apply_rope(x, cos, sin):
    """x [T, H, D]: x*cos + rotate_half(x)*sin, rotate_half(x) = [-x2, x1] (NeoX layout)."""
    half = x.shape[-1] // 2
    rot = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * cos[:, None, :] + rot * sin[:, None, :]


def causal_attention(q, k, v, q_start, scale=None, window=0):
    """q [T, Hq, D] at positions q_start..q_start+T-1; k, v [S, Hkv, D] at positions 0..S-1.

    Query head h reads kv head h // (Hq / Hkv). With window W > 0 the query at position p sees
    keys p - W < k <= p (transformers' sliding-window mask). Returns [T, Hq, D]."""
    t, hq, d = q.shape
    s, hkv, _ = k.shape
    assert hq % hkv == 0, (hq, hkv)
    group = hq // hkv
    scale = 1.0 / np.sqrt(d) if not scale else scale
    qpos = q_start + np.arange(t)[:, None]
    kpos = np.arange(s)[None, :]
    masked = kpos > qpos  # [T, S]
    if window:
        masked = masked | (kpos <= qpos - window)
    out = np.empty_like(q)
    for h in range(hq):
        kh = k[:, h // group, :]
        vh = v[:, h // group, :]
        scores = (q[:, h, :] @ kh.T) * scale  # [T, S]
        scores = np.where(masked, -np.inf, scores)
        scores = scores - scores.max(axis=-1, keepdims=True)
        p = np.exp(scores)
        p /= p.sum(axis=-1, keepdims=True)
        out[:, h, :] = p @ vh
    return out


class KVCache:
    """Per layer: keys/values [S, Hkv, D] after RoPE, for every position already processed."""

    def __init__(self, num_layers):
        self.k = [None] * num_layers
        self.v = [None] * num_layers

    @property
    def length(self):
        return 0 if self.k[0] is None else self.k[0].shape[0]

    def append(self, layer, k, v):
        if self.k[layer] is None:
            self.k[layer], self.v[layer] = k, v
        else:
            self.k[layer] = np.concatenate([self.k[layer], k], axis=0)
            self.v[layer] = np.concatenate([self.v[layer], v], axis=0)
        return self.k[layer], self.v[layer]


class RefModel:
    def __init__(self, config, weights):
        self.c = config
        self.w = weights
        self._check_weights()
        self.inv_freq = rope_inv_freq(config)
        # Gemma 3's sliding layers: plain RoPE with rope_local_base_freq
        self.inv_freq_local = None
        if config.rope_local_theta:
            d = config.head_dim
            self.inv_freq_local = 1.0 / (config.rope_local_theta ** (np.arange(0, d, 2, dtype=np.float64) / d))
        self.rope_scale = rope_attention_factor(config)  # YaRN scales cos and sin; else 1

    @classmethod
    def from_dir(cls, model_dir):
        return cls(load_config(model_dir), load_model_dir(model_dir))

    def _get(self, name, shape):
        if name not in self.w:
            raise KeyError(f"missing tensor {name}")
        t = self.w[name]
        if tuple(t.shape) != tuple(shape):
            raise ValueError(f"tensor {name}: shape {list(t.shape)}, expected {list(shape)}")
        return t

    def _norm_w(self, name, shape):
        w = self._get(name, shape)
        return 1.0 + w if self.c.gemma else w

    def _check_weights(self):
        c = self.c
        e, d, hq, hkv, f = (c.hidden_size, c.head_dim, c.num_attention_heads,
                            c.num_key_value_heads, c.intermediate_size)
        self.embed = self._get("model.embed_tokens.weight", (c.vocab_size, e))
        self.final_norm = self._norm_w("model.norm.weight", (e,))
        if c.tie_word_embeddings:
            self.lm_head = self.embed
        else:
            self.lm_head = self._get("lm_head.weight", (c.vocab_size, e))
        self.layers = []
        for i in range(c.num_hidden_layers):
            p = f"model.layers.{i}."
            L = {
                "in_norm": self._norm_w(p + "input_layernorm.weight", (e,)),
                "post_norm": self._norm_w(p + "post_attention_layernorm.weight", (e,)),
                "q": self._get(p + "self_attn.q_proj.weight", (hq * d, e)),
                "k": self._get(p + "self_attn.k_proj.weight", (hkv * d, e)),
                "v": self._get(p + "self_attn.v_proj.weight", (hkv * d, e)),
                "o": self._get(p + "self_attn.o_proj.weight", (e, hq * d)),
            }
            if c.moe_layers and c.moe_layers[i]:
                m = c.moe_intermediate_size
                L["router"] = self._get(p + "mlp.gate.weight", (c.num_experts, e))
                L["experts"] = [(self._get(p + f"mlp.experts.{j}.gate_proj.weight", (m, e)),
                                 self._get(p + f"mlp.experts.{j}.up_proj.weight", (m, e)),
                                 self._get(p + f"mlp.experts.{j}.down_proj.weight", (e, m)))
                                for j in range(c.num_experts)]
            else:
                L["gate"] = self._get(p + "mlp.gate_proj.weight", (f, e))
                L["up"] = self._get(p + "mlp.up_proj.weight", (f, e))
                L["down"] = self._get(p + "mlp.down_proj.weight", (e, f))
            if c.qkv_bias:
                L["q_b"] = self._get(p + "self_attn.q_proj.bias", (hq * d,))
                L["k_b"] = self._get(p + "self_attn.k_proj.bias", (hkv * d,))
                L["v_b"] = self._get(p + "self_attn.v_proj.bias", (hkv * d,))
            if c.o_bias:
                L["o_b"] = self._get(p + "self_attn.o_proj.bias", (e,))
            if c.mlp_bias:
                for n, size in (("gate", f), ("up", f), ("down", e)):
                    L[n + "_b"] = self._get(p + f"mlp.{n}_proj.bias", (size,))
            if c.qk_norm:
                L["q_norm"] = self._norm_w(p + "self_attn.q_norm.weight", (d,))
                L["k_norm"] = self._norm_w(p + "self_attn.k_norm.weight", (d,))
            if c.gemma:
                L["pre_ff_norm"] = self._norm_w(p + "pre_feedforward_layernorm.weight", (e,))
                L["post_ff_norm"] = self._norm_w(p + "post_feedforward_layernorm.weight", (e,))
            self.layers.append(L)

    @staticmethod
    def _linear(x, L, name):
        y = x @ L[name].T
        b = L.get(name + "_b")
        return y if b is None else y + b

    def _router_logits(self, x, L):
        """The router's logits [T, E] (a hook: moe_router_margins.py records and perturbs them)."""
        return x @ L["router"].T

    def _moe(self, x, L):
        """Qwen3MoeSparseMoeBlock: router probabilities softmax(x W_r^T) per token, its top k
        experts (ties: the lower id), their probabilities renormalized to sum 1 when
        norm_topk_prob; out = sum over those experts of p * down(silu(gate x) * up x)."""
        c = self.c
        logits = self._router_logits(x, L)  # [T, E]
        p = np.exp(logits - logits.max(axis=-1, keepdims=True))
        p /= p.sum(axis=-1, keepdims=True)
        out = np.zeros_like(x)
        for t in range(x.shape[0]):
            top = sorted(range(c.num_experts), key=lambda j: (-p[t, j], j))[:c.num_experts_per_tok]
            w = p[t, top]
            if c.norm_topk_prob:
                w = w / w.sum()
            for j, wj in sorted(zip(top, w)):
                gate, up, down = L["experts"][j]
                out[t] += wj * (down @ (silu(gate @ x[t]) * (up @ x[t])))
        return out

    def _window(self, layer):
        w = self.c.sliding_windows
        return w[layer] if w else 0

    def _attention(self, x, L, layer, cache, start, cos, sin):
        c = self.c
        t = x.shape[0]
        q = self._linear(x, L, "q").reshape(t, c.num_attention_heads, c.head_dim)
        k = self._linear(x, L, "k").reshape(t, c.num_key_value_heads, c.head_dim)
        v = self._linear(x, L, "v").reshape(t, c.num_key_value_heads, c.head_dim)
        if c.qk_norm:  # Qwen3: per-head RMSNorm over D, before RoPE
            q = rms_norm(q, L["q_norm"], c.rms_norm_eps)
            k = rms_norm(k, L["k_norm"], c.rms_norm_eps)
        q = apply_rope(q, cos, sin)
        k = apply_rope(k, cos, sin)
        k_all, v_all = cache.append(layer, k, v)
        a = causal_attention(q, k_all, v_all, start, c.attn_scale, self._window(layer))  # [T, Hq, D]
        return self._linear(a.reshape(t, -1), L, "o")

    def forward(self, ids, cache=None):
        """Logits [T, V] (float64) for `ids` placed after the cache's tokens (positions
        cache.length .. cache.length+T-1); the cache is extended in place."""
        return self.hidden(ids, cache) @ self.lm_head.T

    def hidden(self, ids, cache=None):
        """The final RMS-normed hidden states [T, H] (float64) for `ids`, as forward() computes
        them before the LM head (what an embedding model pools)."""
        c = self.c
        ids = np.asarray(ids, dtype=np.int64)
        if ids.ndim != 1 or ids.size == 0:
            raise ValueError("ids must be a non-empty 1-D sequence")
        if ids.min() < 0 or ids.max() >= c.vocab_size:
            raise ValueError(f"token id out of range [0, {c.vocab_size})")
        if cache is None:
            cache = KVCache(c.num_hidden_layers)
        start = cache.length
        cos, sin = rope_cos_sin(self.inv_freq, np.arange(start, start + ids.size))
        cos, sin = cos * self.rope_scale, sin * self.rope_scale
        if self.inv_freq_local is not None:
            cos_l, sin_l = rope_cos_sin(self.inv_freq_local, np.arange(start, start + ids.size))
        act = gelu_tanh if c.act == "gelu_pytorch_tanh" else silu
        eps = c.rms_norm_eps
        x = self.embed[ids]  # [T, E]
        if c.gemma:
            x = x * round_to_dtype(np.sqrt(c.hidden_size), c.torch_dtype)
        for i, L in enumerate(self.layers):
            local = self.inv_freq_local is not None and self._window(i) > 0
            cs = (cos_l, sin_l) if local else (cos, sin)
            a = self._attention(rms_norm(x, L["in_norm"], eps), L, i, cache, start, *cs)
            if c.gemma:  # sandwich norms
                h = x + rms_norm(a, L["post_norm"], eps)
                m = rms_norm(h, L["pre_ff_norm"], eps)
            else:
                h = x + a
                m = rms_norm(h, L["post_norm"], eps)
            if "experts" in L:
                y = self._moe(m, L)
            else:
                y = self._linear(act(self._linear(m, L, "gate")) * self._linear(m, L, "up"), L, "down")
            x = h + (rms_norm(y, L["post_ff_norm"], eps) if c.gemma else y)
        return rms_norm(x, self.final_norm, c.rms_norm_eps)

    def greedy(self, prompt_ids, n):
        """Greedy continuation: prefill the prompt, then decode one token at a time with the
        KV cache, n tokens, never stopping at EOS. Returns (tokens, gaps) where gaps[i] is the
        top-1 minus top-2 logit of the step that chose tokens[i]."""
        cache = KVCache(self.c.num_hidden_layers)
        logits = self.forward(prompt_ids, cache)[-1]
        tokens, gaps = [], []
        for _ in range(n):
            tok = int(np.argmax(logits))
            top2 = np.partition(logits, -2)[-2:]
            tokens.append(tok)
            gaps.append(float(top2[1] - top2[0]))
            if len(tokens) == n:
                break
            logits = self.forward([tok], cache)[-1]
        return tokens, gaps
