"""A minimal Chrome DevTools Protocol client for headless Chromium, standard library only: the
browser is started with --remote-debugging-pipe (JSON messages ended by NUL on fds 3 and 4, so no
WebSocket is needed), one page target is attached in flat mode, and the test drives it with
Runtime.evaluate / Input.* and reads console messages, exceptions and log entries."""
import base64
import json
import os
import shutil
import subprocess
import threading
import time

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
         "--force-device-scale-factor=1", "--disable-extensions", "--mute-audio"]


def chromium_path():
    for name in ("chromium", "chromium-browser"):
        p = shutil.which(name)
        if p:
            return p
    return None


class CdpError(RuntimeError):
    pass


class Browser:
    """Use as a context manager: the browser process is always killed."""

    def __init__(self, chromium, profile_dir, log_path):
        self.chromium, self.profile, self.log_path = chromium, profile_dir, log_path
        self.next_id = 0
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)
        self.replies = {}
        self.events = []  # (method, params) of the page session, in arrival order
        self.session = None
        self.proc = None

    def __enter__(self):
        to_chrome_r, self.to_chrome_w = os.pipe()
        self.from_chrome_r, from_chrome_w = os.pipe()

        def child_fds():  # chromium reads commands on fd 3 and writes replies on fd 4
            os.dup2(to_chrome_r, 3)
            os.dup2(from_chrome_w, 4)

        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen([self.chromium] + FLAGS + ["--remote-debugging-pipe",
                                                               "--user-data-dir=" + self.profile, "about:blank"],
                                     stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log,
                                     preexec_fn=child_fds, close_fds=False)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        threading.Thread(target=self._read, daemon=True).start()
        target = self.call("Target.createTarget", {"url": "about:blank"}, session=False)["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True},
                                 session=False)["sessionId"]
        for domain in ("Runtime", "Log", "Page"):
            self.call(domain + ".enable")
        return self

    def __exit__(self, *exc):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)
        for fd in (self.to_chrome_w, self.from_chrome_r):
            try:
                os.close(fd)
            except OSError:
                pass
        self.log.close()
        return False

    def _read(self):
        buf = b""
        while True:
            try:
                chunk = os.read(self.from_chrome_r, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                with self.cond:
                    self.replies[-1] = None  # the browser went away
                    self.cond.notify_all()
                return
            buf += chunk
            while b"\0" in buf:
                raw, buf = buf.split(b"\0", 1)
                msg = json.loads(raw)
                with self.cond:
                    if "id" in msg:
                        self.replies[msg["id"]] = msg
                    elif msg.get("sessionId") == self.session:
                        self.events.append((msg["method"], msg.get("params", {})))
                    self.cond.notify_all()

    def call(self, method, params=None, session=True, timeout=60):
        with self.cond:
            self.next_id += 1
            mid = self.next_id
        msg = {"id": mid, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = self.session
        os.write(self.to_chrome_w, json.dumps(msg).encode() + b"\0")
        deadline = time.time() + timeout
        with self.cond:
            while mid not in self.replies:
                if -1 in self.replies:
                    raise CdpError(f"the browser exited during {method}")
                left = deadline - time.time()
                if left <= 0:
                    raise CdpError(f"{method}: no reply in {timeout} s")
                self.cond.wait(left)
            reply = self.replies.pop(mid)
        if "error" in reply:
            raise CdpError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def wait_event(self, method, pred=lambda p: True, timeout=60, start=0):
        """The first event `method` (from index `start`) whose params satisfy pred."""
        deadline = time.time() + timeout
        with self.cond:
            while True:
                for m, p in self.events[start:]:
                    if m == method and pred(p):
                        return p
                left = deadline - time.time()
                if left <= 0:
                    raise CdpError(f"no {method} event in {timeout} s")
                self.cond.wait(left)

    def navigate(self, url, timeout=60):
        start = len(self.events)
        self.call("Page.navigate", {"url": url})
        self.wait_event("Page.loadEventFired", timeout=timeout, start=start)

    def eval(self, expression, timeout=60):
        """The value of a JS expression (promises awaited); raises on a thrown exception."""
        r = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True},
                      timeout=timeout)
        if "exceptionDetails" in r:
            raise CdpError(f"evaluate {expression[:80]!r}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def wait_for(self, expression, timeout=60, what=None):
        """Polls a JS expression until it is truthy; returns its value."""
        deadline = time.time() + timeout
        while True:
            v = self.eval(expression)
            if v:
                return v
            if time.time() > deadline:
                raise CdpError(f"timed out waiting for {what or expression}")
            time.sleep(0.05)

    def key(self, key, code=None, vk=0, text=None, modifiers=0):
        down = {"type": "keyDown", "key": key, "code": code or key, "windowsVirtualKeyCode": vk,
                "modifiers": modifiers}
        if text:
            down["text"] = text
        self.call("Input.dispatchKeyEvent", down)
        self.call("Input.dispatchKeyEvent", {"type": "keyUp", "key": key, "code": code or key,
                                             "windowsVirtualKeyCode": vk, "modifiers": modifiers})

    def type_text(self, text):
        self.call("Input.insertText", {"text": text})

    def screenshot(self, path, full_page=True):
        params = {"format": "png"}
        if full_page:
            params["captureBeyondViewport"] = True
        data = self.call("Page.captureScreenshot", params)["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))

    def problems(self, since=0):
        """Console errors / warnings, uncaught exceptions and error log entries (from event index
        `since`; CSP violations and failed loads arrive as log entries)."""
        out = []
        with self.cond:
            events = list(self.events[since:])
        for m, p in events:
            if m == "Runtime.exceptionThrown":
                out.append("exception: " + json.dumps(p.get("exceptionDetails", {}))[:500])
            elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "warning", "assert"):
                out.append(f"console.{p['type']}: " + json.dumps(p.get("args", []))[:500])
            elif m == "Log.entryAdded" and p["entry"].get("level") in ("error", "warning"):
                e = p["entry"]
                out.append(f"log {e.get('source')} {e.get('level')}: {e.get('text')} {e.get('url', '')}")
        return out
