"""`nanovllm serve` end to end, over real HTTP on 127.0.0.1 (ephemeral ports only):
completions and chat, streamed and not (greedy: the streamed pieces concatenate to the
non-streamed text), usage counts, stop strings, logprobs, chat template kwargs and tools,
200 concurrent streaming clients (continuous batching: the batch grows above 1), a client
that disconnects mid-stream (its KV blocks are freed), every error status with an OpenAI
error object, API keys, the waiting-queue bound (503), graceful SIGTERM, and stories260K."""
import json
import os
import random
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server_util as U  # noqa: E402
from server_util import check  # noqa: E402

KEY = "test-key-123"
MAX_LEN = 512  # --max-model-len of the tiny-model servers


def completion(srv, **kw):
    body = {"temperature": 0}
    body.update(kw)
    return srv.post_json("/v1/completions", body)


def stream_text(events, chat):
    out = ""
    for e in events:
        for c in e.get("choices", []):
            out += (c.get("delta", {}).get("content") or "") if chat else c.get("text", "")
    return out


def finish_reasons(events):
    return [c["finish_reason"] for e in events for c in e.get("choices", []) if c.get("finish_reason")]


def expect_error(resp, status, param=None):
    st, hdrs, body = resp
    check(st == status, f"status {st}, expected {status}: {body}")
    check(isinstance(body, dict) and "error" in body, f"no error object: {body}")
    err = body["error"]
    for k in ("message", "type", "param", "code"):
        check(k in err, f"error object lacks {k!r}: {err}")
    check(isinstance(err["message"], str) and err["message"], f"empty error message: {err}")
    if param is not None:
        check(err["param"] == param, f"error param {err['param']!r}, expected {param!r}: {err}")
    return err


# ---------------------------------------------------------------- cases on the main server


def case_health_models(srv):
    st, _, body = srv.request("GET", "/health", headers={})
    check(st == 200, f"/health {st}")
    st, _, data = srv.request("GET", "/v1/models")
    models = json.loads(data)
    check(st == 200 and models["object"] == "list", f"/v1/models {st} {models}")
    check(models["data"][0]["id"] == "tiny", f"served model name: {models}")


def case_completion_ids(srv):
    ids = list(range(100, 137))
    st, _, r = completion(srv, model="tiny", prompt=ids, max_tokens=8, ignore_eos=True, logprobs=2)
    check(st == 200, f"status {st}: {r}")
    u = r["usage"]
    check(u["prompt_tokens"] == len(ids), f"prompt_tokens {u['prompt_tokens']} != {len(ids)}")
    check(u["completion_tokens"] == 8, f"completion_tokens {u['completion_tokens']} != 8 (ignore_eos)")
    check(u["total_tokens"] == len(ids) + 8, f"total_tokens {u}")
    ch = r["choices"][0]
    check(ch["finish_reason"] == "length", f"finish_reason {ch['finish_reason']}")
    lp = ch["logprobs"]
    check(len(lp["tokens"]) == 8 and len(lp["token_logprobs"]) == 8, f"logprobs per token: {lp}")
    check(all(x <= 1e-6 for x in lp["token_logprobs"]), "logprobs must be <= 0")
    check(all(1 <= len(t) <= 2 for t in lp["top_logprobs"]), f"top_logprobs sizes {lp['top_logprobs']}")
    # Greedy: the sampled token is the most likely one, so its logprob is the top alternative's.
    for got, top in zip(lp["token_logprobs"], lp["top_logprobs"]):
        check(abs(got - max(top.values())) < 1e-4, f"greedy token logprob {got} vs top {top}")


