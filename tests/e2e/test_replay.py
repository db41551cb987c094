"""`serve --trace A --trace-requests`, `nanovllm replay` and `trace-view --compare` (issue 33).

- record: a server on a random tiny model gets greedy, seeded, unseeded, n = 2, streamed and chat
  requests, several at once; SIGTERM closes the trace.
- in-process replay, step timing: every output equal to the recording and the same step count;
  the replay's own trace replays again to the same; under --max-num-seqs 1, and with wall-clock
  arrivals, the outputs stay equal (docs/determinism.md) while the schedule changes.
- --url replay against a fresh server started with --trace-requests: no errors, no output
  differs (client-side texts / token ids), and the server's own trace matches the recording
  token for token; the compare page and its --json.
- bad input: a truncated recording replays what it holds; another file format, a trace without
  request records, a bad or unreachable URL and --timing steps with --url are clear errors.
"""
import json
import os
import shutil
import subprocess
import sys
import threading

sys.path.insert(0, os.path.dirname(__file__))
from server_util import SKIP, Runner, Server, check, nanovllm_bin, setup_tiny_model  # noqa: E402

BIN = None


def run(args, timeout=600):
    return subprocess.run([BIN] + [str(a) for a in args], capture_output=True, text=True, timeout=timeout)


def replay(args):
    r = run(["replay"] + args + ["--json", "--no-progress"])
    check(r.returncode == 0, f"replay {args} failed: {r.stderr[-2000:]}")
    return json.loads(r.stdout)


# The recorded traffic: (route, body). Greedy, seeded, unseeded (the engine draws a seed), n = 2,
# streamed, chat; prompts share a prefix so the prefix cache plays a part.
def traffic():
    base = list(range(3, 40))
    reqs = []
    for i in range(4):
        reqs.append(("/v1/completions", {"prompt": base + [50 + i], "max_tokens": 12 + i, "temperature": 0}))
    for i in range(3):
        reqs.append(("/v1/completions", {"prompt": base[:20] + [70 + i], "max_tokens": 10, "temperature": 0.9,
                                         "seed": 100 + i}))
    reqs.append(("/v1/completions", {"prompt": [5, 6, 7, 8], "max_tokens": 8, "temperature": 1.0}))
    reqs.append(("/v1/completions", {"prompt": [9, 10, 11], "max_tokens": 6, "temperature": 0.8, "seed": 7,
                                     "n": 2}))
    reqs.append(("/v1/completions", {"prompt": base[:10], "max_tokens": 9, "temperature": 0, "stream": True}))
    reqs.append(("/v1/chat/completions", {"messages": [{"role": "user", "content": "Tell me a story"}],
                                          "max_tokens": 10, "temperature": 0,
                                          "chat_template_kwargs": {"enable_thinking": False}}))
    return reqs


def send_all(srv, reqs):
    """Sends the requests in two concurrent waves (so that they batch); returns the statuses."""
    statuses = [None] * len(reqs)

    def one(i):
        route, body = reqs[i]
        if body.get("stream"):
            statuses[i] = srv.stream(route, body)[0]
        else:
            statuses[i] = srv.post_json(route, body)[0]

    for wave in (range(0, 6), range(6, len(reqs))):
        ts = [threading.Thread(target=one, args=(i,)) for i in wave]
        for t in ts:
            t.start()
        for t in ts:
            t.join(120)
    return statuses


def completions(reqs):
    return sum(body.get("n", 1) for _, body in reqs)


