"""GPU machine: a decode step's wall time with CUDA graphs and with --enforce-eager.

`nanovllm bench` with every sequence the same length (64 prompt, 128 output tokens) at batch
sizes 1, 16 and 128: all sequences prefill in one step and then decode together, so a decode
step takes batch / decode_tokens_per_s seconds. Reported per batch size and mode, with the
speed-up of graphs and the executor / graph_pool_bytes fields of the engine's JSON.

    decode_step.py NANOVLLM_BIN --json-out FILE MODEL_DIR
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nv_cli  # noqa: E402

BATCHES = (1, 16, 128)


def step_ms(nv, model, bs, eager):
    args = ["bench", "--device", "cuda", "--model", model, "--num-seqs", bs,
            "--min-input-len", 64, "--max-input-len", 64, "--min-output-len", 128,
            "--max-output-len", 128, "--json", "--no-progress"]
    j = json.loads(nv_cli.run(nv, args + (["--enforce-eager"] if eager else [])).strip().splitlines()[-1])
    r = {"decode_tokens_per_s": j["decode_tokens_per_s"],
         "step_ms": 1e3 * bs / j["decode_tokens_per_s"] if j["decode_tokens_per_s"] > 0 else None}
    r.update(nv_cli.find_keys(j, ("executor", "graph_pool_bytes")))
    return r


def main():
    a = nv_cli.parse_args(many_models=False)
    rows, ok = [], True
    for bs in BATCHES:
        row = {"batch": bs}
        for mode in ("graph", "eager"):
            try:
                row[mode] = step_ms(a.nv, a.model, bs, mode == "eager")
            except Exception as e:  # noqa: BLE001 (report the other rows)
                row[mode] = {"error": str(e)[-500:]}
                ok = False
        g, e = row["graph"].get("step_ms"), row["eager"].get("step_ms")
        row["graph_speedup"] = e / g if g and e else None
        rows.append(row)
        print(f"batch {bs:4d}: graph {g if g is None else round(g, 3)} ms, eager "
              f"{e if e is None else round(e, 3)} ms, speed-up {row['graph_speedup']}, "
              f"executor {row['graph'].get('executor')}, graph pool {row['graph'].get('graph_pool_bytes')}")
    nv_cli.write_json(a.json_out, {"ok": ok, "rows": rows})
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