def case_completion_stream_matches(srv, prompt, ignore_eos):
    kw = dict(prompt=prompt, max_tokens=12, ignore_eos=ignore_eos)
    st, _, full = completion(srv, **kw)
    check(st == 200, f"status {st}: {full}")
    st, events, done, _ = srv.stream("/v1/completions", dict(kw, temperature=0, stream=True,
                                                              stream_options={"include_usage": True}))
    check(st == 200, f"stream status {st}: {events}")
    check(done, "no [DONE] at the end of the stream")
    text = stream_text(events, chat=False)
    want = full["choices"][0]["text"]
    check(text == want, f"streamed {text!r} != non-streamed {want!r}")
    reasons = finish_reasons(events)
    check(reasons == [full["choices"][0]["finish_reason"]], f"stream finish reasons {reasons}")
    check(all(e["object"] == "text_completion" and e["id"] == events[0]["id"] for e in events), "chunk ids/objects")
    check(events[-1]["choices"] == [] and events[-1]["usage"] == full["usage"],
          f"usage chunk {events[-1]} vs {full['usage']}")
    u = full["usage"]
    if ignore_eos:
        check(u["completion_tokens"] == 12 and full["choices"][0]["finish_reason"] == "length", f"usage {u}")
    else:
        fr = full["choices"][0]["finish_reason"]
        check(fr in ("stop", "length"), f"finish_reason {fr}")
        check(1 <= u["completion_tokens"] <= 12, f"usage {u}")
        if fr == "length":
            check(u["completion_tokens"] == 12, f"length finish with {u['completion_tokens']} tokens")
    if isinstance(prompt, list):
        check(u["prompt_tokens"] == len(prompt), f"prompt_tokens {u['prompt_tokens']} != {len(prompt)}")
    else:
        check(u["prompt_tokens"] > 0, f"prompt_tokens {u}")


def case_text_prompt_tokens(srv):
    # A list holding one string is the same prompt as the string.
    st, _, a = completion(srv, prompt="The capital of France is", max_tokens=3, ignore_eos=True)
    st2, _, b = completion(srv, prompt=["The capital of France is"], max_tokens=3, ignore_eos=True)
    check(st == 200 and st2 == 200, f"{a} {b}")
    check(a["usage"] == b["usage"] and a["choices"][0]["text"] == b["choices"][0]["text"], f"{a} vs {b}")
    # Independent count: `nanovllm tokenize` (same tokenizer.json, no server involved).
    n = a["usage"]["prompt_tokens"]
    probe = subprocess.run([U.nanovllm_bin(), "tokenize", "--help"], capture_output=True, timeout=60)
    if probe.returncode != 0:
        print("  (no `nanovllm tokenize`: prompt token count checked for plausibility only)")
        check(2 <= n <= len("The capital of France is"), f"implausible prompt_tokens {n}")
        return
    out = subprocess.run([U.nanovllm_bin(), "tokenize", "--tokenizer", srv.model_dir, "--text",
                          "The capital of France is", "--add-special-tokens", "--json"],
                         capture_output=True, text=True, timeout=60, check=True)
    want = len(json.loads(out.stdout)["ids"])
    check(n == want, f"prompt_tokens {n}, `nanovllm tokenize` gives {want}")


