"""GGUF models (issue 29), checked against the independent numpy reference
(tests/reference/gguf_ref.py: its own writer, quantizers and ggml-order dequantization):

- every block type dequantizes bit-identically to the reference (`gguf-info --dequant`);
- a model converted to GGUF gives exactly the logits of an HF checkpoint holding the
  reference's dequantized weights (names, shapes, llama q/k un-permutation, config);
- the tokenizer and chat template come from the GGUF metadata alone, equal to tokenizer.json's;
- --quantization auto repacks Q4_0 / Q4_1 / Q8_0 / Q4_K losslessly (every row bit-identical), and the
  engine's features (prefix cache, preemption, n > 1, TP = 2, structured outputs) give on the
  GGUF file exactly what they give on the dequantized checkpoint with the same scheme;
- corrupt files are clear errors, never crashes."""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from conftest import BIN, SRC, make_model, run_cli
from nanovllm import LLM, SamplingParams, StructuredOutputsParams

sys.path.insert(0, os.path.join(SRC, "tests", "reference"))
import gguf_ref  # noqa: E402
import st_reader  # noqa: E402

TYPES = ["F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K",
         "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS"]
PROMPTS = [[1000 + 37 * i + j for i in range(40)] for j in range(4)]
KW = dict(kvcache_block_size=16, max_model_len=256)


