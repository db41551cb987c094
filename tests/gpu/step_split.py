"""GPU machine: where a decode step's wall time goes (host or device), from the engine's trace.

`nanovllm bench --trace` at batch 1 and 256 (64 prompt, 128 output tokens each; CUDA graphs),
then `nanovllm trace-view --json`: the inter-token latency and the step's split into schedule,
prepare, forward, sample and postprocess (a traced CUDA step synchronizes after the forward, so
"forward" holds the device time of the model and the rest is host work or the sampler). The
first GPU run measured 3.5 ms per decode step at batch 1 (docs/perf.md), ~13x the weights' read
time: this says which part to fix. Reported as a figure.

    step_split.py NANOVLLM_BIN --json-out FILE MODEL_DIR
"""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nv_cli  # noqa: E402

BATCHES = (1, 256)


def split_line(bs, s):
    parts = ", ".join(f"{k} {v:.0%}" for k, v in sorted(s.get("step_time_split", {}).items(),
                                                         key=lambda kv: -kv[1]))
    itl = s.get("itl_ms", {}).get("p50")
    return f"bs{bs}: itl p50 {itl:.2f} ms ({parts})" if itl is not None else f"bs{bs}: no decode steps"


def main():
    a = nv_cli.parse_args(many_models=False)
    out, lines, ok = {}, [], True
    with tempfile.TemporaryDirectory() as d:
        for bs in BATCHES:
            trace = os.path.join(d, f"bs{bs}.json")
            try:
                device = os.environ.get("STEP_SPLIT_DEVICE", "cuda")  # cpu: the self-test
                nv_cli.run(a.nv, ["bench", "--device", device, "--model", a.model, "--num-seqs", bs,
                                  "--min-input-len", 64, "--max-input-len", 64, "--min-output-len", 128,
                                  "--max-output-len", 128, "--no-progress", "--trace", trace])
                s = json.loads(nv_cli.run(a.nv, ["trace-view", trace, "--json"]))
                out[f"bs{bs}"] = {k: s.get(k) for k in ("itl_ms", "step_time_split", "decode_steps",
                                                        "output_tokens_per_s", "tracer_overhead_pct")}
                lines.append(split_line(bs, s))
            except Exception as e:  # noqa: BLE001 (report the other batch)
                out[f"bs{bs}"] = {"error": str(e)[-500:]}
                lines.append(f"bs{bs}: error")
                ok = False
    out["line"] = "; ".join(lines)
    with open(a.json_out, "w") as f:
        json.dump(out, f, indent=1)
    print(out["line"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