def case_chat(srv):
    msgs = [{"role": "user", "content": "Say hi"}]
    body = dict(messages=msgs, max_tokens=10, temperature=0, chat_template_kwargs={"enable_thinking": False})
    st, _, full = srv.post_json("/v1/chat/completions", body)
    check(st == 200, f"chat status {st}: {full}")
    check(full["object"] == "chat.completion", f"object {full['object']}")
    msg = full["choices"][0]["message"]
    check(msg["role"] == "assistant" and isinstance(msg["content"], str), f"message {msg}")
    st, events, done, _ = srv.stream("/v1/chat/completions",
                                     dict(body, stream=True, stream_options={"include_usage": True}))
    check(st == 200 and done, f"chat stream status {st}, done {done}")
    check(events[0]["choices"][0]["delta"].get("role") == "assistant", f"first chunk {events[0]}")
    check(all(e["object"] == "chat.completion.chunk" for e in events), "chunk objects")
    text = stream_text(events, chat=True)
    check(text == msg["content"], f"streamed {text!r} != {msg['content']!r}")
    check(finish_reasons(events) == [full["choices"][0]["finish_reason"]], "finish reasons differ")
    check(events[-1]["usage"] == full["usage"], f"usage {events[-1]} vs {full['usage']}")
    # vLLM's continuous_usage_stats: every chunk carries the usage so far, counting up to the
    # final usage chunk's.
    st, cev, done, _ = srv.stream("/v1/chat/completions", dict(body, stream=True, stream_options={
        "include_usage": True, "continuous_usage_stats": True}))
    check(st == 200 and done, f"continuous usage stream status {st}")
    counts = [e["usage"]["completion_tokens"] for e in cev]
    check(all("usage" in e for e in cev), f"a chunk without usage: {[e for e in cev if 'usage' not in e][:1]}")
    check(counts == sorted(counts) and cev[-1]["usage"] == full["usage"], f"usage counts {counts}")
    check(all(e["usage"]["total_tokens"] == e["usage"]["prompt_tokens"] + e["usage"]["completion_tokens"]
              for e in cev), "total_tokens")
    u = full["usage"]
    if full["choices"][0]["finish_reason"] == "length":
        check(u["completion_tokens"] == 10, f"usage {u}")
    # The chat template's kwargs reach the template: Qwen3 adds an empty think block when
    # enable_thinking is false, and renders tool schemas into the system prompt.
    st, _, think = srv.post_json("/v1/chat/completions", dict(body, chat_template_kwargs={"enable_thinking": True}))
    check(st == 200, f"{think}")
    check(think["usage"]["prompt_tokens"] != u["prompt_tokens"],
          f"enable_thinking did not change the prompt ({u['prompt_tokens']} tokens both)")
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
              "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]
    st, _, wt = srv.post_json("/v1/chat/completions", dict(body, tools=tools))
    check(st == 200, f"{wt}")
    check(wt["usage"]["prompt_tokens"] > u["prompt_tokens"] + 10,
          f"tools not rendered: {wt['usage']['prompt_tokens']} vs {u['prompt_tokens']} prompt tokens")
    # Chat logprobs (bool + top_logprobs).
    st, _, lp = srv.post_json("/v1/chat/completions", dict(body, logprobs=True, top_logprobs=3, max_tokens=4,
                                                           ignore_eos=True))
    check(st == 200, f"{lp}")
    content = lp["choices"][0]["logprobs"]["content"]
    check(len(content) == lp["usage"]["completion_tokens"] == 4, f"chat logprobs {len(content)} entries")
    check(all(len(c["top_logprobs"]) == 3 and "bytes" in c for c in content), f"top_logprobs {content[0]}")


def case_stop_string(srv):
    ids = list(range(300, 320))
    st, _, base = completion(srv, prompt=ids, max_tokens=24, ignore_eos=True)
    text = base["choices"][0]["text"]
    if len(text) < 8:
        print(f"  (greedy text too short for a stop-string check: {text!r})")
        return
    stop = text[len(text) // 2: len(text) // 2 + 2]
    want = text[: text.find(stop)]
    st, _, r = completion(srv, prompt=ids, max_tokens=24, ignore_eos=True, stop=[stop])
    check(st == 200, f"{r}")
    check(r["choices"][0]["text"] == want, f"stop {stop!r}: got {r['choices'][0]['text']!r}, want {want!r}")
    check(r["choices"][0]["finish_reason"] == "stop", f"finish_reason {r['choices'][0]['finish_reason']}")
    st, events, done, _ = srv.stream("/v1/completions", dict(prompt=ids, max_tokens=24, ignore_eos=True,
                                                              stop=stop, temperature=0, stream=True))
    check(done and stream_text(events, False) == want, f"streamed with stop: {stream_text(events, False)!r}")


def case_seeded_sampling(srv):
    kw = dict(prompt=list(range(50, 60)), max_tokens=10, ignore_eos=True, temperature=1.0, top_k=50, seed=1234)
    a = completion(srv, **kw)[2]["choices"][0]["text"]
    b = completion(srv, **kw)[2]["choices"][0]["text"]
    check(a == b, f"same seed, different text: {a!r} vs {b!r}")


def case_best_of(srv):
    """best_of > n: best_of completions are sampled, the n with the highest cumulative logprob come
    back, best first; usage counts every sampled token. The same seed without best_of shows the
    ranking picked the best of the sampled ones."""
    kw = dict(prompt=list(range(70, 80)), max_tokens=6, ignore_eos=True, temperature=1.0, seed=99)
    st, _, all4 = completion(srv, n=4, logprobs=0, **kw)
    check(st == 200, all4)
    score = lambda c: sum(c["logprobs"]["token_logprobs"])  # noqa: E731
    want = sorted(all4["choices"], key=score, reverse=True)[:2]
    st, _, best = completion(srv, n=2, best_of=4, logprobs=0, **kw)
    check(st == 200, best)
    check([c["index"] for c in best["choices"]] == [0, 1], best)
    check([c["text"] for c in best["choices"]] == [c["text"] for c in want],
          f"best_of picked {[c['text'] for c in best['choices']]}, want {[c['text'] for c in want]}")
    check(best["usage"]["completion_tokens"] == 4 * 6, best["usage"])
    # Without logprobs asked, none are shown (they were computed for the ranking only).
    st, _, plain = completion(srv, n=1, best_of=3, **kw)
    check(st == 200 and plain["choices"][0]["logprobs"] is None, plain)


def case_thinking_budget(srv):
    """thinking_budget on a prompt that opens <think> (Qwen3's ids): token budget+1 is </think>,
    the tokens before it as without a budget; reasoning_effort is checked and maps to budgets."""
    think_open, think_close = 151667, 151668
    prompt = [151644, 77091, 198, think_open, 198]
    kw = dict(prompt=prompt, max_tokens=8, ignore_eos=True, temperature=1.0, seed=3, return_token_ids=True,
              skip_special_tokens=False)
    st, _, free = completion(srv, **kw)
    check(st == 200, free)
    st, _, r = completion(srv, thinking_budget=2, **kw)
    check(st == 200, r)
    ids, free_ids = r["choices"][0]["token_ids"], free["choices"][0]["token_ids"]
    if think_close not in free_ids[:3]:
        check(ids[:2] == free_ids[:2] and ids[2] == think_close, f"budget 2: {ids} (free: {free_ids})")
    expect_error(completion(srv, prompt="x", thinking_budget=-2), 400, "thinking_budget")
    st, _, body = srv.post_json("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}],
                                                         "reasoning_effort": "loud"})
    expect_error((st, None, body), 400, "reasoning_effort")
    st, _, body = srv.post_json("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}],
                                                         "reasoning_effort": "low", "max_tokens": 2})
    check(st == 200, body)


