#!/usr/bin/python3
"""Concurrent-client load on an OpenAI-compatible server (issue 16's "server, 32 concurrent" row).

    /usr/bin/python3 bench/peer/serve_load.py --url http://127.0.0.1:8000 [--clients 32]
                                              [--prompt-len 128] [--max-tokens 128] [--seed 0]

Each of --clients threads sends one POST /v1/completions at the same moment: a prompt of
--prompt-len random token ids (distinct per client, so no prefix is shared), --max-tokens new
tokens, greedy, "ignore_eos": true (so every request produces exactly --max-tokens; both
nanovllm and llama-server accept it). It prints one JSON line:
  output_tokens_per_s = sum(usage.completion_tokens) / (last response - first send)
plus the wall time and the mean/max request latency. A request that fails, or returns fewer
tokens than asked, ends the run with an error: a short answer would flatter the number.
run_workload() sends nano-vLLM's bench.py workload instead (compare.py's `benchpy`).
Standard library only; compare.py starts the servers and calls run_load() / run_workload()."""
import argparse
import http.client
import json
import random
import statistics
import sys
import threading
import time
import urllib.parse


def _post(url, body, timeout):
    u = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    try:
        conn.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
        resp = conn.getresponse()
        data = resp.read()
        if resp.status != 200:
            raise RuntimeError(f"HTTP {resp.status}: {data[:300]!r}")
        return json.loads(data)
    finally:
        conn.close()


def wait_healthy(url, proc, timeout=600):
    """Polls GET /health until 200; fails early if the server process has exited."""
    u = urllib.parse.urlsplit(url)
    t0 = time.time()
    while time.time() - t0 < timeout:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode} before it was healthy")
        try:
            conn = http.client.HTTPConnection(u.hostname, u.port, timeout=5)
            conn.request("GET", "/health")
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"{url} not healthy after {timeout} s")


def run_load(url, clients=32, prompt_len=128, max_tokens=128, seed=0, max_token_id=10000,
             timeout=1800, model="bench"):
    rng = random.Random(seed)
    prompts = [[rng.randrange(100, max_token_id) for _ in range(prompt_len)] for _ in range(clients)]
    # Warm-up (not timed): one short request, so lazy first-use costs are not in the number.
    _post(url, {"model": model, "prompt": prompts[0][:8], "max_tokens": 2, "temperature": 0}, timeout)
    results = [None] * clients
    start = threading.Barrier(clients + 1)

    def client(i):
        start.wait()
        t = time.time()
        try:
            r = _post(url, {"model": model, "prompt": prompts[i], "max_tokens": max_tokens,
                            "temperature": 0, "ignore_eos": True}, timeout)
            results[i] = (time.time() - t, r["usage"]["completion_tokens"], None)
        except Exception as e:  # reported below, after every thread has finished
            results[i] = (time.time() - t, 0, repr(e))

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for th in threads:
        th.start()
    start.wait()
    t0 = time.time()
    for th in threads:
        th.join()
    wall = time.time() - t0
    errors = [r[2] for r in results if r[2]]
    if errors:
        raise RuntimeError(f"{len(errors)}/{clients} requests failed, first: {errors[0]}")
    short = [r[1] for r in results if r[1] != max_tokens]
    if short:
        raise RuntimeError(f"{len(short)} requests returned {short[:4]} tokens, not {max_tokens}")
    total = sum(r[1] for r in results)
    lat = [r[0] for r in results]
    return {"clients": clients, "prompt_len": prompt_len, "max_tokens": max_tokens,
            "output_tokens": total, "wall_s": wall, "output_tokens_per_s": total / wall,
            "latency_mean_s": statistics.mean(lat), "latency_max_s": max(lat)}


def run_workload(url, prompts, max_tokens, slots, budget_tokens, temperature=0.6, timeout=4 * 3600,
                 model="bench", progress=None, sampling=None):
    """nano-vLLM's bench.py workload sent to a server (compare.py's `benchpy`): the requests
    in workload order, each its prompt ids, its max_tokens, `temperature`, ignore_eos. A server
    without preemption (llama-server) fails a request whose KV cache runs out, so requests are
    admitted in order while (a) fewer than `slots` are in flight and (b) the in-flight requests'
    prompt + max_tokens, this one's included, fit in `budget_tokens` (the cache's size): the
    most a scheduler that reserves each sequence's whole length may run at once. `sampling`
    adds request fields (llama-server: its default top-k / top-p / min-p off, as bench.py
    samples with the temperature alone). Returns the output tok/s over the wall time from the
    first send to the last answer."""
    n = len(prompts)
    need = [len(p) + m for p, m in zip(prompts, max_tokens)]
    if max(need) > budget_tokens:
        raise RuntimeError(f"a request needs {max(need)} tokens, more than the {budget_tokens}-token KV cache")
    _post(url, {"model": model, "prompt": prompts[0][:8], "max_tokens": 2, "temperature": 0}, timeout)
    cond = threading.Condition()
    state = {"next": 0, "inflight": 0, "tokens": 0, "done": 0, "error": None}
    results = [0] * n

    def worker():
        while True:
            with cond:
                while state["error"] is None and state["next"] < n and (
                        state["inflight"] >= slots or state["tokens"] + need[state["next"]] > budget_tokens):
                    cond.wait()
                if state["error"] is not None or state["next"] >= n:
                    return
                i = state["next"]
                state["next"] += 1
                state["inflight"] += 1
                state["tokens"] += need[i]
            try:
                r = _post(url, {"model": model, "prompt": prompts[i], "max_tokens": max_tokens[i],
                                "temperature": temperature, "ignore_eos": True, "seed": i,
                                **(sampling or {})}, timeout)
                got = r["usage"]["completion_tokens"]
                err = None if got == max_tokens[i] else f"request {i} returned {got} tokens, not {max_tokens[i]}"
            except Exception as e:  # noqa: BLE001  (reported once, the run stops)
                got, err = 0, f"request {i}: {e!r}"
            with cond:
                results[i] = got
                state["inflight"] -= 1
                state["tokens"] -= need[i]
                state["done"] += 1
                if err and state["error"] is None:
                    state["error"] = err
                cond.notify_all()  # before the callback: a callback that raises cannot strand a waiter
                done = state["done"]
            if progress:
                progress(done, n)

    threads = [threading.Thread(target=worker) for _ in range(min(slots, n))]
    t0 = time.time()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    wall = time.time() - t0
    if state["error"]:
        raise RuntimeError(state["error"])
    total = sum(results)
    return {"requests": n, "slots": slots, "budget_tokens": budget_tokens, "output_tokens": total,
            "wall_s": wall, "output_tokens_per_s": total / wall}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", required=True)
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--model", default="bench", help="the request's model name (the served one)")
    a = ap.parse_args()
    try:
        wait_healthy(a.url, None, timeout=60)
        print(json.dumps(run_load(a.url, a.clients, a.prompt_len, a.max_tokens, a.seed, model=a.model)))
    except RuntimeError as e:
        raise SystemExit(f"serve_load: {e}")


if __name__ == "__main__":
    sys.exit(main())
