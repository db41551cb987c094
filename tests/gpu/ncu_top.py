"""GPU machine: which kernels a decode step spends its time in, read by Nsight Compute (ncu).

Runs `nanovllm bench` (eager, so every kernel is a plain launch) on a decode-heavy slice of the
workload (256 sequences of 512 prompt tokens, 64 output tokens) under
`ncu --clock-control none` (METHOD.md: leave the clocks alone), skipping the first launches
(load, prefill) and profiling a window of decode launches with three metrics (duration, DRAM
bytes read and written: one replay pass). Groups the launches by kernel name: total time, share,
count, mean microseconds, DRAM GB/s. Reported as a figure; the step fails only when ncu cannot run.

    ncu_top.py NANOVLLM_BIN --json-out FILE MODEL_DIR [--ncu PATH] [--skip N] [--count N]
               [--num-seqs 256] [--prompt-len 512] [--output-len 64]

gpu-check runs it twice: at 256 sequences (ncu_top) and at batch 1 (ncu_top_bs1: 64-token
prompt, 128 out), where a step's ~340 small kernels and cuBLASLt's decode-shaped GEMMs are the
suspects for the 3.5 ms step (docs/gpu-step-review.md).
"""
import argparse
import csv
import io
import json
import os
import shutil
import subprocess
import sys

METRICS = ("gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum")
# ncu prints values in the unit it names; --print-units base asks for ns and bytes, and these
# scales cover the prefixed units it may still use.
SCALE = {"ns": 1.0, "nsecond": 1.0, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6,
         "s": 1e9, "second": 1e9, "byte": 1.0, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9,
         "tbyte": 1e12, "": 1.0}


def short_name(name, n=90):
    """The kernel's name without its argument list, at most n characters."""
    depth, cut = 0, len(name)
    for i, c in enumerate(name):
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
        elif c == "(" and depth == 0:
            cut = i
            break
    name = name[:cut].strip()
    return name if len(name) <= n else name[:n - 3] + "..."


def parse_csv(text):
    """ncu --csv rows (one per launch and metric) -> {launch id: {"name", metric: value}}.
    Lines before the CSV header (the profiled program's own output, ncu's ==PROF== notes) are
    skipped."""
    lines = text.splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
    if start is None:
        raise ValueError("no ncu CSV header (\"ID\",...) in the output")
    launches = {}
    for row in csv.DictReader(io.StringIO("\n".join(lines[start:]))):
        metric = row.get("Metric Name")
        if metric not in METRICS:
            continue
        unit = (row.get("Metric Unit") or "").strip().lower()
        if unit not in SCALE:
            raise ValueError(f"unknown unit '{unit}' for {metric}")
        value = float((row.get("Metric Value") or "0").replace(",", "")) * SCALE[unit]
        launch = launches.setdefault(row["ID"], {"name": short_name(row.get("Kernel Name", "?"))})
        launch[metric] = value
    return launches


def summarize(launches, top=15):
    """Per kernel name: launches, total / mean time, share of all profiled time, DRAM GB/s."""
    by = {}
    for l in launches.values():
        k = by.setdefault(l["name"], {"name": l["name"], "count": 0, "ns": 0.0, "bytes": 0.0})
        k["count"] += 1
        k["ns"] += l.get(METRICS[0], 0.0)
        k["bytes"] += l.get(METRICS[1], 0.0) + l.get(METRICS[2], 0.0)
    total = sum(k["ns"] for k in by.values())
    rows = sorted(by.values(), key=lambda k: -k["ns"])
    out = []
    for k in rows[:top]:
        out.append({"name": k["name"], "count": k["count"], "total_us": k["ns"] / 1e3,
                    "mean_us": k["ns"] / 1e3 / k["count"],
                    "share": k["ns"] / total if total else 0.0,
                    "dram_gbs": k["bytes"] / k["ns"] if k["ns"] else 0.0})
    return {"launches": len(launches), "total_us": total / 1e3, "kernels": out}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("nv")
    ap.add_argument("model")
    ap.add_argument("--json-out", required=True)
    ap.add_argument("--ncu", default=shutil.which("ncu") or "/usr/local/cuda/bin/ncu")
    ap.add_argument("--skip", type=int, default=4000, help="launches skipped (load, prefill)")
    ap.add_argument("--count", type=int, default=700, help="launches profiled (~2 decode steps)")
    ap.add_argument("--num-seqs", type=int, default=256)
    ap.add_argument("--prompt-len", type=int, default=512)
    ap.add_argument("--output-len", type=int, default=64)
    a = ap.parse_args()
    if not os.path.exists(a.ncu):
        print(f"ncu not found ({a.ncu}): skipped")
        return 77
    cmd = [a.ncu, "--clock-control", "none", "--print-units", "base", "--csv",
           "--metrics", ",".join(METRICS), "--launch-skip", str(a.skip), "--launch-count", str(a.count),
           a.nv, "bench", "--device", "cuda", "--model", a.model, "--num-seqs", str(a.num_seqs),
           "--min-input-len", str(a.prompt_len), "--max-input-len", str(a.prompt_len),
           "--min-output-len", str(a.output_len), "--max-output-len", str(a.output_len),
           "--enforce-eager", "--json", "--no-progress"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        print(p.stdout[-2000:], p.stderr[-2000:], sep="\n")
        print(f"ncu exited {p.returncode}")
        return 1
    s = summarize(parse_csv(p.stdout))
    s["command"] = (" ".join(cmd[:12]) + f" ... bench ({a.num_seqs} x {a.prompt_len} prompt, "
                    f"{a.output_len} out, eager)")
    with open(a.json_out, "w") as f:
        json.dump(s, f, indent=1)
    for k in s["kernels"]:
        print(f"{k['share']:6.1%} {k['total_us']:10.0f} us {k['count']:5d}x {k['mean_us']:8.1f} us "
              f"{k['dram_gbs']:7.0f} GB/s  {k['name']}")
    top = s["kernels"][0] if s["kernels"] else None
    print(f"{s['launches']} launches, {s['total_us']:.0f} us"
          + (f"; top: {top['name']} {top['share']:.0%}" if top else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