def test_every_type_dequantizes_like_the_reference(tmp_path):
    rng = np.random.default_rng(0)
    tensors = []
    for t in TYPES:
        cols = 512  # two 256-blocks, sixteen 32-blocks
        if t in ("F32", "F16", "BF16"):
            x = rng.standard_normal((3, cols)).astype(np.float32)
            data = gguf_ref.quantize(x, t)
        else:
            data = gguf_ref.random_blocks(t, 3 * cols // gguf_ref.block_size(t), rng)
        tensors.append(gguf_ref.Tensor(f"t.{t}", (3, cols), t, bytes(data)))
    path = tmp_path / "types.gguf"
    gguf_ref.write_gguf(str(path), {"general.architecture": "llama"}, tensors)
    f = gguf_ref.GGUFFile(str(path))
    for t in TYPES:
        out = tmp_path / f"{t}.f32"
        run_cli("gguf-info", path, "--dequant", f"t.{t}", "--out", out)
        ours = np.fromfile(out, dtype=np.float32).reshape(3, 512)
        ref = f.tensor(f"t.{t}")
        assert ours.tobytes() == ref.astype(np.float32).tobytes(), (t, np.abs(ours - ref).max())


def dequantized_checkpoint(gguf_path, model_dir, out_dir):
    """An HF directory whose f32 weights are the reference's dequantization of the GGUF
    tensors (q/k un-permuted for llama), config and tokenizer files copied from model_dir."""
    f = gguf_ref.GGUFFile(str(gguf_path))
    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    llama = cfg["model_type"] in ("llama", "mistral")
    n_head = cfg["num_attention_heads"]
    n_kv = cfg.get("num_key_value_heads", n_head)
    names = list(st_reader.load_model_dir(model_dir))
    out = {}
    for hf in names:
        g = gguf_ref.gguf_tensor_name(hf)
        if g is None or g not in f.tensors:
            continue  # tied lm_head
        w = f.tensor(g).astype(np.float32)
        if llama and (".attn_q." in g or ".attn_k." in g):
            h = n_head if ".attn_q." in g else n_kv
            rows = w.shape[0]
            w = w.reshape(h, rows // h // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)
        out[hf] = ("F32", w)
    os.makedirs(out_dir, exist_ok=True)
    st_reader.save_file(os.path.join(out_dir, "model.safetensors"), out)
    cfg["torch_dtype"] = "float32"
    json.dump(cfg, open(os.path.join(out_dir, "config.json"), "w"))
    for n in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        if os.path.exists(os.path.join(model_dir, n)):
            shutil.copy(os.path.join(model_dir, n), out_dir)
    return str(out_dir)


@pytest.fixture(scope="module")
def llama_model(tmp_path_factory):
    return make_model(tmp_path_factory.mktemp("m") / "llama-tiny", arch="llama")


@pytest.fixture(scope="module")
def qwen_small(tmp_path_factory):
    return make_model(tmp_path_factory.mktemp("m") / "qwen3-small", preset="small")


def logits(model, ids, path, quant="none"):
    run_cli("logits", "--model", model, "--prompt-ids", ",".join(map(str, ids)), "--out", path,
            "--quantization", quant)
    return np.load(path)


@pytest.mark.parametrize("arch,ttype", [("llama", "Q4_K_M"), ("llama", "Q8_0"), ("qwen3", "Q4_K_M"),
                                        ("qwen3", "Q6_K"), ("qwen3", "IQ4_XS"), ("qwen3", "Q2_K")])
def test_logits_equal_dequantized_checkpoint(arch, ttype, llama_model, qwen_small, tmp_path):
    model = llama_model if arch == "llama" else qwen_small
    g = tmp_path / f"{arch}-{ttype}.gguf"
    gguf_ref.model_to_gguf(model, str(g), ttype)
    ref_dir = dequantized_checkpoint(g, model, tmp_path / "deq")
    ids = PROMPTS[0]
    a = logits(str(g), ids, tmp_path / "a.npy")
    b = logits(ref_dir, ids, tmp_path / "b.npy")
    assert a.shape == b.shape and a.tobytes() == b.tobytes(), np.abs(a - b).max()


def test_rope_freqs_factors(llama_model, tmp_path):
    """A Llama with Llama-3.1 rope scaling, converted as llama.cpp's converter does (the scaling
    becomes a rope_freqs.weight tensor of per-frequency divisors, no metadata): its GGUF gives
    the logits of the HF checkpoint with the llama3 rope_scaling (f32 factors against our f64
    frequencies: equal to rounding), and clearly not those of the unscaled model."""
    scaled = tmp_path / "llama3"
    shutil.copytree(llama_model, scaled)
    cfg = json.load(open(scaled / "config.json"))
    cfg["rope_scaling"] = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                           "high_freq_factor": 4.0, "original_max_position_embeddings": 64}
    json.dump(cfg, open(scaled / "config.json", "w"))
    g = tmp_path / "llama3.gguf"
    gguf_ref.model_to_gguf(str(scaled), str(g), "F32")
    r = gguf_ref.GGUFFile(str(g))
    assert "rope_freqs.weight" in r.tensors and not any("rope.scaling" in k for k in r.kv)
    factors = r.tensor("rope_freqs.weight")
    assert factors.min() == 1.0 and factors.max() == 8.0  # some pairs kept, some divided by 8
    ids = PROMPTS[1]
    a = logits(str(g), ids, tmp_path / "a.npy")
    b = logits(str(scaled), ids, tmp_path / "b.npy")
    c = logits(llama_model, ids, tmp_path / "c.npy")
    scale = np.abs(b).max()
    assert np.abs(a - b).max() <= 1e-4 * scale, np.abs(a - b).max() / scale
    assert np.abs(c - b).max() >= 1e-2 * scale, np.abs(c - b).max() / scale
    info = json.loads(run_cli("gguf-info", g, "--json"))
    assert info["config"]["rope_freq_factors"] == [float(x) for x in factors], info["config"]


def test_tokenizer_and_chat_template_from_metadata(llama_model, qwen_small, tmp_path):
    for model in (qwen_small, llama_model):
        g = tmp_path / (os.path.basename(model) + ".gguf")
        gguf_ref.model_to_gguf(model, str(g), "Q8_0")  # alone in its folder: no tokenizer.json
        texts = ["Hello, world. 日本語 123456789 <|im_start|>x  \n\t end", "The capital of France"]
        sp = SamplingParams(temperature=0.0, max_tokens=6, ignore_eos=True)
        ref_dir = dequantized_checkpoint(g, model, tmp_path / ("deq-" + os.path.basename(model)))
        ours, ref = LLM(str(g), quantization="none", **KW), LLM(ref_dir, **KW)
        assert ours.get_tokenizer().encode(texts[0]) == ref.get_tokenizer().encode(texts[0])
        a = [(r["token_ids"], r["text"]) for r in ours.generate(texts, sp, use_tqdm=False)]
        b = [(r["token_ids"], r["text"]) for r in ref.generate(texts, sp, use_tqdm=False)]
        assert a == b
        msgs = [{"role": "user", "content": "Hi there"}]
        assert ours.get_tokenizer().apply_chat_template(msgs, tokenize=False, add_generation_prompt=True) == \
            ref.get_tokenizer().apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)