def case_record(tmp, model, A):
    with Server(["--model", model, "--threads", "1", "--max-num-seqs", "4", "--trace", A, "--trace-requests"],
                os.path.join(tmp, "record.log")) as srv:
        statuses = send_all(srv, traffic())
        check(all(s == 200 for s in statuses), f"statuses {statuses}")
        check(srv.terminate() == 0, "server exit")
    events = json.load(open(A))
    recs = [e for e in events if e["name"] == "request_record"]
    outs = [e for e in events if e["name"] == "request_output"]
    check(len(recs) == len(traffic()), f"{len(recs)} request records")
    check(len(outs) == completions(traffic()), f"{len(outs)} request outputs")
    check(all(r["args"]["route"] in ("/v1/completions", "/v1/chat/completions") and r["args"]["body"] for r in recs),
          "routes and bodies recorded")
    check(any(not r["args"]["seed_given"] for r in recs), "the unseeded request's drawn seed is marked")


def case_in_process(tmp, model, A):
    B = os.path.join(tmp, "B.json")
    j = replay([A, "--model", model, "--threads", "1", "--trace", B])
    o = j["outputs"]
    check(j["mode"] == "in-process" and j["timing"] == "steps", f"{j['mode']} {j['timing']}")
    check(o["equal"] == completions(traffic()) and o["different"] == 0 and o["not_compared"] == 0,
          f"outputs {o}")
    check(j["steps"] == j["recorded_steps"], f"steps {j['steps']} vs recorded {j['recorded_steps']}")
    # The replay's trace has the same request records: it replays (and compares) again.
    j2 = replay([B, "--model", model, "--threads", "1", "--trace", os.path.join(tmp, "B2.json")])
    check(j2["outputs"]["equal"] == o["equal"] and j2["steps"] == j["steps"], f"replay of the replay {j2}")
    # Other flags: the same outputs (determinism), another schedule.
    j3 = replay([A, "--model", model, "--threads", "1", "--max-num-seqs", "1", "--trace", os.path.join(tmp, "C.json")])
    check(j3["outputs"]["different"] == 0 and j3["outputs"]["equal"] == o["equal"], f"--max-num-seqs 1: {j3['outputs']}")
    check(j3["steps"] != j["steps"], f"--max-num-seqs 1 kept the step count {j3['steps']}")
    # Wall-clock arrivals (4x faster): other batches, the same tokens.
    j4 = replay([A, "--model", model, "--threads", "1", "--timing", "wall", "--speed", "4",
                 "--trace", os.path.join(tmp, "W.json")])
    check(j4["timing"] == "wall" and j4["outputs"]["equal"] == o["equal"], f"--timing wall: {j4['outputs']}")
    print(f"  {o['equal']} outputs equal, {j['steps']} steps as recorded; --max-num-seqs 1: {j3['steps']} steps; "
          f"wall timing: {j4['steps']} steps")


def case_url(tmp, model, A):
    S, R = os.path.join(tmp, "S.json"), os.path.join(tmp, "R.json")
    with Server(["--model", model, "--threads", "1", "--trace", S, "--trace-requests"],
                os.path.join(tmp, "url.log")) as srv:
        j = replay([A, "--url", f"http://127.0.0.1:{srv.port}", "--trace", R, "--speed", "4"])
        check(srv.terminate() == 0, "server exit")
    o = j["outputs"]
    check(j["mode"] == "url" and j["http_errors"] == 0 and j["transport_errors"] == 0, f"errors {j}")
    check(o["different"] == 0 and o["only_a"] == 0 and o["only_b"] == 0, f"client-side outputs {o}")
    # The unseeded request gets a new seed from the server: it alone is not compared.
    check(o["not_compared"] == 1 and o["equal"] == completions(traffic()) - 1, f"client-side outputs {o}")
    c = run(["trace-view", "--compare", A, S, "--json", "-o", os.path.join(tmp, "AS.html")])
    check(c.returncode == 0, f"trace-view --compare failed: {c.stderr}")
    so = json.loads(c.stdout)["outputs"]
    check(so["different"] == 0 and so["equal"] == completions(traffic()) - 1, f"server trace vs recording {so}")
    r = json.loads(run(["trace-view", "--compare", A, R, "--json"]).stdout)
    check(r["b"]["requests"] == len(traffic()) and r["b"]["ttft_ms"]["count"] >= 1, "client-side trace summary")


