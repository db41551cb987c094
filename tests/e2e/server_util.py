"""Helpers for the `nanovllm serve` end-to-end tests: start/stop a server subprocess, plain and
streaming (SSE) HTTP requests on 127.0.0.1, Prometheus text parsing. Standard library only."""
import http.client
import json
import os
import select
import signal
import socket
import subprocess
import tempfile
import threading
import time

SKIP = 77
HOST = "127.0.0.1"  # the only address these tests talk to


def nanovllm_bin():
    b = os.environ.get("NANOVLLM_BIN")
    if not b:
        build = os.environ.get("NANOVLLM_BUILD_DIR")
        b = os.path.join(build, "nanovllm") if build else None
    if not b or not os.path.exists(b):
        raise RuntimeError(f"nanovllm binary not found (NANOVLLM_BIN={os.environ.get('NANOVLLM_BIN')!r})")
    return b


def make_tmpdir(prefix):
    base = os.environ.get("NANOVLLM_BUILD_DIR")
    if base and os.path.isdir(base):
        return tempfile.mkdtemp(prefix=prefix, dir=base)
    return tempfile.mkdtemp(prefix=prefix)


def setup_tiny_model(prefix, seed=0):
    """For a server test: (tmp dir, tiny random Qwen3 model dir), or a reason to skip (str) when
    there is no binary or it was built without the HTTP server. The caller removes tmp."""
    try:
        binary = nanovllm_bin()
    except RuntimeError as e:
        return str(e)
    probe = subprocess.run([binary, "serve", "--help"], capture_output=True, text=True, timeout=60)
    if probe.returncode != 0 and "without the HTTP server" in (probe.stdout + probe.stderr):
        return "this nanovllm was built without the HTTP server (cpp-httplib not linked)"
    tmp = make_tmpdir(prefix)
    model = os.path.join(tmp, "tiny")
    subprocess.run([binary, "make-model", "--arch", "qwen3", "--preset", "tiny", "--dtype", "f32", "--seed",
                    str(seed), "--out", model], check=True, capture_output=True, timeout=300)
    return tmp, model


class Server:
    """`nanovllm serve` on an ephemeral port. Use as a context manager (always killed)."""

    def __init__(self, args, log_path, start_timeout=180):
        self.args = [nanovllm_bin(), "serve", "--host", HOST, "--port", "0"] + [str(a) for a in args]
        self.log_path = log_path
        self.start_timeout = start_timeout
        self.proc = None
        self.port = None
        self.api_key = None

    def __enter__(self):
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=self.log)
        found = threading.Event()

        def read_stdout():  # keep draining stdout so the server never blocks on it
            for raw in self.proc.stdout:
                line = raw.decode("utf-8", "replace").strip()
                prefix = "nanovllm: listening on http://"
                if line.startswith(prefix) and not found.is_set():
                    self.port = int(line.rsplit(":", 1)[1])
                    found.set()

        threading.Thread(target=read_stdout, daemon=True).start()
        deadline = time.time() + self.start_timeout
        while not found.wait(0.2):
            if self.proc.poll() is not None or time.time() > deadline:
                self.kill()
                raise RuntimeError(f"server did not start (exit {self.proc.returncode}); log:\n{self.tail_log()}")
        return self

    def __exit__(self, *exc):
        self.kill()
        return False

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)
        if getattr(self, "log", None):
            self.log.close()

    def terminate(self, timeout=60):
        """SIGTERM; returns the exit code (raises if it does not exit in time)."""
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=timeout)

    def tail_log(self, n=3000):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")[-n:]
        except OSError:
            return ""

    def headers(self, extra=None):
        h = {"Content-Type": "application/json"}
        if self.api_key:
            h["Authorization"] = f"Bearer {self.api_key}"
        h.update(extra or {})
        return h

    def request(self, method, path, body=None, headers=None, timeout=120, raw=None):
        """Returns (status, headers dict (lower-case names), body bytes)."""
        conn = http.client.HTTPConnection(HOST, self.port, timeout=timeout)
        try:
            data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
            conn.request(method, path, body=data, headers=headers if headers is not None else self.headers())
            r = conn.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        finally:
            conn.close()

    def post_json(self, path, body, headers=None, timeout=120):
        status, hdrs, data = self.request("POST", path, body, headers, timeout)
        return status, hdrs, json.loads(data) if data else None

    def stream(self, path, body, timeout=120, stop_after=None, on_event=None):
        """POSTs a streaming request and parses the SSE body. Returns (status, events, done, raw):
        events are the decoded JSON payloads, done whether 'data: [DONE]' came last. With
        `stop_after` = k the connection is closed after k events (a client going away).
        `on_event(event)` is called as each event arrives (e.g. to set a "first token" flag)."""
        conn = http.client.HTTPConnection(HOST, self.port, timeout=timeout)
        try:
            conn.request("POST", path, body=json.dumps(body).encode(), headers=self.headers())
            r = conn.getresponse()
            if r.status != 200:
                return r.status, [json.loads(r.read())], False, b""
            ctype = r.getheader("Content-Type", "")
            if not ctype.startswith("text/event-stream"):
                raise AssertionError(f"stream Content-Type {ctype!r}")
            events, done, raw = [], False, b""
            while True:
                line = r.readline()
                if not line:
                    break
                raw += line
                if line in (b"\n", b"\r\n"):
                    continue
                if not line.startswith(b"data: "):
                    raise AssertionError(f"malformed SSE line {line!r}")
                if done:
                    raise AssertionError("data after [DONE]")
                payload = line[6:].rstrip(b"\r\n")
                if payload == b"[DONE]":
                    done = True
                    continue
                events.append(json.loads(payload))
                if on_event is not None:
                    on_event(events[-1])
                if stop_after is not None and len(events) >= stop_after:
                    return r.status, events, False, raw
            return r.status, events, done, raw
        finally:
            conn.close()

    def metrics(self):
        status, _, data = self.request("GET", "/metrics", headers={})
        if status != 200:
            raise AssertionError(f"/metrics status {status}")
        return parse_prometheus(data.decode())

    def wait_metrics(self, pred, what, timeout=60):
        """Polls /metrics until pred(metrics) holds; returns those metrics. Tests wait for an
        observable state this way instead of sleeping for a time that a faster or slower machine
        (or a busy core) would make wrong."""
        deadline = time.time() + timeout
        while True:
            m = self.metrics()
            if pred(m):
                return m
            if time.time() > deadline:
                raise AssertionError(f"not {what} after {timeout} s (running "
                                     f"{m.get('nanovllm_num_requests_running')}, waiting "
                                     f"{m.get('nanovllm_num_requests_waiting')})")
            time.sleep(0.02)


