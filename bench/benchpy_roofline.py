#!/usr/bin/python3
"""The roofline of nano-vLLM's whole bench.py workload on this CPU (issue 32 item 3): bytes and
flops of every step, the machine's measured ceilings, and a `nanovllm bench --json` result
against them.

    /usr/bin/python3 bench/benchpy_roofline.py --model DIR [--quantization int8|int4|none]
        [--lm-head-quantization auto|none|int8|int4] [--kv-cache-dtype bf16|f32|int8]
        [--num-seqs 256 --min-input-len 100 ...] [--hw HW.json] [--result BENCH.json] [--json]

Counts (dense Qwen3 / Qwen2 / Llama configs):
  * weight bytes per step: `bench_decode_roofline --bytes-only` (the engine's own layouts:
    int8 row scales and sums, int4 group scales, the quantized LM head);
  * KV bytes per context token: layers x KV heads x (K and V) x head_dim x element size (int8:
    each (token, head) row carries its f32 scale, kernels/kv_cache_int8.h);
  * decode, with every sequence resident (the fewest weight reads any schedule can have): step t
    (t >= 1; the prefill samples each first token) reads the weights once and the K/V of every
    running sequence's prompt + t tokens (tests/gpu/bench_workload.py); flops 2 x (linear + LM head parameters) per token plus
    attention 4 x layers x q_heads x head_dim per context token;
  * prefill: the prompts once (no recompute), 2 x linear parameters per token, the LM head for
    each sequence's last token, causal attention 4 x layers x q_heads x head_dim x p(p+1)/2.
Ceilings (`bench_hw_limits --json`, run here unless --hw gives its output): read bandwidth, the
f32 FMA rate (attention, norms; bf16 linears widened to f32 unless the CPU's bf16 dot is
faster) and the int8 dot rate (W8A8 / W4A8 linears and the quantized LM head).
Floors: every step takes at least max(its bytes / bandwidth, its flops / rate) (a decode step
and a prefill step run apart, as in nano-vLLM); the floor of the workload is their sum. Also
printed: the looser bound of any schedule, max(all bytes / bandwidth, all flops / rate).
With --result the measured run is set against the floor (the ratio), and its own prefill
token count (recompute after preemption included) gives a second floor."""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "gpu"))
import bench_workload  # noqa: E402  (the workload's draws, shared with the GPU check)


def model_shape(cfg):
    if cfg.get("num_experts") or cfg.get("num_local_experts"):
        raise SystemExit("benchpy_roofline: MoE configs are not counted (dense models only)")
    h, inter, n = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    d = cfg.get("head_dim") or h // cfg["num_attention_heads"]
    hq, hkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    linear = n * (h * (hq + 2 * hkv) * d + hq * d * h + 3 * h * inter)
    return {"layers": n, "hidden": h, "head_dim": d, "q_heads": hq, "kv_heads": hkv,
            "linear_params": linear, "head_params": cfg["vocab_size"] * h}


def kv_bytes_per_token(shape, kv_dtype):
    row = {"bf16": 2 * shape["head_dim"], "f32": 4 * shape["head_dim"],
           "int8": shape["head_dim"] + 4}[kv_dtype]
    return shape["layers"] * shape["kv_heads"] * 2 * row


def weight_bytes(build, model, quant, head_quant):
    exe = os.path.join(build, "bench", "bench_decode_roofline")
    cmd = [exe, "--model", model, "--bytes-only"]
    if quant != "none":
        cmd += ["--quantization", quant]
    if head_quant:
        cmd += ["--lm-head-quantization", head_quant]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"`{' '.join(cmd)}` failed: {p.stderr.strip()[-500:]}")
    return float(json.loads(p.stdout.strip().splitlines()[-1])["weight_bytes_per_token"])


def ceilings(hw):
    bw = hw["read_bandwidth_gb_s"] * 1e9
    f32 = hw.get("f32_fma_peak_gflops", 0) * 1e9
    i8 = hw.get("int8_dot_peak_gops", 0) * 1e9
    if not (bw > 0 and f32 > 0 and i8 > 0):
        raise SystemExit("benchpy_roofline: the hw_limits JSON lacks read_bandwidth_gb_s, "
                         "f32_fma_peak_gflops or int8_dot_peak_gops (rebuild bench_hw_limits)")
    # bf16 linears: oneDNN's bf16 dot where it beats widening to f32 (bf16_dot_probe.h).
    bf16 = f32 * max(1.0, hw.get("bf16_dot_speedup", 0) or 0)
    return bw, f32, i8, bf16