def case_compare_page(tmp, model, A):
    C, page = os.path.join(tmp, "C.json"), os.path.join(tmp, "compare.html")
    r = run(["trace-view", "--compare", A, C, "-o", page, "--json"])
    check(r.returncode == 0, f"trace-view --compare failed: {r.stderr}")
    j = json.loads(r.stdout)
    check(j["config_a"]["max_num_seqs"] == 4 and j["config_b"]["max_num_seqs"] == 1, "configs")
    check(j["outputs"]["different"] == 0, f"outputs {j['outputs']}")
    html = open(page).read().replace('xmlns="http://www.w3.org/2000/svg"', "")  # a name, not fetched
    for chart in ("throughput", "queues", "kv", "ttft_cdf", "itl_cdf", "e2e_cdf"):
        check(f'data-chart="{chart}"' in html, f"chart {chart} missing")
    check("http://" not in html and "https://" not in html and " src=" not in html, "external URLs")


def case_bad_input(tmp, model, A):
    text = open(A).read()
    cut = os.path.join(tmp, "cut.json")
    with open(cut, "w") as f:  # a killed server: no closing bracket, the last line cut short
        f.write(text[: text.index("request_record", len(text) // 2) + 40])
    j = replay([cut, "--model", model, "--threads", "1", "--trace", os.path.join(tmp, "cut-replay.json")])
    check(0 < j["requests"] < len(traffic()) and j["recording_truncated"], f"truncated: {j['requests']} requests")
    check(j["outputs"]["different"] == 0, f"truncated: {j['outputs']}")
    other = os.path.join(tmp, "other.json")
    with open(other, "w") as f:
        json.dump({"hello": 1}, f)
    plain = os.path.join(tmp, "plain.json")
    g = run(["generate", "--model", model, "--prompt-ids", "1,2,3", "--max-tokens", "2", "--trace", plain])
    check(g.returncode == 0, g.stderr)
    for args, needle in (([other, "--model", model], "not a trace"),
                         ([plain, "--model", model], "--trace-requests"),
                         ([os.path.join(tmp, "missing.json")], "cannot open trace file"),
                         ([A, "--url", "ftp://127.0.0.1:1"], "scheme must be http or https"),
                         ([A, "--url", "http://127.0.0.1:1", "--trace", os.path.join(tmp, "x.json")],
                          "no request reached http://127.0.0.1:1"),
                         ([A, "--url", "http://127.0.0.1:1", "--timing", "steps"], "--timing steps"),
                         ([A, "--url", "http://127.0.0.1:1", "--max-num-seqs", "2"], "runs with its own"),
                         ([A, "--model", model, "--trace", A], "would overwrite")):
        r = run(["replay"] + args + ["--no-progress"], timeout=120)
        check(r.returncode != 0 and needle in r.stderr and len(r.stderr.strip().splitlines()) == 1,
              f"{args}: exit {r.returncode}, stderr {r.stderr[-600:]}")
    r = run(["generate", "--model", model, "--prompt-ids", "1", "--trace-requests"])
    check(r.returncode != 0 and "needs trace_path" in r.stderr, f"--trace-requests without --trace: {r.stderr}")


def main():
    global BIN
    got = setup_tiny_model("replay_")
    if isinstance(got, str):
        print(f"SKIP: {got}")
        return SKIP
    tmp, model = got
    BIN = nanovllm_bin()
    A = os.path.join(tmp, "A.json")
    runner = Runner()
    try:
        runner.case("serve --trace --trace-requests records requests and outputs", case_record, tmp, model, A)
        runner.case("replay in-process: same outputs, same step count", case_in_process, tmp, model, A)
        runner.case("replay --url against a fresh server", case_url, tmp, model, A)
        runner.case("trace-view --compare", case_compare_page, tmp, model, A)
        runner.case("bad input", case_bad_input, tmp, model, A)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return runner.exit_code()


if __name__ == "__main__":
    sys.exit(main())