def case_penalties_and_logit_bias(srv):
    ids = list(range(200, 212))
    pen = dict(presence_penalty=0.5, frequency_penalty=1.0, repetition_penalty=1.3)
    st, _, r = completion(srv, prompt=ids, max_tokens=12, ignore_eos=True, **pen)
    check(st == 200, f"penalties: {st} {r}")
    # The same request through the CLI (whose penalties are checked against a replay in
    # test_cli_sampling.py): the server must pass every penalty through.
    out = subprocess.run([U.nanovllm_bin(), "generate", "--model", srv.model_dir, "--prompt-ids",
                          ",".join(map(str, ids)), "--max-tokens", "12", "--temperature", "0",
                          "--ignore-eos", "--threads", "2", "--presence-penalty", "0.5",
                          "--frequency-penalty", "1.0", "--repetition-penalty", "1.3", "--json"],
                         capture_output=True, text=True, timeout=300, check=True).stdout
    cli_text = json.loads(out)["outputs"][0]["text"]
    check(r["choices"][0]["text"] == cli_text, f"server {r['choices'][0]['text']!r} vs CLI {cli_text!r}")
    plain = completion(srv, prompt=ids, max_tokens=12, ignore_eos=True)[2]["choices"][0]["text"]
    check(plain != cli_text, "penalties changed nothing")
    # logit_bias: +100 outweighs any logit of the random model (|logit| < 50), -100 removes one.
    def tokens(**kw):
        st, _, r = completion(srv, prompt=ids, max_tokens=5, ignore_eos=True, logprobs=0, **kw)
        check(st == 200, f"logit_bias {kw}: {st} {r}")
        return r["choices"][0]["logprobs"]["tokens"]
    a = tokens(logit_bias={"777": 100})
    check(len(set(a)) == 1, f"+100 on token 777 should repeat it: {a}")
    b = tokens(logit_bias={"777": -100, "778": 100})
    check(len(set(b)) == 1 and b[0] != a[0], f"-100 on 777, +100 on 778: {b} vs {a}")


