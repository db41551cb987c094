"""Shared fixtures of the Python package tests (pytest; ctest runs each file, see
tests/CMakeLists.txt). The package comes from PYTHONPATH (build/python for the in-tree build,
or an installed one); models are made with the CLI's `make-model`."""
import os
import subprocess

import pytest

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("NANOVLLM_BIN", os.path.join(SRC, "build", "nanovllm"))
SHARED = os.environ.get("NANOVLLM_SHARED_DATA", os.path.join(SRC, "..", "shared", "data"))
# One engine thread unless told otherwise: ctest runs several test files at once on few cores.
os.environ.setdefault("NANOVLLM_NUM_THREADS", "1")


def make_model(out_dir, preset="tiny", seed=0, arch="qwen3"):
    """A random model in HF format (Qwen3 by default; the Qwen3 tokenizer and chat template
    included)."""
    if not os.path.exists(BIN):
        pytest.skip(f"nanovllm CLI not found at {BIN} (build it, or set NANOVLLM_BIN)")
    subprocess.run([BIN, "make-model", "--arch", arch, "--preset", preset, "--dtype", "bf16",
                    "--seed", str(seed), "--out", str(out_dir)],
                   check=True, capture_output=True, timeout=300)
    if not os.path.exists(os.path.join(out_dir, "tokenizer_config.json")):
        pytest.skip("make-model wrote no tokenizer: npm tokenizer packages missing (make deps)")
    return str(out_dir)


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory):
    """Qwen3 architecture, 2 layers, hidden 64, the real Qwen3 vocabulary (151936)."""
    return make_model(tmp_path_factory.mktemp("models") / "qwen3-tiny")


def run_cli(*args, timeout=300):
    """Runs the nanovllm CLI; returns its stdout (fails the test on a non-zero exit)."""
    p = subprocess.run([BIN, *map(str, args)], capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, f"nanovllm {' '.join(map(str, args))} exited {p.returncode}: " \
                              f"{p.stderr[-2000:]}"
    return p.stdout


def thread_count():
    return len(os.listdir("/proc/self/task"))


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
