#!/usr/bin/python3
"""Self-checks of the numpy reference (no C++ needed): mathematical identities of its parts and
consistency between its code paths. Run: /usr/bin/python3 tests/reference/selftest.py"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

import st_reader  # noqa: E402
from ref_config import parse_config, rope_inv_freq  # noqa: E402
from ref_model import (KVCache, RefModel, apply_rope, causal_attention, rms_norm,  # noqa: E402
                       rope_cos_sin)

HERE = os.path.dirname(os.path.abspath(__file__))


def tiny_config(arch, **over):
    cfg = {
        "architectures": [{"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM",
                           "qwen3": "Qwen3ForCausalLM"}[arch]],
        "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 97,
        "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "tie_word_embeddings": False,
        "hidden_act": "silu", "max_position_embeddings": 128,
    }
    if arch == "qwen3":
        cfg["head_dim"] = 16  # Qwen3 decouples head_dim from hidden/heads
    cfg.update(over)
    return cfg


def random_weights(cfg_dict, seed):
    """HF-named random weights (float64) for a config dict."""
    c = parse_config(cfg_dict)
    rng = np.random.RandomState(seed)
    e, d, hq, hkv, f, v = (c.hidden_size, c.head_dim, c.num_attention_heads, c.num_key_value_heads,
                           c.intermediate_size, c.vocab_size)

    def r(*shape, s=0.2):
        return rng.normal(0.0, s, size=shape)

    w = {"model.embed_tokens.weight": r(v, e, s=1.0), "model.norm.weight": 1.0 + r(e, s=0.1)}
    if not c.tie_word_embeddings:
        w["lm_head.weight"] = r(v, e)
    for i in range(c.num_hidden_layers):
        p = f"model.layers.{i}."
        w[p + "input_layernorm.weight"] = 1.0 + r(e, s=0.1)
        w[p + "post_attention_layernorm.weight"] = 1.0 + r(e, s=0.1)
        w[p + "self_attn.q_proj.weight"] = r(hq * d, e)
        w[p + "self_attn.k_proj.weight"] = r(hkv * d, e)
        w[p + "self_attn.v_proj.weight"] = r(hkv * d, e)
        w[p + "self_attn.o_proj.weight"] = r(e, hq * d)
        w[p + "mlp.gate_proj.weight"] = r(f, e)
        w[p + "mlp.up_proj.weight"] = r(f, e)
        w[p + "mlp.down_proj.weight"] = r(e, f)
        if c.qkv_bias:
            w[p + "self_attn.q_proj.bias"] = r(hq * d)
            w[p + "self_attn.k_proj.bias"] = r(hkv * d)
            w[p + "self_attn.v_proj.bias"] = r(hkv * d)
        if c.qk_norm:
            w[p + "self_attn.q_norm.weight"] = 1.0 + r(d, s=0.1)
            w[p + "self_attn.k_norm.weight"] = 1.0 + r(d, s=0.1)
    return w


def model_of(arch, seed=0, **over):
    cfg = tiny_config(arch, **over)
    return RefModel(parse_config(cfg), random_weights(cfg, seed))


def rel_err(a, b):
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def check(name, ok, detail=""):
    print(f"{'PASS' if ok else 'FAIL'}: {name} {detail}")
    if not ok:
        check.failures.append(name)


check.failures = []


def test_rms_norm():
    x = np.random.RandomState(1).normal(0, 3.0, size=(5, 64))
    y = rms_norm(x, np.ones(64), 1e-6)
    rms = np.sqrt(np.mean(y * y, axis=-1))
    check("rmsnorm unit rms with w=1", np.allclose(rms, 1.0, atol=1e-6), f"max |rms-1|={np.max(np.abs(rms - 1)):.2e}")
    check("rmsnorm scales by w", np.allclose(rms_norm(x, np.full(64, 2.5), 1e-6), 2.5 * y))


def test_rope():
    c = parse_config(tiny_config("llama"))
    inv = rope_inv_freq(c)
    x = np.random.RandomState(2).normal(size=(3, 4, c.head_dim))
    cos, sin = rope_cos_sin(inv, np.zeros(3, dtype=np.int64))
    check("rope at position 0 is identity", np.array_equal(apply_rope(x, cos, sin), x))
    pos = np.array([5, 17, 100])
    cos, sin = rope_cos_sin(inv, pos)
    y = apply_rope(x, cos, sin)
    check("rope preserves norm", np.allclose(np.linalg.norm(y, axis=-1), np.linalg.norm(x, axis=-1)))
    # dot(rope(q, m), rope(k, n)) depends only on m - n
    q, k = x[0, 0], x[1, 0]

    def dot_at(m, n):
        cm, sm = rope_cos_sin(inv, np.array([m, n]))
        qq = apply_rope(np.stack([q, q])[:, None, :], cm, sm)[0, 0]
        kk = apply_rope(np.stack([k, k])[:, None, :], cm, sm)[1, 0]
        return qq @ kk
    check("rope relative-position property", abs(dot_at(10, 3) - dot_at(107, 100)) < 1e-9)
    # rotate-half pairs dim i with i + D/2 at frequency inv[i]
    d = c.head_dim
    e0 = np.zeros((1, 1, d)); e0[0, 0, 0] = 1.0
    cos, sin = rope_cos_sin(inv, np.array([3]))
    y = apply_rope(e0, cos, sin)[0, 0]
    want = np.zeros(d); want[0] = np.cos(3 * inv[0]); want[d // 2] = np.sin(3 * inv[0])
    check("rope rotate-half layout", np.allclose(y, want))
    check("rope inv_freq[0] == 1 and last == theta^-(D-2)/D",
          inv[0] == 1.0 and np.isclose(inv[-1], c.rope_theta ** (-(d - 2) / d)))


def test_rope_scaling():
    base = parse_config(tiny_config("llama", head_dim=128, hidden_size=256, rope_theta=500000.0))
    inv = rope_inv_freq(base)
    lin = parse_config(tiny_config("llama", head_dim=128, hidden_size=256, rope_theta=500000.0,
                                   rope_scaling={"type": "linear", "factor": 4.0}))
    check("rope linear scaling divides inv_freq", np.allclose(rope_inv_freq(lin), inv / 4.0))
    l3 = parse_config(tiny_config("llama", head_dim=128, hidden_size=256, rope_theta=500000.0,
                                  rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                                "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}))
    s = rope_inv_freq(l3)
    wl = 2 * np.pi / inv
    hi, lo = wl < 8192 / 4.0, wl > 8192 / 1.0
    mid = ~hi & ~lo
    ok = (np.array_equal(s[hi], inv[hi]) and np.allclose(s[lo], inv[lo] / 8.0) and mid.any()
          and np.all(s[mid] < inv[mid]) and np.all(s[mid] > inv[mid] / 8.0) and np.all(np.diff(s) < 0))
    check("rope llama3 scaling bands", ok, f"(high={hi.sum()} mid={mid.sum()} low={lo.sum()})")


def test_attention():
    rng = np.random.RandomState(3)
    q = rng.normal(size=(6, 4, 8)); k = rng.normal(size=(6, 4, 8)); v = rng.normal(size=(6, 4, 8))
    out = causal_attention(q, k, v, 0)
    # Explicit per-position softmax over keys 0..t (MHA)
    want = np.zeros_like(out)
    for t in range(6):
        for h in range(4):
            s = np.array([q[t, h] @ k[j, h] / np.sqrt(8) for j in range(t + 1)])
            p = np.exp(s - s.max()); p /= p.sum()
            want[t, h] = sum(p[j] * v[j, h] for j in range(t + 1))
    check("attention == explicit causal softmax", np.allclose(out, want, atol=1e-12))
    check("attention first position returns v", np.allclose(out[0], v[0]))
    # GQA with 2 kv heads == MHA with each kv head repeated for its group (h // 2)
    kg, vg = k[:, :2], v[:, :2]
    gqa = causal_attention(q, kg, vg, 0)
    mha = causal_attention(q, np.repeat(kg, 2, axis=1), np.repeat(vg, 2, axis=1), 0)
    check("gqa == mha with repeated kv heads", np.allclose(gqa, mha, atol=1e-12))


def test_gqa_model():
    """A GQA model equals the MHA model whose k/v projections repeat each kv head per group."""
    cfg = tiny_config("llama")
    w = random_weights(cfg, 4)
    d, group = 8, 2
    mha_cfg = dict(cfg, num_key_value_heads=cfg["num_attention_heads"])
    w2 = dict(w)
    for i in range(cfg["num_hidden_layers"]):
        for n in ("k_proj", "v_proj"):
            key = f"model.layers.{i}.self_attn.{n}.weight"
            heads = w[key].reshape(-1, d, w[key].shape[1])
            w2[key] = np.repeat(heads, group, axis=0).reshape(-1, w[key].shape[1])
    ids = [1, 5, 9, 33, 2, 96, 40]
    a = RefModel(parse_config(cfg), w).forward(ids)
    b = RefModel(parse_config(mha_cfg), w2).forward(ids)
    check("gqa model == mha model with repeated kv weights", rel_err(a, b) < 1e-12, f"rel={rel_err(a, b):.1e}")


def test_kv_cache():
    for arch in ("llama", "qwen2", "qwen3"):
        m = model_of(arch, seed=5)
        ids = list(np.random.RandomState(6).randint(0, 97, size=20))
        full = m.forward(ids)
        cache = KVCache(m.c.num_hidden_layers)
        parts = [m.forward(ids[:7], cache)] + [m.forward([t], cache) for t in ids[7:12]] + [m.forward(ids[12:], cache)]
        inc = np.concatenate(parts, axis=0)
        e = rel_err(inc, full)
        check(f"{arch}: kv-cache incremental == full recompute", e < 1e-12, f"rel={e:.1e}")
        later = m.forward(ids[:10] + [(t + 1) % 97 for t in ids[10:]])
        check(f"{arch}: causal (later tokens do not change earlier logits)",
              np.allclose(later[:10], full[:10], atol=1e-12) and not np.allclose(later[10:], full[10:]))
        toks, gaps = m.greedy(ids[:5], 6)
        seq, ok = list(ids[:5]), True
        for t in toks:
            ok &= int(np.argmax(m.forward(seq)[-1])) == t
            seq.append(t)
        check(f"{arch}: greedy == argmax of full recompute per step", ok and min(gaps) >= 0)


def test_arch_relations():
    cfg = tiny_config("llama")
    w = random_weights(cfg, 7)
    ids = [3, 1, 4, 1, 5, 9, 2, 6]
    llama = RefModel(parse_config(cfg), w).forward(ids)
    q2cfg = dict(cfg, architectures=["Qwen2ForCausalLM"])
    wz = dict(w)
    for i in range(cfg["num_hidden_layers"]):
        for n, size in (("q", 32), ("k", 16), ("v", 16)):
            wz[f"model.layers.{i}.self_attn.{n}_proj.bias"] = np.zeros(size)
    e = rel_err(RefModel(parse_config(q2cfg), wz).forward(ids), llama)
    check("qwen2 with zero q/k/v bias == llama", e < 1e-14, f"rel={e:.1e}")
    wb = dict(wz); wb["model.layers.0.self_attn.v_proj.bias"] = np.full(16, 0.3)
    check("qwen2 v bias changes logits", rel_err(RefModel(parse_config(q2cfg), wb).forward(ids), llama) > 1e-3)
    # Qwen3 q/k norm: logits invariant to scaling q_proj/k_proj by a positive constant
    m3cfg = tiny_config("qwen3")
    w3 = random_weights(m3cfg, 8)
    base = RefModel(parse_config(m3cfg), w3).forward(ids)
    w3s = dict(w3)
    for i in range(m3cfg["num_hidden_layers"]):
        w3s[f"model.layers.{i}.self_attn.q_proj.weight"] = w3[f"model.layers.{i}.self_attn.q_proj.weight"] * 7.0
        w3s[f"model.layers.{i}.self_attn.k_proj.weight"] = w3[f"model.layers.{i}.self_attn.k_proj.weight"] * 0.5
    e = rel_err(RefModel(parse_config(m3cfg), w3s).forward(ids), base)
    check("qwen3 qk-norm makes logits invariant to q/k scale", e < 1e-5, f"rel={e:.1e}")
    tied = dict(cfg, tie_word_embeddings=True)
    wt = dict(w); del wt["lm_head.weight"]
    mt = RefModel(parse_config(tied), wt)
    x = mt.forward(ids)
    check("tied lm_head uses embed_tokens", mt.lm_head is mt.embed and x.shape == (8, 97))


def test_safetensors_and_cli():
    cfg = tiny_config("qwen3", tie_word_embeddings=True)
    w = random_weights(cfg, 9)
    ids = [5, 6, 7, 8, 90, 1]
    with tempfile.TemporaryDirectory() as tmp:
        for tag in ("F32", "BF16", "F16"):
            d = os.path.join(tmp, tag)
            os.makedirs(d)
            with open(os.path.join(d, "config.json"), "w") as f:
                json.dump(cfg, f)
            tensors, expect = {}, {}
            for n, a in w.items():
                f32 = a.astype(np.float32)
                if tag == "BF16":
                    bits = st_reader.f32_to_bf16_bits(f32)
                    tensors[n], expect[n] = ("BF16", bits), st_reader.bf16_bits_to_f32(bits).astype(np.float64)
                elif tag == "F16":
                    tensors[n], expect[n] = ("F16", f32.astype(np.float16)), f32.astype(np.float16).astype(np.float64)
                else:
                    tensors[n], expect[n] = ("F32", f32), f32.astype(np.float64)
            st_reader.save_file(os.path.join(d, "model.safetensors"), tensors)
            got = st_reader.load_model_dir(d)
            check(f"safetensors {tag} round trip exact",
                  set(got) == set(expect) and all(np.array_equal(got[n], expect[n]) for n in expect))
            m = RefModel.from_dir(d)
            want = m.forward(ids)
            out = os.path.join(tmp, f"{tag}.npy")
            cli = [sys.executable, os.path.join(HERE, "hf_reference.py"), "--model", d,
                   "--prompt-ids", ",".join(map(str, ids))]
            subprocess.run(cli + ["--logits-out", out], check=True)
            cl = np.load(out)
            check(f"cli --logits-out {tag} float32 [T,V]", cl.dtype == np.float32 and cl.shape == (6, 97)
                  and rel_err(cl.astype(np.float64), want) < 1e-6)
            if tag == "BF16":
                r = json.loads(subprocess.run(cli + ["--greedy", "5", "--json"], check=True,
                                              capture_output=True, text=True).stdout)
                check("cli --greedy --json", r["token_ids"] == m.greedy(ids, 5)[0] and len(r["token_ids"]) == 5)
        # bf16 rounding of the bits: 1 + 2^-8 is a tie -> even (1.0); 1 + 3*2^-9 rounds up
        bits = st_reader.f32_to_bf16_bits(np.array([1 + 2 ** -8, 1 + 3 * 2 ** -9, -2.0], dtype=np.float32))
        check("bf16 round-to-nearest-even", list(st_reader.bf16_bits_to_f32(bits)) == [1.0, 1 + 2 ** -7, -2.0])


def main():
    for t in (test_rms_norm, test_rope, test_rope_scaling, test_attention, test_gqa_model, test_kv_cache,
              test_arch_relations, test_safetensors_and_cli):
        try:
            t()
        except Exception as e:  # a crash in one group is a failure, not an abort
            import traceback
            traceback.print_exc()
            check(t.__name__, False, f"raised {e!r}")
    if check.failures:
        print(f"{len(check.failures)} self-check(s) FAILED: {check.failures}")
        return 1
    print("all reference self-checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