def case_errors(srv):
    st, _, data = srv.request("POST", "/v1/completions", raw=b"{not json")
    expect_error((st, None, json.loads(data)), 400)
    expect_error(completion(srv, prompt="x", temperature="hot"), 400, "temperature")
    expect_error(completion(srv, prompt="x", top_p=5), 400, "top_p")
    expect_error(completion(srv, prompt="x", max_tokens=0), 400, "max_tokens")
    expect_error(completion(srv, prompt="x", n=65), 400, "n")
    expect_error(completion(srv, prompt="x", n=2, best_of=1), 400, "best_of")
    expect_error(completion(srv, prompt="x", n=2, best_of=3, stream=True), 400, "best_of")
    expect_error(completion(srv, prompt="x", suffix="y"), 400, "suffix")
    st, _, body = srv.post_json("/v1/embeddings", {"input": "x"})  # a generation model
    check(expect_error((st, None, body), 400, "model")["code"] == "wrong_task", body)
    expect_error(completion(srv, prompt="x", logprobs=99), 400, "logprobs")
    expect_error(completion(srv, prompt="x", presence_penalty=3), 400, "presence_penalty")
    # The whole message, its own brackets included (no source path to cut off any more).
    st, _, r = completion(srv, prompt="x", min_p=2)
    check(st == 400 and r["error"]["message"] == "min_p must be in [0, 1], got 2", f"min_p=2: {st} {r}")
    expect_error(completion(srv, prompt="x", frequency_penalty="a"), 400, "frequency_penalty")
    expect_error(completion(srv, prompt="x", repetition_penalty=0), 400, "repetition_penalty")
    expect_error(completion(srv, prompt="x", logit_bias={"abc": 1}), 400, "logit_bias")
    expect_error(completion(srv, prompt="x", logit_bias={"5": "up"}), 400, "logit_bias")
    expect_error(completion(srv, prompt="x", logit_bias={"5": 101}), 400, "logit_bias")
    expect_error(completion(srv, prompt="x", logit_bias=[5]), 400, "logit_bias")
    expect_error(completion(srv, prompt="x", logit_bias={"999999999": 1}), 400)  # outside the vocabulary
    expect_error(completion(srv, prompt=[1, "a"]), 400, "prompt")
    expect_error(completion(srv, max_tokens=3), 400, "prompt")
    expect_error(srv.post_json("/v1/chat/completions", {"messages": "hi"}), 400, "messages")
    expect_error(srv.post_json("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}],
                                                        "logprobs": True, "top_logprobs": 99}), 400)
    # Prompt longer than max_model_len: a per-request engine error before any token -> 400,
    # also for streaming requests (no SSE is started).
    too_long = list(range(10, 10 + MAX_LEN + 50))
    expect_error(completion(srv, prompt=too_long, max_tokens=2), 400)
    st, events, done, _ = srv.stream("/v1/completions", {"prompt": too_long, "max_tokens": 2, "stream": True})
    check(st == 400 and "error" in events[0], f"streamed too-long prompt: {st} {events}")
    expect_error(completion(srv, prompt=[10 ** 9]), 400)  # outside the vocabulary
    expect_error(completion(srv, prompt="x", model="no-such-model"), 404, "model")
    # Unknown route, wrong method.
    st, _, data = srv.request("GET", "/v1/nothing")
    expect_error((st, None, json.loads(data)), 404)
    st, _, data = srv.request("GET", "/v1/completions")
    check(st in (404, 405), f"GET /v1/completions: {st}")
    # Body larger than the limit.
    big = b'{"prompt": "' + b"a" * (9 << 20) + b'"}'
    st, _, data = srv.request("POST", "/v1/completions", raw=big, timeout=120)
    expect_error((st, None, json.loads(data)), 413)
    # API key: missing or wrong -> 401; /health needs none.
    st, _, data = srv.request("POST", "/v1/completions", raw=b'{"prompt":"x"}',
                              headers={"Content-Type": "application/json"})
    expect_error((st, None, json.loads(data)), 401)
    st, _, data = srv.request("POST", "/v1/completions", raw=b'{"prompt":"x"}',
                              headers={"Content-Type": "application/json", "Authorization": "Bearer wrong"})
    expect_error((st, None, json.loads(data)), 401)
    st, _, data = srv.request("GET", "/v1/models", headers={})
    check(st == 401, f"/v1/models without key: {st}")
    # Still serving.
    st, _, r = completion(srv, prompt="Hello", max_tokens=2)
    check(st == 200 and r["usage"]["completion_tokens"] >= 1, f"good request after errors: {st} {r}")
    st, _, _ = srv.request("GET", "/health", headers={})
    check(st == 200, "health after errors")
    m = srv.metrics()
    check(m.get('nanovllm_http_requests_total{status="400"}', 0) >= 10, "400s not counted in /metrics")