class RawClient:
    """One TCP connection for hand-made (hostile) HTTP: send bytes, read what comes back."""

    def __init__(self, port, timeout=10):
        self.sock = socket.create_connection((HOST, port), timeout=timeout)
        self.timeout = timeout

    def send(self, data):
        """False once the server has closed or reset the connection."""
        try:
            self.sock.sendall(data)
            return True
        except OSError:
            return False

    def readable(self):
        """The server sent something, closed, or reset the connection."""
        r, _, _ = select.select([self.sock], [], [], 0)
        return bool(r)

    def read_all(self):
        """Everything until the server closes (or the timeout; a reset ends it too)."""
        out = b""
        deadline = time.time() + self.timeout
        while time.time() < deadline:
            try:
                b = self.sock.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                break
            if not b:
                break
            out += b
        self.close()
        return out

    def exchange(self, data, half_close=False):
        self.send(data)
        if half_close:
            try:
                self.sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass
        return self.read_all()

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def stream_events(port, path, body, gaps, stop, timeout=120):
    """Streams `body` and appends the time between consecutive SSE events to `gaps` (seconds)
    until [DONE] or `stop` is set. Returns the number of events."""
    conn = http.client.HTTPConnection(HOST, port, timeout=timeout)
    try:
        conn.request("POST", path, body=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        last, n = time.time(), 0
        while not stop.is_set():
            line = r.readline()
            if not line or line.strip() == b"data: [DONE]":
                break
            if line.startswith(b"data: "):
                now = time.time()
                gaps.append(now - last)
                last, n = now, n + 1
        return n
    finally:
        conn.close()


def parse_prometheus(text):
    """{'name{labels}': value} for every sample line."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        key, value = line.rsplit(" ", 1)
        out[key] = float(value)
    return out


class Runner:
    """Runs named cases, prints PASS/FAIL lines, and gives the exit status."""

    def __init__(self):
        self.failed = []

    def case(self, name, fn, *args):
        t0 = time.time()
        try:
            fn(*args)
            print(f"PASS: {name} ({time.time() - t0:.1f}s)", flush=True)
        except Exception as e:  # report and go on
            print(f"FAIL: {name}: {type(e).__name__}: {e}", flush=True)
            self.failed.append(name)

    def exit_code(self):
        if self.failed:
            print(f"{len(self.failed)} case(s) failed: {', '.join(self.failed)}")
            return 1
        return 0


def check(cond, msg):
    if not cond:
        raise AssertionError(msg)
