"""gpu-check's summary: a table (summary.txt) and every measurement (summary.json) from the step
records (steps.tsv: name, status, seconds, last log line) and each step's log / JSON in the log
folder. Standard library only (runs on the GPU machine and in the CPU machine's tests).

    gpu_summary.py --steps steps.tsv --logdir DIR --model BENCH_MODEL_DIR --out OUT_DIR
"""
import argparse
import datetime
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_workload  # noqa: E402


def read_json(path):
    """A step's JSON: the whole file, else its last line (a program's --json line after other
    output), else None."""
    try:
        with open(path) as f:
            text = f.read().strip()
    except OSError:
        return None
    for candidate in (text, text.splitlines()[-1] if text else ""):
        try:
            return json.loads(candidate)
        except ValueError:
            pass
    return None


def test_counts(log_text):
    """'N passed / M failed' from GoogleTest or ctest output, or None."""
    m = re.search(r"(\d+)% tests passed, (\d+) tests? failed out of (\d+)", log_text)
    if m:
        total, failed = int(m.group(3)), int(m.group(2))
        return f"{total - failed}/{total} tests passed"
    # The last totals: run_gpu_suites.py echoes failing units' own totals before its overall ones.
    def last(pattern):
        found = list(re.finditer(pattern, log_text))
        return found[-1] if found else None
    passed = last(r"\[  PASSED  \] (\d+) tests?")
    failed = last(r"\[  FAILED  \] (\d+) tests?, listed below")
    skipped = last(r"\[  SKIPPED \] (\d+) tests?")
    if passed or failed:
        p = int(passed.group(1)) if passed else 0
        f = int(failed.group(1)) if failed else 0
        s = f", {skipped.group(1)} skipped" if skipped else ""
        return f"{p} passed, {f} failed{s}"
    return None


def short(text, n=120):
    """An error message cut to n characters (the full text is in summary.json and the log)."""
    return text if not text or len(text) <= n else text[:n - 3] + "..."


def fmt_logits(r):
    if not r or "error" in r:
        return f"error: {r.get('error') if r else 'missing'}"
    return (f"rel {r['max_rel_err']:.1e} top1 {r['top1_agree']}/{r['rows']}"
            + (f" ties {len(r['ties'])}" if r["ties"] else "")
            + (f" UNEXPLAINED {len(r['unexplained'])}" if r["unexplained"] else ""))


def fmt_greedy(r):
    if not r or "error" in r:
        return f"greedy error: {r.get('error') if r else 'missing'}"
    n = len(r["sequences"])
    bad = sum(1 for s in r["sequences"] if not s["ok"])
    return f"greedy {r['identical']}/{n} same" + (f" {bad} BAD" if bad else "")


def attention_kernels(case):
    """[(kernel, figures)] of one attention_bench case: the "v1" / "v2" objects, or the case
    itself for a JSON written before there were two decode kernels."""
    found = [(k, case[k]) for k in ("v1", "v2") if isinstance(case.get(k), dict)]
    return found or [("v1", case)]


