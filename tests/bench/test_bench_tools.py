"""The benchmark tools' own logic (no engine): bench/peer/serve_load.run_workload's admission
(compare.py's `benchpy` against llama-server) and bench/benchpy_roofline.py's counts.
Debian's python3 + pytest, standard library otherwise."""
import http.server
import json
import os
import sys
import threading
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench", "peer"))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import benchpy_roofline  # noqa: E402
import serve_load  # noqa: E402


class FakeServer:
    """/v1/completions answers max_tokens tokens (or `short` for one request index, found by its
    seed) after a short sleep, recording what was in flight at each arrival."""

    def __init__(self, short=None):
        self.lock = threading.Lock()
        self.inflight, self.tokens = 0, 0
        self.max_inflight = self.max_tokens = 0
        self.order = []
        self.two = threading.Event()  # set once two requests are in flight together
        outer = self

        class H(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                need = len(body["prompt"]) + body["max_tokens"]
                timed = "seed" in body  # the warm-up request has no seed
                with outer.lock:
                    if timed:
                        outer.order.append(body["seed"])
                        outer.inflight += 1
                        outer.tokens += need
                        outer.max_inflight = max(outer.max_inflight, outer.inflight)
                        outer.max_tokens = max(outer.max_tokens, outer.tokens)
                        if outer.inflight >= 2:
                            outer.two.set()
                # The first request waits (bounded) for a second one in flight: an observable
                # state, so "requests run side by side" does not hang on timing; a client that
                # sends one at a time leaves it waiting 5 s and max_inflight at 1.
                if body.get("seed") == 0:
                    outer.two.wait(5)
                time.sleep(0.01 * (1 + body.get("seed", 0) % 3))
                got = body["max_tokens"] - (1 if short is not None and body.get("seed") == short else 0)
                with outer.lock:
                    if timed:
                        outer.inflight -= 1
                        outer.tokens -= need
                data = json.dumps({"usage": {"completion_tokens": got}}).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()


def workload(n=24):
    prompts = [[1] * (10 + 7 * (i % 5)) for i in range(n)]
    max_tokens = [5 + 11 * (i % 4) for i in range(n)]
    return prompts, max_tokens


def test_run_workload_respects_slots_and_budget():
    srv = FakeServer()
    try:
        prompts, max_tokens = workload()
        budget = 150  # the largest request needs 38 + 38 = 76: at most one or two at a time fit
        r = serve_load.run_workload(srv.url, prompts, max_tokens, slots=3, budget_tokens=budget)
    finally:
        srv.close()
    assert r["output_tokens"] == sum(max_tokens)
    assert srv.max_inflight <= 3 and srv.max_tokens <= budget
    assert srv.max_inflight >= 2  # it does run requests side by side
    # Admitted in workload order (arrival order may swap two sent at the same moment).
    assert sorted(srv.order) == list(range(len(prompts)))
    assert all(abs(pos - i) <= 2 for pos, i in enumerate(srv.order))


def test_run_workload_fails_on_a_short_answer():
    srv = FakeServer(short=5)
    try:
        prompts, max_tokens = workload(12)
        with pytest.raises(RuntimeError, match="request 5 returned"):
            serve_load.run_workload(srv.url, prompts, max_tokens, slots=4, budget_tokens=1000)
    finally:
        srv.close()


def test_run_workload_refuses_a_request_larger_than_the_cache():
    with pytest.raises(RuntimeError, match="more than the 50-token KV cache"):
        serve_load.run_workload("http://127.0.0.1:1", [[1] * 40], [20], slots=1, budget_tokens=50)


def test_roofline_counts_a_toy_model_by_hand():
    cfg = {"hidden_size": 4, "intermediate_size": 8, "num_hidden_layers": 2, "num_attention_heads": 2,
           "num_key_value_heads": 1, "head_dim": 2, "vocab_size": 10}
    shape = benchpy_roofline.model_shape(cfg)
    # per layer: q 4x4, k 4x2, v 4x2, o 4x4, gate/up/down 3 x 4x8 = 16+8+8+16+96 = 144
    assert shape["linear_params"] == 288 and shape["head_params"] == 40
    assert benchpy_roofline.kv_bytes_per_token(shape, "bf16") == 2 * 1 * 2 * 2 * 2
    assert benchpy_roofline.kv_bytes_per_token(shape, "int8") == 2 * 1 * 2 * (2 + 4)
    # Two sequences: prompts 3 and 1 tokens, 2 and 1 output tokens.
    prompts, max_tokens = [[0] * 3, [0]], [2, 1]
    w, kv, bw, rate = 100.0, 8.0, 1.0, 1.0  # 1 byte/s and 1 op/s: times are counts
    r = benchpy_roofline.floors(shape, prompts, max_tokens, w, kv, bw, rate, rate, rate)
    # The prefill samples both first tokens; one decode step: the first sequence's token 2
    # over its 3 + 1 tokens.
    assert r["decode_bytes"] == w + 4 * kv
    attn = 4 * 2 * 2 * 2  # per context token: 4 x layers x q_heads x head_dim
    step1 = 2 * (288 + 40) * 1 + attn * 4
    assert r["decode_flops"] == step1
    assert r["decode_floor_s"] == max(w + 4 * kv, step1)
    # Prefill: 4 tokens, causal pairs 3*4/2 + 1 = 7, the head once per sequence.
    assert r["prefill_flops"] == 2 * 288 * 4 + 2 * 40 * 2 + attn * 7
    assert r["floor_s"] == r["decode_floor_s"] + r["prefill_floor_s"]
    assert r["any_schedule_floor_s"] <= r["floor_s"]
    # Twice the prefill tokens (recompute): twice the prefill work.
    r2 = benchpy_roofline.floors(shape, prompts, max_tokens, w, kv, bw, rate, rate, rate, prefill_tokens=8)
    assert r2["prefill_flops"] == 2 * r["prefill_flops"]


def test_roofline_refuses_moe():
    with pytest.raises(SystemExit, match="MoE"):
        benchpy_roofline.model_shape({"num_experts": 8})


CHATTY_SERVER = r'''
import http.server, json, sys
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Length", "0"); self.end_headers()
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        sys.stderr.write("x" * 100000 + "\n"); sys.stderr.flush()  # more than a pipe holds
        data = json.dumps({"usage": {"completion_tokens": body["max_tokens"]}}).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(data))); self.end_headers()
        self.wfile.write(data)
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
'''


def test_a_server_that_logs_a_lot_keeps_serving(tmp_path):
    """compare.py's servers log to a file: with a pipe nobody read, llama-server blocked in
    write() after ~64 KiB of log and the benchpy run hung."""
    sys.path.insert(0, os.path.join(ROOT, "bench", "peer"))
    import compare
    script = tmp_path / "chatty.py"
    script.write_text(CHATTY_SERVER)
    port = compare.free_port()
    with compare.running_server([sys.executable, script, port], port) as url:
        r = serve_load.run_load(url, clients=3, prompt_len=4, max_tokens=5, timeout=20)
    assert r["output_tokens"] == 15