@pytest.mark.parametrize("ttype,scheme,layout", [("Q4_0", "int4-g32", "int4-g32"), ("Q4_1", "int4-g32-zp", "int4-g32-zp"),
                                                 ("Q8_0", "int8-g32", "int8-g32"),
                                                 ("Q5_0", "int8-g32", "int8-g32"),
                                                 ("IQ4_NL", "int8-g32", "int4-g32-nl"), ("IQ4_XS", "int8-g32", "int4-g32-nl"),
                                                 ("Q4_K", "int4-g32-zp", "int4-g32-zp-k"),
                                                 ("Q5_K", "int8", "int5-g32-zp-k"), ("Q6_K", "int8", "int6-g16-k"),
                                                 ("Q3_K", "int8-g32", "int3-g16-k"),
                                                 ("Q2_K", "int8-g32", "int2-g16-zp-k"),
                                                 ("Q5_1", "int8-g32", "int5-g32-zp")])
def test_repack_is_lossless(ttype, scheme, layout, qwen_small, tmp_path):
    """Q4_0 / Q4_1 / Q8_0 re-quantize to their own grid, Q5_0 to int8-g32's (its values d x
    integer with |integer| <= 16: the quantizer finds d); Q4_K's codes and two-level scales and
    mins (Q5_K's likewise with 5-bit codes), Q6_K's codes, i8 sub-scales and f16 d, Q3_K's 3-bit
    codes likewise, Q2_K's 2-bit codes with their 4-bit scales and mins per 16, Q5_1's
    5-bit codes with its f16 d and m per 32, and IQ4_NL / IQ4_XS's table codes with their scales
    per 32, are repacked as stored (int4-g32-zp-k, int5-g32-zp-k, int6-g16-k, int3-g16-k, int2-g16-zp-k,
    int5-g32-zp, int4-g32-nl): every row
    bit-identical to ggml's dequantization.
    (`quantization_auto` names the table's scheme, which only a fused weight of mixed types uses.)"""
    g = tmp_path / f"{ttype}.gguf"
    types = gguf_ref.model_to_gguf(qwen_small, str(g), ttype)
    assert sum(t == ttype for t in types.values()) >= 5, types
    info = json.loads(run_cli("gguf-info", g, "--json", "--repack-check"))
    assert info["quantization_auto"] == scheme
    r = info["repack"]["by_type"][ttype]
    assert r["scheme"] == layout
    assert r["exact_rows"] == r["rows"] > 0 and r["max_abs_diff"] == 0, r


@pytest.mark.parametrize("arch,ttype", [("qwen3", "Q4_K"), ("llama", "Q4_K"), ("qwen3_moe", "Q4_K"),
                                        ("qwen3", "Q5_K"), ("qwen3", "Q6_K"), ("qwen3", "Q3_K"),
                                        ("qwen3", "IQ4_XS"), ("llama", "IQ4_NL"), ("qwen3_moe", "IQ4_XS"),
                                        ("qwen3", "Q2_K"), ("qwen3_moe", "Q2_K"), ("qwen3", "Q5_1")])