def result_line(name, data, log_text, all_data=None):
    """The RESULT column of one step."""
    if name in ("gpu_tests", "unit_tests", "engine_e2e_cuda", "engine_e2e_cuda_tc"):
        return test_counts(log_text)
    if data is None:
        return None
    if name in ("cpu_vs_cuda", "cpu_vs_cuda_skinny", "new_arch_cuda", "gguf_cuda"):  # gate models decide the step; the others are figures
        return "; ".join(f"{m}{' [gate]' if r.get('gate') else ''}: "
                         + (short(r.get("error")) or f"{fmt_logits(r['logits'])}, {fmt_greedy(r['greedy'])}")
                         for m, r in data["models"].items())
    if name in ("hf_compare", "hf_compare_tc"):
        return "; ".join(f"{m}: " + (short(r.get("error")) or f"cuda {fmt_logits(r['cuda_logits'])}, "
                                     f"cpu {fmt_logits(r['cpu_logits'])}, {fmt_greedy(r['greedy'])}")
                         for m, r in data["models"].items())
    if name == "step_split":
        return data.get("line")
    if name in ("ncu_top", "ncu_top_bs1"):
        return (f"{data['launches']} launches, {data['total_us']:.0f} us: " + ", ".join(
            f"{k['name'][:40]} {k['share']:.0%} ({k['dram_gbs']:.0f} GB/s)" for k in data["kernels"][:4]))
    if name == "eager_vs_graph":
        return (f"{fmt_greedy(data)}, executor {data.get('graph_run', {}).get('executor')}"
                f", pool {data.get('graph_run', {}).get('graph_pool_bytes')} B"
                + ("; " + "; ".join(data["problems"]) if data.get("problems") else ""))
    if name == "attention_bench":
        h = data["headline"]
        kernels = ", ".join(f"{k} {f['attention_gbs']:.0f} GB/s = {f['ratio_vs_read_pass']:.2f}"
                            for k, f in attention_kernels(h))
        line = (f"B{h['B']} L{h['L']} D{h['D']}: {kernels} of the read pass "
                f"({h['read_pass_gbs']:.0f} GB/s; spec {data['spec_hbm_gbs']:.0f})")
        sweep = data.get("batch_sweep")
        if sweep:
            line += "; ratio v1/v2 by batch: " + ", ".join(
                f"B{r['B']} {r['v1_ratio_vs_read_pass']:.2f}/{r['v2_ratio_vs_read_pass']:.2f}"
                for r in sweep)
        return line
    if name == "gemm_bench":
        line = (f"ceiling {data['ceiling_tflops']:.0f} TFLOP/s = "
                f"{data['ceiling_ratio_vs_spec_peak']:.2f} of {data['spec_bf16_tflops']:.0f} "
                f"({data['peak_source']})")
        dec = data.get("decode")
        if dec:  # the skinny kernel vs cuBLASLt at decode batch sizes
            by_m = {}
            for r in dec:
                by_m.setdefault(r["M"], []).append(r["skinny_speedup"])
            line += "; skinny/cuBLASLt speedup by M: " + ", ".join(
                f"M{m} {min(v):.2f}-{max(v):.2f}x" for m, v in sorted(by_m.items()))
        return line
    if name in ("decode_step", "decode_step_skinny", "decode_step_cublas"):
        parts = []
        for r in data["rows"]:
            g, e = r["graph"].get("step_ms"), r["eager"].get("step_ms")
            parts.append(f"bs{r['batch']} " + (f"{g:.2f}/{e:.2f} ms ({e / g:.2f}x)" if g and e else "error"))
        return "graph/eager " + ", ".join(parts)
    if name == "bench":
        return (f"{data['output_tokens_per_s']:.0f} out tok/s ({data['output_tokens']} tok, "
                f"{data['seconds']:.1f} s, {data.get('preemptions', '?')} preemptions)")
    if name == "bench_candidates":
        base = (all_data or {}).get("bench") or {}
        line = (f"{data['output_tokens_per_s']:.0f} out tok/s with tc prefill "
                f"({data['output_tokens']} tok, {data['seconds']:.1f} s)")
        if base.get("output_tokens_per_s"):
            line += f"; {data['output_tokens_per_s'] / base['output_tokens_per_s']:.3f}x the defaults"
        return line
    if name == "hf_bench":
        if "error" in data:
            return f"error: {data['error'][:150]}"
        return (f"{data['output_tokens_per_s']:.0f} out tok/s ({data['engine']}, "
                f"{data['finished']}/{data['num_seqs']} finished{', PARTIAL' if data['partial'] else ''})")
    return None


def headline(data, model_cfg):
    """The figures issue 13 asks for, with their ratios."""
    h = {}
    att, gemm, bench, hf, cand = (data.get(k) for k in ("attention_bench", "gemm_bench", "bench",
                                                         "hf_bench", "bench_candidates"))
    if att:
        h["device"] = att.get("device")
        h["hbm_read_pass_gbs"] = att.get("read_pass_gbs")
        h["spec_hbm_gbs"] = att.get("spec_hbm_gbs")
        for k, f in attention_kernels(att["headline"]):  # v1 keeps the old key names
            tag = "" if k == "v1" else "_" + k
            h[f"decode_attention{tag}_gbs"] = f["attention_gbs"]
            h[f"decode_attention{tag}_ratio_vs_read_pass"] = f["ratio_vs_read_pass"]
    if gemm:
        h["gemm_ceiling_tflops"] = gemm["ceiling_tflops"]
        h["gemm_ceiling_ratio_vs_peak"] = gemm["ceiling_ratio_vs_spec_peak"]
    if bench:
        h["output_tok_s"] = bench["output_tokens_per_s"]
        bw = (att or {}).get("read_pass_gbs") or (att or {}).get("spec_hbm_gbs")
        if bw and model_cfg and bench.get("num_seqs") == 256:
            prompts, max_tokens = bench_workload.make_workload()
            roof = bench_workload.roofline_tokens_per_s(model_cfg, prompts, max_tokens, bw * 1e9)
            h["roofline_tok_s"] = roof
            h["roofline_bandwidth_gbs"] = bw
            h["ratio_vs_roofline"] = bench["output_tokens_per_s"] / roof
    if cand and "output_tokens_per_s" in cand:
        h["candidates_output_tok_s"] = cand["output_tokens_per_s"]
        if bench and bench.get("output_tokens_per_s"):
            h["candidates_vs_defaults"] = cand["output_tokens_per_s"] / bench["output_tokens_per_s"]
    if hf and "output_tokens_per_s" in hf:
        h["transformers_tok_s"] = hf["output_tokens_per_s"]
        h["transformers_partial"] = hf.get("partial")
        if bench:
            h["vs_transformers"] = bench["output_tokens_per_s"] / hf["output_tokens_per_s"]
    return h


