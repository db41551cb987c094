"""The Responses and Anthropic Messages streams when things go wrong (issue 31, bad input):
an engine that fails mid-stream ends each stream with that API's error event (Anthropic
`event: error` with an api_error, Responses `error` then `response.failed`) and no normal ending;
later requests get 503 in the API's shape; a client that leaves mid-stream has its request
aborted (no request running, no KV block held). Uses the hidden serve test hooks
--test-engine-fault-after-steps / --test-engine-step-delay-ms on a random tiny Qwen3."""
import http.client
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server_util as su  # noqa: E402


def check(cond, msg):
    if not cond:
        raise AssertionError(msg)


def named_events(port, path, body, stop_after=None):
    """(status, [(event name, data)]) of an SSE stream with named events; closes after
    `stop_after` events when given (a client leaving)."""
    conn = http.client.HTTPConnection(su.HOST, port, timeout=120)
    try:
        conn.request("POST", path, body=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        if r.status != 200:
            return r.status, [("http", json.loads(r.read()))]
        out, name = [], None
        while True:
            line = r.readline()
            if not line:
                return r.status, out
            line = line.rstrip(b"\r\n")
            if line.startswith(b"event: "):
                name = line[7:].decode()
            elif line.startswith(b"data: "):
                out.append((name, json.loads(line[6:])))
                if stop_after is not None and len(out) >= stop_after:
                    return r.status, out
    finally:
        conn.close()


def main():
    setup = su.setup_tiny_model("api_faults_")
    if isinstance(setup, str):
        print("SKIP: " + setup)
        return su.SKIP
    tmp, model = setup
    try:
        # Anthropic: the engine fails after 6 steps, inside a 60-token stream.
        with su.Server(["--model", model, "--test-engine-fault-after-steps", 6], os.path.join(tmp, "a.log")) as srv:
            st, ev = named_events(srv.port, "/v1/messages", {"max_tokens": 60, "stream": True, "ignore_eos": True,
                                                              "messages": [{"role": "user", "content": "x"}]})
            names = [n for n, _ in ev]
            check(st == 200 and names[0] == "message_start", names)
            check(names[-1] == "error" and ev[-1][1]["error"]["type"] == "api_error", ev[-1])
            check("message_stop" not in names, names)
            st, ev = named_events(srv.port, "/v1/messages", {"max_tokens": 4, "messages": [{"role": "user", "content": "x"}]})
            check(st == 503 and ev[0][1]["type"] == "error" and ev[0][1]["error"]["type"] == "overloaded_error", ev)
        # Responses: the same failure ends with an error event and response.failed.
        with su.Server(["--model", model, "--test-engine-fault-after-steps", 6], os.path.join(tmp, "r.log")) as srv:
            st, ev = named_events(srv.port, "/v1/responses", {"input": "x", "max_output_tokens": 60, "stream": True,
                                                               "ignore_eos": True})
            names = [n for n, _ in ev]
            check(st == 200 and names[:2] == ["response.created", "response.in_progress"], names)
            check(names[-2:] == ["error", "response.failed"], names)
            check(ev[-1][1]["response"]["status"] == "failed", ev[-1])
            check([d["sequence_number"] for _, d in ev] == list(range(len(ev))), "sequence numbers")
            st, _, body = srv.post_json("/v1/responses", {"input": "x"})
            check(st == 503 and "error" in body, body)
        # A client leaving a stream: its request is aborted and its KV blocks freed.
        with su.Server(["--model", model, "--test-engine-step-delay-ms", 20], os.path.join(tmp, "d.log")) as srv:
            for path, body in [("/v1/messages", {"max_tokens": 400, "stream": True, "ignore_eos": True,
                                                 "messages": [{"role": "user", "content": "x"}]}),
                               ("/v1/responses", {"input": "x", "max_output_tokens": 400, "stream": True,
                                                  "ignore_eos": True})]:
                st, ev = named_events(srv.port, path, body, stop_after=4)
                check(st == 200 and len(ev) == 4, ev)
                srv.wait_metrics(lambda m: m["nanovllm_num_requests_running"] == 0 and
                                 m["nanovllm_kv_cache_blocks_used"] == 0, f"{path}: aborted after the client left")
        print("ok: engine failure mid-stream -> each API's error event, then 503 in its shape; a leaving client "
              "aborts its request")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