def test_k_quants_run_as_stored(arch, ttype, qwen_small, tmp_path):
    """A Q4_K / Q5_K / Q6_K / Q3_K / Q2_K / Q5_1 / IQ4 file under --quantization auto: its weights are exact (test_repack_is_lossless), so
    what separates its logits from the exact dense model (--quantization none) is the
    activations' int8 rounding: about the distance of a Q8_0 file's, whose weights are exact too.
    (That rounding, ~2% of the logits here, also hides most of a 4-bit re-fit's weight error -
    up to 4% of a row's largest weight - so this cannot tell the two apart; a wrong scale, min,
    code order or llama q / k row order could not pass.)"""
    ids = PROMPTS[1][:24]
    model = qwen_small if arch == "qwen3" else make_model(tmp_path / f"{arch}-small", preset="small", arch=arch)
    g = tmp_path / f"{arch}-{ttype}.gguf"
    types = gguf_ref.model_to_gguf(model, str(g), ttype)
    assert types["blk.0.attn_q.weight"] == ttype, types
    if arch == "qwen3_moe":  # the expert stacks as stored too
        assert types["blk.0.ffn_gate_exps.weight"] == ttype, types
        info = json.loads(run_cli("gguf-info", g, "--json", "--repack-check"))
        assert info["repack"]["by_type"][ttype]["exact_rows"] == info["repack"]["by_type"][ttype]["rows"]
    exact, auto = (logits(str(g), ids, tmp_path / f"k-{q}.npy", q) for q in ("none", "auto"))
    g8 = tmp_path / f"{arch}-Q8_0.gguf"
    gguf_ref.model_to_gguf(model, str(g8), "Q8_0")
    exact8, auto8 = (logits(str(g8), ids, tmp_path / f"8-{q}.npy", q) for q in ("none", "auto"))
    e_auto, e_q8 = rel_err(auto, exact), rel_err(auto8, exact8)
    assert e_auto < 1.5 * e_q8, (e_auto, e_q8)
    # TP = 2: column halves of the stored rows, row-parallel halves of the groups (Q5_K's and
    # Q6_K's o_proj halves cut a superblock: each rank keeps it whole, the other rank's columns
    # as zeros)
    if arch == "qwen3":
        kw = dict(device="cpu", num_threads=1, num_kvcache_blocks=64, **KW)
        one = [r["token_ids"] for r in greedy(LLM(str(g), **kw), PROMPTS[:2], max_tokens=8)]
        two = [r["token_ids"] for r in greedy(LLM(str(g), tensor_parallel_size=2, **kw), PROMPTS[:2], max_tokens=8)]
        assert two == one


def rel_err(a, ref):
    return float(np.sqrt(((a - ref) ** 2).mean() / (ref ** 2).mean()))


def assert_auto_closer(g, ids, uniform_scheme, tmp_path):
    """--quantization auto (per-tensor schemes) is clearly closer to the file's exact model
    (--quantization none) than one `uniform_scheme` for every linear (what auto used to be)."""
    exact, auto, uniform = (logits(str(g), ids, tmp_path / f"{g.stem}-{q}.npy", q)
                            for q in ("none", "auto", uniform_scheme))
    assert rel_err(auto, exact) < 0.85 * rel_err(uniform, exact), (rel_err(auto, exact), rel_err(uniform, exact))


def override_type(monkeypatch, suffix, ttype):
    """gguf_ref.model_to_gguf writes tensors whose name ends with `suffix` as `ttype`."""
    real = gguf_ref.tensor_type
    monkeypatch.setattr(gguf_ref, "tensor_type",
                        lambda gname, shape, t: ttype if gname.endswith(suffix) else real(gname, shape, t))


