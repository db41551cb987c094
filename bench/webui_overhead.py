"""Does an open dashboard slow the engine? Step time of `nanovllm serve` under a fixed load, with
no stats client, with one dashboard-like client (GET /v1/stats/stream, one event a second), and
with a heavy one (10 clients at 10 events a second). The engine's own step durations come from
its Chrome trace (--trace: every step is an "X" event of category "step"); the medians of decode
steps are compared. Runs alternate so that drift on a shared machine hits each condition alike.

  python3 bench/webui_overhead.py --bin build/nanovllm [--preset small] [--rounds 3]
"""
import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))
import server_util as U  # noqa: E402

CONDITIONS = {"none": (0, 0), "dashboard": (1, 1000), "10 clients at 100 ms": (10, 100)}


def stats_client(port, interval_ms, stop, counts):
    conn = http.client.HTTPConnection(U.HOST, port, timeout=30)
    conn.request("GET", f"/v1/stats/stream?interval_ms={interval_ms}")
    r = conn.getresponse()
    while not stop.is_set():
        line = r.readline()
        if not line:
            break
        if line.startswith(b"data: "):
            counts.append(1)
    conn.close()


def load(srv, clients, requests_each, max_tokens):
    def one(i):
        for k in range(requests_each):
            st, _, body = srv.post_json("/v1/completions", {"prompt": f"Request {i} {k}: once upon a time",
                                                            "max_tokens": max_tokens, "ignore_eos": True,
                                                            "temperature": 1.0, "seed": 1000 * i + k}, timeout=600)
            assert st == 200, body
    ts = [threading.Thread(target=one, args=(i,)) for i in range(clients)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def run(args, model, tmp, cond):
    n_clients, interval = CONDITIONS[cond]
    trace = os.path.join(tmp, "trace.json")
    with U.Server(["--model", model, "--threads", str(args.threads), "--trace", trace],
                  os.path.join(tmp, "serve.log")) as srv:
        srv.post_json("/v1/completions", {"prompt": "warm up", "max_tokens": 8})
        stop, counts = threading.Event(), []
        watchers = [threading.Thread(target=stats_client, args=(srv.port, interval, stop, counts), daemon=True)
                    for _ in range(n_clients)]
        for w in watchers:
            w.start()
        t0 = time.time()
        load(srv, args.clients, args.requests, args.max_tokens)
        wall = time.time() - t0
        stop.set()
        srv.terminate(timeout=60)
    events = json.load(open(trace))
    events = events["traceEvents"] if isinstance(events, dict) else events
    decode = [e["dur"] for e in events if e.get("cat") == "step" and e.get("ph") == "X" and e.get("name") == "decode"]
    return statistics.median(decode), len(decode), wall, len(counts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--preset", default="small")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--requests", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    os.environ["NANOVLLM_BIN"] = os.path.abspath(args.bin)
    tmp = tempfile.mkdtemp(prefix="webui_overhead_")
    model = os.path.join(tmp, "model")
    subprocess.run([args.bin, "make-model", "--arch", "qwen3", "--preset", args.preset, "--dtype", "f32",
                    "--out", model], check=True, capture_output=True)
    results = {c: [] for c in CONDITIONS}
    for r in range(args.rounds):
        for cond in CONDITIONS:
            med, n, wall, events = run(args, model, tmp, cond)
            results[cond].append(med)
            print(f"round {r + 1} {cond:>22}: decode step median {med / 1000:.3f} ms over {n} steps, "
                  f"load {wall:.1f} s, {events} stats events", flush=True)
    print("\ncondition: median of the rounds' decode-step medians (ms)")
    for cond, meds in results.items():
        print(f"  {cond:>22}: {statistics.median(meds) / 1000:.3f}  (rounds: {', '.join(f'{m / 1000:.3f}' for m in meds)})")


if __name__ == "__main__":
    main()