def case_concurrent(srv, n_clients=200, max_tokens=16):
    results = [None] * n_clients
    rng = random.Random(0)
    prompts = [[rng.randrange(10, 150000) for _ in range(rng.randrange(4, 24))] for _ in range(n_clients)]
    start = threading.Barrier(n_clients, timeout=60)

    def client(i):
        try:
            start.wait()
            results[i] = srv.stream("/v1/completions", {"prompt": prompts[i], "max_tokens": max_tokens,
                                                       "ignore_eos": True, "temperature": 0, "stream": True,
                                                       "stream_options": {"include_usage": True}},
                                    timeout=300)
        except Exception as e:  # recorded and reported below
            results[i] = e

    t0 = time.time()
    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(n_clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=max(1, 400 - (time.time() - t0)))
    check(all(not t.is_alive() for t in threads), "some clients did not finish within 400 s")
    bad = []
    for i, r in enumerate(results):
        if isinstance(r, Exception) or r is None:
            bad.append(f"{i}: {r!r}")
            continue
        st, events, done, _ = r
        usage = events[-1].get("usage") if events else None
        if st != 200 or not done or not usage:
            bad.append(f"{i}: status {st} done {done} last {events[-1:]}")
        elif usage["completion_tokens"] != max_tokens or usage["prompt_tokens"] != len(prompts[i]):
            bad.append(f"{i}: usage {usage}, prompt {len(prompts[i])}")
        elif finish_reasons(events) != ["length"]:
            bad.append(f"{i}: finish reasons {finish_reasons(events)}")
    check(not bad, f"{len(bad)} bad streams, e.g. {bad[:3]}")
    m = srv.metrics()
    check(m["nanovllm_batch_size_max"] > 1, f"batch never grew above 1: {m['nanovllm_batch_size_max']}")
    print(f"  {n_clients} streams in {time.time() - t0:.1f}s, max batch {m['nanovllm_batch_size_max']:.0f}")


def wait_idle(srv, timeout=60):
    deadline = time.time() + timeout
    while True:
        m = srv.metrics()
        if m["nanovllm_num_requests_running"] == 0 and m["nanovllm_kv_cache_usage_perc"] == 0:
            return m
        if time.time() > deadline:
            raise AssertionError(f"not idle after {timeout}s: running {m['nanovllm_num_requests_running']}, "
                                 f"kv usage {m['nanovllm_kv_cache_usage_perc']}")
        time.sleep(0.2)


def case_disconnect(srv):
    wait_idle(srv)
    before = srv.metrics().get('nanovllm_request_success_total{finished_reason="abort"}', 0)
    st, events, done, _ = srv.stream("/v1/completions", {"prompt": list(range(20, 40)), "max_tokens": 400,
                                                        "ignore_eos": True, "stream": True}, stop_after=3)
    check(st == 200 and len(events) == 3 and not done, f"stream start: {st} {len(events)}")
    m = wait_idle(srv, timeout=60)
    after = m.get('nanovllm_request_success_total{finished_reason="abort"}', 0)
    check(after == before + 1, f"aborted requests {before} -> {after}")
    gen = m["nanovllm_generation_tokens_total"]
    check(m["nanovllm_kv_cache_blocks_used"] == 0, "KV blocks still used")
    # It really stopped: no more tokens are generated afterwards.
    time.sleep(1.0)
    check(srv.metrics()["nanovllm_generation_tokens_total"] == gen, "tokens still generated after abort")


def case_metrics_text(srv):
    st, hdrs, data = srv.request("GET", "/metrics", headers={})
    check(st == 200 and hdrs.get("content-type", "").startswith("text/plain"), f"/metrics {st} {hdrs}")
    text = data.decode()
    for name, kind in [("nanovllm_http_requests_total", "counter"), ("nanovllm_prompt_tokens_total", "counter"),
                       ("nanovllm_generation_tokens_total", "counter"), ("nanovllm_num_requests_running", "gauge"),
                       ("nanovllm_num_requests_waiting", "gauge"), ("nanovllm_kv_cache_usage_perc", "gauge"),
                       ("nanovllm_prefix_cache_hit_rate", "gauge"), ("nanovllm_num_preemptions_total", "counter"),
                       ("nanovllm_time_to_first_token_seconds", "histogram"),
                       ("nanovllm_inter_token_latency_seconds", "histogram")]:
        check(f"# TYPE {name} {kind}\n" in text, f"/metrics lacks {name} ({kind})")
    m = U.parse_prometheus(text)
    check(m["nanovllm_time_to_first_token_seconds_count"] > 0, "no TTFT samples")
    check(m['nanovllm_time_to_first_token_seconds_bucket{le="+Inf"}'] ==
          m["nanovllm_time_to_first_token_seconds_count"], "+Inf bucket != count")
    check(m["nanovllm_generation_tokens_total"] >= 200 * 16, "generation tokens not counted")