def test_mixed_file_keeps_each_tensors_precision(qwen_small, tmp_path, monkeypatch):
    """--quantization auto picks a scheme per tensor from its own ggml type: a Q4_K_M file's Q6_K
    ffn_down and tied token_embd (the LM head) run as stored (int6-g16-k), its Q6_K attn_v too
    (the fused q/k/v with Q4_K q / k runs each part in its own form: the next test), and a
    tensor llama-quantize left in F16 (rows that are not whole blocks) stays dense, instead of
    everything taking the majority's int4 scheme. Checked by the logits' distance to the exact
    dequantized model (--quantization none): per-tensor auto must be clearly closer than the
    uniform scheme, which is what auto used to be."""
    ids = PROMPTS[1][:24]
    g = tmp_path / "qwen3-Q4_K_M.gguf"
    gguf_ref.model_to_gguf(qwen_small, str(g), "Q4_K_M")
    assert_auto_closer(g, ids, "int4-g32-zp", tmp_path)
    info = json.loads(run_cli("gguf-info", g, "--json", "--repack-check"))
    assert info["quantization_auto"] == "int4-g32-zp"
    n_layers = json.load(open(os.path.join(qwen_small, "config.json")))["num_hidden_layers"]
    # gguf_ref's Q4_K_M recipe: attn_v and ffn_down in Q6_K in every layer, the rest Q4_K
    assert info["quantization_auto_tensors"] == {"int4-g32-zp-k": 5 * n_layers, "int6-g16-k": 2 * n_layers}
    assert info["lm_head_auto"] == "int6-g16-k"
    # The engine reports that head as settled, a valid input again, and only for such a head.
    kw = dict(device="cpu", num_threads=1, num_kvcache_blocks=16, **KW)
    assert LLM(str(g), **kw).config.lm_head_quantization == "int6-g16-k"
    assert LLM(str(g), lm_head_quantization="int6-g16-k", **kw).config.lm_head_quantization == "int6-g16-k"
    with pytest.raises(Exception, match="keeps a GGUF's Q6_K LM head as stored"):
        LLM(qwen_small, lm_head_quantization="int6-g16-k", **kw)
    assert info["repack"]["by_type"]["Q6_K"]["scheme"] == "int6-g16-k"
    assert info["repack"]["by_type"]["Q4_K"]["scheme"] == "int4-g32-zp-k"

    # A Q4_0 file whose ffn_down stayed F16: those rows run dense, the rest as int4-g32.
    override_type(monkeypatch, "ffn_down.weight", "F16")
    g2 = tmp_path / "qwen3-Q4_0-f16down.gguf"
    gguf_ref.model_to_gguf(qwen_small, str(g2), "Q4_0")
    assert_auto_closer(g2, ids, "int4-g32", tmp_path)


def bench_weight_bytes(g, *extra):
    out = run_cli("bench", "--model", g, "--num-seqs", "1", "--min-input-len", "4", "--max-input-len", "4",
                  "--min-output-len", "2", "--max-output-len", "2", "--json", "--no-progress", "--threads", "1",
                  *extra)
    return json.loads(out.strip().splitlines()[-1])["weight_bytes"]


