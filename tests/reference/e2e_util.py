"""Helpers shared by the e2e tests that compare the nanovllm CLI with the numpy reference."""
import json
import os
import shutil
import subprocess
import tempfile

import numpy as np

SKIP = 77


def nanovllm_bin():
    b = os.environ.get("NANOVLLM_BIN")
    if not b:
        build = os.environ.get("NANOVLLM_BUILD_DIR")
        b = os.path.join(build, "nanovllm") if build else None
    if not b or not os.path.exists(b):
        raise RuntimeError(f"nanovllm binary not found (NANOVLLM_BIN={os.environ.get('NANOVLLM_BIN')!r})")
    return b


def shared_model(name):
    """(path of a shared-data model, None) or (None, why it is unavailable)."""
    try:
        nanovllm_bin()
    except RuntimeError as e:
        return None, str(e)
    path = os.path.join(os.environ.get("NANOVLLM_SHARED_DATA", ""), "models", name)
    if not os.path.exists(os.path.join(path, "config.json")):
        return None, f"{path} not found (the shared test data)"
    return path, None


def stories_or_tiny(tmp):
    """stories260K when the shared data is there, else a tiny random Qwen3 (f32, seed 3) made in
    `tmp`: for tests that need a small real-shaped model but not stories260K's weights."""
    path, _ = shared_model("stories260K-hf")
    if path:
        return path
    path = os.path.join(tmp, "tiny")
    run_cli(["make-model", "--arch", "qwen3", "--preset", "tiny", "--dtype", "f32",
             "--seed", 3, "--out", path])
    return path


def make_tmpdir(prefix):
    base = os.environ.get("NANOVLLM_BUILD_DIR")
    if base and os.path.isdir(base):
        return tempfile.mkdtemp(prefix=prefix, dir=base)
    return tempfile.mkdtemp(prefix=prefix)


def remove_tree(path):
    shutil.rmtree(path, ignore_errors=True)


def run_cli(args, timeout=600):
    """Runs `nanovllm args...`; a non-zero exit (e.g. 'unknown command' while the command is not
    written yet) raises with the CLI's stderr, so the calling test fails rather than skips."""
    cmd = [nanovllm_bin()] + [str(a) for a in args]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"`{' '.join(cmd)}` exited {p.returncode}:\n{p.stderr.strip()[-2000:]}")
    return p.stdout


def cli_logits(model_dir, ids, out_path):
    run_cli(["logits", "--model", model_dir, "--prompt-ids", ",".join(map(str, ids)), "--out", out_path])
    a = np.load(out_path)
    if a.dtype != np.float32:
        raise AssertionError(f"logits .npy dtype {a.dtype}, expected float32")
    return a


def cli_generate(model_dir, ids, n):
    out = run_cli(["generate", "--model", model_dir, "--prompt-ids", ",".join(map(str, ids)),
                   "--max-tokens", n, "--temperature", 0, "--ignore-eos", "--json"])
    try:
        r = json.loads(out)
    except ValueError:
        raise AssertionError(f"generate --json printed no JSON:\n{out[-1000:]}")
    return [int(t) for t in r["outputs"][0]["token_ids"]]


def rel_err(c, r):
    """max|c - r| / max|r| over all entries."""
    return float(np.max(np.abs(c.astype(np.float64) - r)) / np.max(np.abs(r)))


class Runner:
    """Runs named cases, prints PASS/FAIL lines, and gives the exit status."""

    def __init__(self):
        self.failed = []

    def case(self, name, fn, *args):
        """Returns fn's result, or None when it raised (the case then counts as failed)."""
        try:
            result = fn(*args)
            print(f"PASS: {name}", flush=True)
            return result
        except Exception as e:  # report and go on so every case's numbers get printed
            print(f"FAIL: {name}: {type(e).__name__}: {e}", flush=True)
            self.failed.append(name)
            return None

    def exit_code(self):
        if self.failed:
            print(f"{len(self.failed)} case(s) failed: {', '.join(self.failed)}")
            return 1
        print("all cases passed")
        return 0