# ------------------------------------------------------------ other servers


def case_priority_scheduling(tmp, model):
    """--scheduling-policy priority with one sequence at a time: while a long request runs, a
    priority-5 request is queued, then a priority-0 one; the priority-0 one is admitted first."""
    log = os.path.join(tmp, "serve-priority.log")
    with U.Server(["--model", model, "--threads", "2", "--max-model-len", MAX_LEN, "--max-num-seqs", 1,
                   "--scheduling-policy", "priority", "--test-engine-step-delay-ms", 10], log) as srv:
        done = []
        lock = threading.Lock()

        def client(name, prio, tokens):
            st, _, body = srv.post_json("/v1/completions", {"prompt": [100, 200, 300], "max_tokens": tokens,
                                                            "ignore_eos": True, "priority": prio})
            with lock:
                done.append((name, st))

        # Each request joins once the previous one is seen in its state (running, then waiting):
        # the long one needs >= 400 steps of >= 10 ms (>= 4 s, so it still runs when the others
        # queue, even on a busy machine), and both others must be seen waiting before it ends.
        long = threading.Thread(target=client, args=("long", 0, 400))
        long.start()
        srv.wait_metrics(lambda m: m["nanovllm_num_requests_running"] == 1, "the long request running")
        low = threading.Thread(target=client, args=("low", 5, 4))
        low.start()
        srv.wait_metrics(lambda m: m["nanovllm_num_requests_waiting"] == 1, "the priority-5 request waiting")
        high = threading.Thread(target=client, args=("high", 0, 4))
        high.start()
        m = srv.wait_metrics(lambda m: m["nanovllm_num_requests_waiting"] == 2 or
                             m["nanovllm_num_requests_running"] == 0, "both short requests waiting")
        check(m["nanovllm_num_requests_waiting"] == 2, "the long request ended before both others queued")
        for t in (long, low, high):
            t.join(60)
        check([n for n, _ in done] == ["long", "high", "low"] and all(st == 200 for _, st in done),
              f"completion order {done}")


def case_queue_bound_and_sigterm(tmp, model):
    log = os.path.join(tmp, "serve-bounded.log")
    with U.Server(["--model", model, "--threads", "2", "--max-model-len", MAX_LEN, "--max-num-seqs", 1,
                   "--max-waiting", 1], log) as srv:
        results = []
        lock = threading.Lock()

        def client(i):
            try:
                r = srv.stream("/v1/completions", {"prompt": [100 + i % 50, 200, 300], "max_tokens": 400,
                                                   "ignore_eos": True, "stream": True}, timeout=120)
            except Exception as e:  # a stream cut by the shutdown
                r = e
            with lock:
                results.append(r)

        # Keep 4 long streams in flight (1 running, 1 waiting, the rest refused and replaced), so the
        # queue is full whenever the probe asks, however fast this machine decodes the tiny model.
        threads = []

        def top_up():
            while sum(1 for t in threads if t.is_alive()) < 4:
                t = threading.Thread(target=client, args=(len(threads),), daemon=True)
                threads.append(t)
                t.start()

        top_up()
        time.sleep(0.2)
        # While those run, a further request must be refused with 503 + Retry-After.
        deadline = time.time() + 30
        got503 = None
        while time.time() < deadline and got503 is None:
            top_up()
            st, hdrs, data = srv.request("POST", "/v1/completions", raw=b'{"prompt":[5,6],"max_tokens":1}')
            if st == 503:
                got503 = (hdrs, data)
            time.sleep(0.05)
        check(got503 is not None, "no 503 with --max-waiting 1 and 4 long streams in flight")
        err = json.loads(got503[1])["error"]
        check("retry-after" in got503[0], f"503 without Retry-After: {got503[0]}")
        check(err["type"] and err["message"], f"503 error object {err}")
        # SIGTERM while streams are in flight: they end, the process exits 0.
        code = srv.terminate(timeout=60)
        check(code == 0, f"exit code {code} after SIGTERM; log:\n{srv.tail_log()}")
        for t in threads:
            t.join(timeout=30)
        check(all(not t.is_alive() for t in threads), "clients still blocked after the server exited")
        clean = sum(1 for r in results if isinstance(r, tuple) and r[0] == 200 and r[2])
        refused = sum(1 for r in results if isinstance(r, tuple) and r[0] == 503)
        print(f"  after SIGTERM: {clean} streams ended with [DONE], {refused} refused with 503, "
              f"{len(results) - clean - refused} cut")