EARLIER = "earlier call"  # the note gpu-check.sh records for a step resumed from an earlier call


def earlier_steps(resume_path):
    """{step name: step dict} of an earlier call's summary.json ({} when unreadable)."""
    try:
        with open(resume_path) as f:
            return {s["name"]: s for s in json.load(f).get("steps", [])}
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return {}


def passed_earlier(resume_path, name):
    s = earlier_steps(resume_path).get(name)
    return bool(s) and s.get("status") == "PASS" and s.get("note") != "GPU_CHECK_SKIP"


def build(steps_path, logdir, model_dir, resume_path=None):
    steps, data = [], {}
    earlier = earlier_steps(resume_path) if resume_path else {}
    with open(steps_path) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 4:
                continue
            name, status, secs, note = parts[:4]
            if note == EARLIER and name in earlier:  # carried over: data, result and time
                prev = earlier[name]
                data[name] = prev.get("data")
                steps.append({"name": name, "status": status, "seconds": 0, "note": note,
                              "result": f"(earlier call, {prev.get('seconds', '?')} s) {prev.get('result')}",
                              "data": prev.get("data")})
                continue
            d = read_json(os.path.join(logdir, name + ".json"))
            try:
                with open(os.path.join(logdir, name + ".log"), errors="replace") as lf:
                    log_text = lf.read()
            except OSError:
                log_text = ""
            try:
                result = result_line(name, d, log_text, data)  # earlier steps: bench
            except (KeyError, TypeError, ValueError, ZeroDivisionError) as e:
                result = f"(unreadable result: {type(e).__name__} {e})"
            data[name] = d
            steps.append({"name": name, "status": status, "seconds": int(secs), "note": note,
                          "result": result or note, "data": d})
    cfg = None
    try:
        with open(os.path.join(model_dir, "config.json")) as f:
            cfg = json.load(f)
    except (OSError, ValueError):
        pass
    try:
        head = headline(data, cfg)
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as e:
        head = {"error": f"{type(e).__name__}: {e}"}
    return {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "ok": all(s["status"] in ("PASS", "SKIP") for s in steps),
            "total_seconds": sum(s["seconds"] for s in steps), "headline": head, "steps": steps}


def table(summary):
    lines = [f"gpu-check {summary['date']}  {'OK' if summary['ok'] else 'FAILURES'}  "
             f"({summary['total_seconds']} s of steps)", f"{'STEP':<16} {'STATUS':<10} {'TIME':>5}  RESULT"]
    for s in summary["steps"]:
        lines.append(f"{s['name']:<16} {s['status']:<10} {s['seconds']:>4}s  {s['result']}")
    h = summary["headline"]
    if h:
        lines.append("headline: " + ", ".join(
            f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in h.items()))
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps")
    ap.add_argument("--logdir")
    ap.add_argument("--model", default="")
    ap.add_argument("--out")
    ap.add_argument("--resume", help="an earlier call's summary.json: results of resumed steps")
    ap.add_argument("--passed-in", help="with --step: exit 0 iff that step PASSED in this summary.json")
    ap.add_argument("--step")
    a = ap.parse_args(argv)
    if a.passed_in:
        return 0 if passed_earlier(a.passed_in, a.step) else 1
    if not (a.steps and a.logdir and a.out):
        ap.error("--steps, --logdir and --out are required")
    s = build(a.steps, a.logdir, a.model, a.resume)
    with open(os.path.join(a.out, "summary.json"), "w") as f:
        json.dump(s, f, indent=1)
    text = table(s)
    with open(os.path.join(a.out, "summary.txt"), "w") as f:
        f.write(text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