def floors(shape, prompts, max_tokens, w, kv, bw, f32, lin_rate, head_rate, prefill_tokens=None,
           max_batched_tokens=16384):
    L, hq, d = shape["layers"], shape["q_heads"], shape["head_dim"]
    attn_per_ctx = 4 * L * hq * d  # QK^T and PV of one query against one context token
    lin, head = shape["linear_params"], shape["head_params"]
    # Decode steps.
    dec_time = dec_bytes = dec_lin = dec_attn = 0.0
    dec_tokens = 0
    for running, ctx in bench_workload.decode_steps(prompts, max_tokens):
        b = w + ctx * kv
        lf = 2.0 * (lin * running) / lin_rate + 2.0 * head * running / head_rate
        af = attn_per_ctx * ctx / f32
        dec_time += max(b / bw, lf + af)
        dec_bytes += b
        dec_lin += 2.0 * (lin + head) * running
        dec_attn += attn_per_ctx * ctx
        dec_tokens += running
    # Prefill: the prompts (or a measured token count, recompute included, scaled from them).
    p_tokens = sum(len(p) for p in prompts)
    causal = sum(len(p) * (len(p) + 1) / 2 for p in prompts)
    scale = 1.0 if prefill_tokens is None else prefill_tokens / p_tokens
    pf_lin = 2.0 * lin * p_tokens * scale + 2.0 * head * len(prompts) * scale
    pf_attn = attn_per_ctx * causal * scale
    pf_steps = max(1.0, p_tokens * scale / max_batched_tokens)
    pf_bytes = pf_steps * w + p_tokens * scale * kv  # weights per step, the K/V written once
    pf_compute = (2.0 * lin * p_tokens * scale) / lin_rate + (2.0 * head * len(prompts) * scale) / head_rate \
        + pf_attn / f32
    pf_time = max(pf_bytes / bw, pf_compute)
    all_compute = (dec_lin - 2.0 * head * dec_tokens) / lin_rate + 2.0 * head * dec_tokens / head_rate \
        + dec_attn / f32 + pf_compute
    any_schedule = max((dec_bytes + pf_bytes) / bw, all_compute)
    return {"decode_bytes": dec_bytes, "decode_flops": dec_lin + dec_attn, "decode_attention_flops": dec_attn,
            "decode_floor_s": dec_time, "prefill_tokens": p_tokens * scale, "prefill_bytes": pf_bytes,
            "prefill_flops": pf_lin + pf_attn, "prefill_floor_s": pf_time,
            "floor_s": dec_time + pf_time, "any_schedule_floor_s": any_schedule}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="Hugging Face model folder (config.json)")
    ap.add_argument("--quantization", default="none", choices=["none", "int8", "int4"])
    ap.add_argument("--lm-head-quantization", default="", help="as nanovllm's flag (default: auto)")
    ap.add_argument("--kv-cache-dtype", default="bf16", choices=["bf16", "f32", "int8"])
    ap.add_argument("--num-seqs", type=int, default=256)
    ap.add_argument("--min-input-len", type=int, default=100)
    ap.add_argument("--max-input-len", type=int, default=1024)
    ap.add_argument("--min-output-len", type=int, default=100)
    ap.add_argument("--max-output-len", type=int, default=1024)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--hw", help="bench_hw_limits --json output (else it is run now)")
    ap.add_argument("--result", help="a `nanovllm bench --json` output (its last JSON line) to rate")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    a = ap.parse_args()

    with open(os.path.join(a.model, "config.json")) as f:
        shape = model_shape(json.load(f))
    if a.hw:
        with open(a.hw) as f:
            hw = json.load(f)
    else:
        exe = os.path.join(a.build, "bench", "bench_hw_limits")
        hw = json.loads(subprocess.run([exe, "--json"], capture_output=True, text=True,
                                       check=True).stdout.strip().splitlines()[-1])
    bw, f32, i8, bf16 = ceilings(hw)
    quantized = a.quantization != "none"
    lin_rate = i8 if quantized else bf16
    head_q = a.lm_head_quantization or "auto"
    head_rate = i8 if (head_q in ("int8", "int4") or (head_q == "auto" and quantized)) else bf16
    w = weight_bytes(a.build, a.model, a.quantization, a.lm_head_quantization)
    kv = kv_bytes_per_token(shape, a.kv_cache_dtype)
    prompts, max_tokens = bench_workload.make_workload(a.num_seqs, a.min_input_len, a.max_input_len,
                                                       a.min_output_len, a.max_output_len, seed=a.seed)
    out_tokens = sum(max_tokens)
    r = floors(shape, prompts, max_tokens, w, kv, bw, f32, lin_rate, head_rate)
    rep = {"model": a.model, "quantization": a.quantization, "lm_head_quantization": head_q,
           "kv_cache_dtype": a.kv_cache_dtype, "num_seqs": a.num_seqs,
           "prompt_tokens": sum(len(p) for p in prompts), "output_tokens": out_tokens,
           "weight_bytes_per_step": w, "kv_bytes_per_token": kv,
           "read_bandwidth_gb_s": bw / 1e9, "f32_fma_peak_gflops": f32 / 1e9,
           "int8_dot_peak_gops": i8 / 1e9, "bf16_linear_gflops": bf16 / 1e9,
           "cpu_isa": hw.get("cpu_isa"), "threads": hw.get("threads"), **r,
           "floor_output_tokens_per_s": out_tokens / r["floor_s"],
           "any_schedule_output_tokens_per_s": out_tokens / r["any_schedule_floor_s"]}
    if a.result:
        with open(a.result) as f:
            res = json.loads([ln for ln in f.read().splitlines() if ln.startswith("{")][-1])
        if res.get("expected_output_tokens") != out_tokens or res.get("prompt_tokens") != rep["prompt_tokens"]:
            raise SystemExit("benchpy_roofline: --result ran another workload (prompt/output token "
                             f"counts {res.get('prompt_tokens')}/{res.get('expected_output_tokens')}, "
                             f"expected {rep['prompt_tokens']}/{out_tokens}): pass the same workload flags")
        measured = res["output_tokens_per_s"]
        with_recompute = floors(shape, prompts, max_tokens, w, kv, bw, f32, lin_rate, head_rate,
                                prefill_tokens=res["prefill_tokens"])
        rep.update({"measured_output_tokens_per_s": measured, "measured_seconds": res["seconds"],
                    "measured_prefill_tokens": res["prefill_tokens"],
                    "measured_preemptions": res.get("preemptions"),
                    "ratio_to_floor": measured / rep["floor_output_tokens_per_s"],
                    "floor_with_run_prefill_s": with_recompute["floor_s"],
                    "ratio_to_floor_with_run_prefill": measured * with_recompute["floor_s"] / out_tokens})
    if a.json:
        print(json.dumps(rep))
        return
    print(f"workload: {a.num_seqs} sequences, {rep['prompt_tokens']:,} prompt / {out_tokens:,} output tokens; "
          f"weights {a.quantization} (head {head_q}), KV {a.kv_cache_dtype}")
    print(f"machine: {rep['cpu_isa']}, {rep['threads']} threads: read {bw / 1e9:.1f} GB/s, f32 FMA "
          f"{f32 / 1e9:.0f} GFLOP/s, int8 dot {i8 / 1e9:.0f} GOP/s ({hw.get('int8_dot_isa')})")
    print(f"per step: weights {w / 1e6:.0f} MB; per context token: KV {kv / 1024:.1f} KiB")
    print(f"decode : {r['decode_bytes'] / 1e12:.2f} TB read, {r['decode_flops'] / 1e12:.1f} TFLOP "
          f"(attention {r['decode_attention_flops'] / 1e12:.1f}) -> floor {r['decode_floor_s']:.0f} s")
    print(f"prefill: {r['prefill_tokens']:,.0f} tokens, {r['prefill_flops'] / 1e12:.1f} TFLOP -> floor "
          f"{r['prefill_floor_s']:.0f} s")
    print(f"floor  : {r['floor_s']:.0f} s = {rep['floor_output_tokens_per_s']:.0f} output tok/s "
          f"(any schedule: {rep['any_schedule_output_tokens_per_s']:.0f})")
    if a.result:
        print(f"run    : {rep['measured_output_tokens_per_s']:.1f} output tok/s in {rep['measured_seconds']:.0f} s "
              f"= {100 * rep['ratio_to_floor']:.0f}% of the floor; with the run's "
              f"{rep['measured_prefill_tokens']:,} prefill tokens (recompute after "
              f"{rep['measured_preemptions']} preemptions) the floor is {rep['floor_with_run_prefill_s']:.0f} s: "
              f"{100 * rep['ratio_to_floor_with_run_prefill']:.0f}%")


if __name__ == "__main__":
    main()