def case_stories(tmp):
    data = os.environ.get("NANOVLLM_SHARED_DATA") or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "shared", "data")
    model = os.path.join(data, "models", "stories260K-hf")
    if not os.path.isdir(model):
        print(f"  SKIP stories260K part: {model} not found")
        return
    with U.Server(["--model", model, "--threads", "2", "--served-model-name", "stories"],
                  os.path.join(tmp, "serve-stories.log")) as srv:
        st, _, r = srv.post_json("/v1/completions", {"model": "stories", "prompt": "Once upon a time",
                                                    "max_tokens": 32, "temperature": 0})
        check(st == 200, f"stories status {st}: {r}")
        text = r["choices"][0]["text"]
        check(text.strip() != "", f"empty text {r}")
        st, events, done, _ = srv.stream("/v1/completions", {"prompt": "Once upon a time", "max_tokens": 32,
                                                            "temperature": 0, "stream": True})
        check(done and stream_text(events, False) == text, "stories streamed text differs")
        print(f"  stories260K: {text[:60]!r}...")


def main():
    setup = U.setup_tiny_model("serve-")
    if isinstance(setup, str):
        print(f"SKIP: {setup}")
        return U.SKIP
    tmp, model = setup
    run = U.Runner()
    try:
        # Steps of at least 2 ms: a 400-token stream lasts >= 0.8 s however fast this machine is, so
        # the disconnect case's client always leaves while its request still runs.
        with U.Server(["--model", model, "--threads", "2", "--max-model-len", MAX_LEN, "--api-key", KEY,
                       "--served-model-name", "tiny", "--test-engine-step-delay-ms", 2],
                      os.path.join(tmp, "serve.log")) as srv:
            srv.api_key = KEY
            srv.model_dir = model
            run.case("health and models", case_health_models, srv)
            run.case("completion with token ids, usage, logprobs", case_completion_ids, srv)
            run.case("completion stream == non-stream (ids, ignore_eos)", case_completion_stream_matches, srv,
                     list(range(1000, 1016)), True)
            run.case("completion stream == non-stream (text)", case_completion_stream_matches, srv,
                     "Hello, my name is", False)
            run.case("text prompt forms", case_text_prompt_tokens, srv)
            run.case("chat: stream, kwargs, tools, logprobs", case_chat, srv)
            run.case("stop strings", case_stop_string, srv)
            run.case("seeded sampling is reproducible", case_seeded_sampling, srv)
            run.case("best_of ranks by cumulative logprob", case_best_of, srv)
            run.case("thinking budget forces </think>", case_thinking_budget, srv)
            run.case("penalties and logit_bias", case_penalties_and_logit_bias, srv)
            run.case("errors and status codes", case_errors, srv)
            run.case("200 concurrent streaming clients", case_concurrent, srv)
            run.case("client disconnect frees KV blocks", case_disconnect, srv)
            run.case("metrics text", case_metrics_text, srv)
            if run.failed:
                print("server log tail:\n" + srv.tail_log())
        run.case("waiting-queue bound (503) and SIGTERM", case_queue_bound_and_sigterm, tmp, model)
        run.case("priority scheduling admits by priority", case_priority_scheduling, tmp, model)
        run.case("stories260K greedy", case_stories, tmp)
    finally:
        subprocess.run(["rm", "-rf", tmp])
    return run.exit_code()


if __name__ == "__main__":
    sys.exit(main())