def test_fused_parts_of_different_forms_run_as_stored(qwen_small, tmp_path, monkeypatch):
    """A fused q / k / v whose parts the file stores in different forms (gguf_ref's Q4_K_M: Q4_K
    q / k, Q6_K v) runs each part as stored (a composite weight, kernels/quantized.h), not all
    three re-quantized to int8: against the same file with a Q4_K v, the weights differ by exactly
    v's int6-g16-k layout against its int4-g32-zp-k one in every layer (the int8 fallback held
    q, k and v at 8 bits and more), and every weight stays exact, so auto's logits are as close
    to the exact model's as the all-Q4_K file's (only the int8 activations differ from it)."""
    cfg = json.load(open(os.path.join(qwen_small, "config.json")))
    L, H = cfg["num_hidden_layers"], cfg["hidden_size"]
    nv = cfg["num_key_value_heads"] * cfg.get("head_dim", H // cfg["num_attention_heads"])
    blocks, sb = -(-nv // 16), H // 256  # 16-row blocks, 256-column superblocks
    int4k = blocks * sb * 2368
    int6 = blocks * (-(-sb * 32 // 64) * 64 + sb * 3328)
    g = tmp_path / "qwen3-Q4_K_M.gguf"
    gguf_ref.model_to_gguf(qwen_small, str(g), "Q4_K_M")
    override_type(monkeypatch, "attn_v.weight", "Q4_K")
    g4 = tmp_path / "qwen3-Q4_K_M-v4.gguf"
    gguf_ref.model_to_gguf(qwen_small, str(g4), "Q4_K_M")
    assert bench_weight_bytes(g) - bench_weight_bytes(g4) == L * (int6 - int4k)
    ids = PROMPTS[1][:24]
    exact, auto = (logits(str(g), ids, tmp_path / f"m-{q}.npy", q) for q in ("none", "auto"))
    exact4, auto4 = (logits(str(g4), ids, tmp_path / f"4-{q}.npy", q) for q in ("none", "auto"))
    # (Measured on AMD Zen 4, AVX2: 1.017x; 1.067x when q / k / v ran re-quantized to int8-g32.)
    assert rel_err(auto, exact) < 1.04 * rel_err(auto4, exact4), (rel_err(auto, exact), rel_err(auto4, exact4))


def test_q3_k_head_and_parts_run_as_stored(qwen_small, tmp_path, monkeypatch):
    """A Q3_K file's tied token_embd (its LM head) runs as stored (int3-g16-k): auto picks it, the
    engine reports it settled and takes it back as input. And a fused q / k / v of Q3_K q / k with a
    Q6_K v runs each part as stored (a composite weight): against the all-Q3_K file the weights
    differ by exactly v's int6-g16-k layout against its int3-g16-k one in every layer."""
    cfg = json.load(open(os.path.join(qwen_small, "config.json")))
    L, H = cfg["num_hidden_layers"], cfg["hidden_size"]
    nv = cfg["num_key_value_heads"] * cfg.get("head_dim", H // cfg["num_attention_heads"])
    blocks, sb = -(-nv // 16), H // 256  # 16-row blocks, 256-column superblocks
    dtable = -(-sb * 32 // 64) * 64  # the f16 d of each superblock, padded to 64 bytes
    int3, int6 = blocks * (dtable + sb * 1792), blocks * (dtable + sb * 3328)
    g = tmp_path / "qwen3-Q3_K.gguf"
    types = gguf_ref.model_to_gguf(qwen_small, str(g), "Q3_K")
    assert types["token_embd.weight"] == "Q3_K", types
    info = json.loads(run_cli("gguf-info", g, "--json"))
    assert info["lm_head_auto"] == "int3-g16-k"
    kw = dict(device="cpu", num_threads=1, num_kvcache_blocks=16, **KW)
    assert LLM(str(g), **kw).config.lm_head_quantization == "int3-g16-k"
    out = greedy(LLM(str(g), lm_head_quantization="int3-g16-k", **kw), PROMPTS[:1], max_tokens=4)
    assert len(out[0]["token_ids"]) == 4
    with pytest.raises(Exception, match="keeps a GGUF's Q3_K LM head as stored"):
        LLM(qwen_small, lm_head_quantization="int3-g16-k", **kw)
    override_type(monkeypatch, "attn_v.weight", "Q6_K")
    g6 = tmp_path / "qwen3-Q3_K-v6.gguf"
    assert gguf_ref.model_to_gguf(qwen_small, str(g6), "Q3_K")["blk.0.attn_v.weight"] == "Q6_K"
    assert bench_weight_bytes(g6) - bench_weight_bytes(g) == L * (int6 - int3)


def test_q5_1_head_runs_at_its_own_size(qwen_small, tmp_path):
    """A Q5_1 file's tied token_embd (its LM head) runs as stored at the file's 6 bits per weight
    (int5-g32-zp: the f16 d and m per 32 as they are, 384 bytes per 16 rows x 32 columns; the f32
    form took 448); the name it had until 2026-11-30 (int5-g32-zp-f32, 7 bits) is still taken as
    input and settles to the one that runs."""
    g = tmp_path / "qwen3-Q5_1.gguf"
    types = gguf_ref.model_to_gguf(qwen_small, str(g), "Q5_1")
    assert types["token_embd.weight"] == "Q5_1", types
    info = json.loads(run_cli("gguf-info", g, "--json"))
    assert info["lm_head_auto"] == "int5-g32-zp"
    kw = dict(device="cpu", num_threads=1, num_kvcache_blocks=16, **KW)
    assert LLM(str(g), **kw).config.lm_head_quantization == "int5-g32-zp"
    old = LLM(str(g), lm_head_quantization="int5-g32-zp-f32", **kw)
    assert old.config.lm_head_quantization == "int5-g32-zp"
    assert len(greedy(old, PROMPTS[:1], max_tokens=4)[0]["token_ids"]) == 4
    with pytest.raises(Exception, match="keeps a GGUF's Q5_K / Q5_1 LM head as stored"):
        LLM(qwen_small, lm_head_quantization="int5-g32-zp", **kw)
    # The head's bytes, against the same file with an int8 head (per row: K int8 codes, an f32
    # scale and an i32 row sum; rows padded to 16, K to 4 / 32).
    cfg = json.load(open(os.path.join(qwen_small, "config.json")))
    V, H = cfg["vocab_size"], cfg["hidden_size"]
    Np = -(-V // 16) * 16
    int8_head, int5_head = Np * (-(-H // 4) * 4 + 8), Np * (-(-H // 32) * 32) * 384 // (16 * 32)
    assert bench_weight_bytes(g, "--lm-head-quantization", "int8") - bench_weight_bytes(g) == int8_head - int5_head


def test_moe_experts_keep_their_own_precision(tmp_path, monkeypatch):
    """The same per-tensor rule for a Qwen3-MoE file's stacked experts: a Q4_0 file whose
    ffn_down_exps are Q8_0 runs the down experts as int8-g32 and the rest as int4-g32, closer to the
    exact model than one int4-g32 scheme for all (the only difference between the two runs)."""
    moe = make_model(tmp_path / "moe-small", preset="small", arch="qwen3_moe")
    override_type(monkeypatch, "ffn_down_exps.weight", "Q8_0")
    g = tmp_path / "moe-Q4_0-q8down.gguf"
    types = gguf_ref.model_to_gguf(moe, str(g), "Q4_0")
    assert types["blk.0.ffn_down_exps.weight"] == "Q8_0" and types["blk.0.ffn_up_exps.weight"] == "Q4_0"
    assert_auto_closer(g, PROMPTS[2][:24], "int4-g32", tmp_path)


@pytest.fixture(scope="module")
def q4_pair(qwen_small, tmp_path_factory):
    d = tmp_path_factory.mktemp("q4")
    g = d / "model-Q4_0.gguf"
    gguf_ref.model_to_gguf(qwen_small, str(g), "Q4_0")
    return str(g), dequantized_checkpoint(g, qwen_small, d / "deq")


def greedy(llm, prompts, n=1, max_tokens=16):
    sp = SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=True, n=n)
    return llm.generate(prompts, sp, use_tqdm=False)


def test_engine_features_on_gguf(q4_pair):
    g, deq = q4_pair
    ref = [r["token_ids"] for r in greedy(LLM(deq, quantization="int4-g32", num_kvcache_blocks=64, **KW), PROMPTS)]
    # 7 blocks of 16 for four 56-token sequences: preemption; the second pass hits the prefix cache.
    tight = LLM(g, num_kvcache_blocks=7, **KW)  # quantization auto: Q4_0 -> int4-g32
    assert [r["token_ids"] for r in greedy(tight, PROMPTS)] == ref
    assert [r["token_ids"] for r in greedy(tight, PROMPTS)] == ref
    st = tight.stats()
    assert st.preemptions > 0 and st.prefix_cache_hit_tokens > 0, st
    out = greedy(LLM(g, num_kvcache_blocks=64, **KW), PROMPTS[:1], n=3)[0]
    assert [o["token_ids"] for o in out["outputs"]] == [ref[0]] * 3
    kw = dict(device="cpu", num_threads=1, num_kvcache_blocks=64, **KW)
    one = [r["token_ids"] for r in greedy(LLM(g, **kw), PROMPTS[:2], max_tokens=8)]
    two = [r["token_ids"] for r in greedy(LLM(g, tensor_parallel_size=2, **kw), PROMPTS[:2], max_tokens=8)]
    assert two == one


def test_structured_output_on_gguf(q4_pair):
    g, _ = q4_pair
    llm = LLM(g, num_kvcache_blocks=64, **KW)
    sp = SamplingParams(temperature=0.0, max_tokens=40,
                        structured_outputs=StructuredOutputsParams(choice=["yes", "no", "maybe"]))
    r = llm.generate(["Answer:"], sp, use_tqdm=False)[0]
    assert r["text"] in ("yes", "no", "maybe"), r["text"]


def test_corrupt_files_are_clear_errors(qwen_small, tmp_path):
    g = tmp_path / "good.gguf"
    gguf_ref.model_to_gguf(qwen_small, str(g), "Q4_0")
    raw = g.read_bytes()
    cases = {"truncated.gguf": raw[: len(raw) // 2], "magic.gguf": b"GGML" + raw[4:],
             "version.gguf": raw[:4] + (7).to_bytes(4, "little") + raw[8:], "empty.gguf": b""}
    for name, data in cases.items():
        p = tmp_path / name
        p.write_bytes(data)
        r = subprocess.run([BIN, "generate", "--model", str(p), "--prompt-ids", "1,2,3", "--max-tokens", "2"],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode != 0 and r.returncode < 128, (name, r.returncode, r.stderr[-500:])
        assert str(p) in r.stderr and "GGUF" in r.stderr, (name, r.stderr[-500:])
    two = tmp_path / "two"
    two.mkdir()
    shutil.copy(g, two / "a.gguf")
    shutil.copy(g, two / "b.gguf")
    r = subprocess.run([BIN, "generate", "--model", str(two), "--prompt-ids", "1,2", "--max-tokens", "1"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "several GGUF models" in r.stderr, r.stderr[-500:]


def test_llama_cpp_emulation(llama_model, tmp_path):
    """bench/peer/gguf_emulate.py (gguf_check.py --emulate): with activations that 8-bit rounding
    represents exactly, each vec_dot path (Q8_0, Q8_1 with the weight mins, Q8_K) is the exact
    product; on a GGUF model its exact mode equals nanovllm's logits, and its rounded mode moves
    them (a rounding that changed nothing would make the comparison it serves meaningless)."""
    sys.path.insert(0, os.path.join(SRC, "bench", "peer"))
    import gguf_emulate as E
    rng = np.random.default_rng(5)
    w = rng.standard_normal((3, 256))
    q = rng.integers(-20, 21, size=(2, 256)).astype(np.float64)
    q[:, ::32] = 127  # every block's extreme: d = 127 * 0.5 / 127 = 0.5, exact in fp16
    q[:, 7::32] = -1
    x = q * 0.5
    mins = rng.standard_normal((3, 8))
    wm = w + np.repeat(mins, 32, axis=1)
    assert np.allclose(E.QLinear(w, "Q8_0")(x), x @ w.T, rtol=1e-12, atol=1e-9)
    assert np.allclose(E.QLinear(wm, "Q4_1", mins)(x), x @ wm.T, rtol=1e-12, atol=1e-9)
    xk = x.copy()
    xk[:, ::32] = -63.5  # Q8_K: iscale = -127 / max maps the signed extreme to 127 exactly
    assert np.allclose(E.QLinear(w, "Q4_K")(xk), xk @ w.T, rtol=1e-12, atol=1e-9)
    assert not np.allclose(E.QLinear(w, "Q8_0")(x + 0.01), (x + 0.01) @ w.T, rtol=1e-6)

    g = tmp_path / "llama-Q4_1.gguf"
    gguf_ref.model_to_gguf(llama_model, str(g), "Q4_1")
    ids = PROMPTS[0][:16]
    ours = logits(str(g), ids, tmp_path / "a.npy").astype(np.float64)
    exact = E.exact_logits(str(g), llama_model, ids)
    assert np.abs(ours - exact).max() <= 1e-4 * np.abs(exact).max(), np.abs(ours - exact).max()
    rounded = E.logits(str(g), llama_model, ids)
    assert np.abs(rounded - exact).max() > 1e-4 * np.abs(exact).max()
