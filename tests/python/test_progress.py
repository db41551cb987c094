"""generate()'s progress bar: tqdm's (nano-vLLM's look: prompts done, Prefill/Decode tok/s) when
use_tqdm, nothing otherwise; without tqdm, the engine's own bar on a terminal."""
import os
import subprocess
import sys
import textwrap

import pytest

import nanovllm.progress
from nanovllm import LLM, SamplingParams


@pytest.fixture(scope="module")
def llm(tiny_model):
    return LLM(tiny_model, num_kvcache_blocks=32, kvcache_block_size=16)


def test_tqdm_bar(llm, capsys):
    if nanovllm.progress._tqdm is None:
        pytest.skip("tqdm is not installed (python3-tqdm)")
    llm.generate(["a", "b", "c"], SamplingParams(max_tokens=8))
    err = capsys.readouterr().err
    assert "Generating" in err and "3/3" in err, err
    assert "Prefill=" in err and "Decode=" in err and "tok/s" in err, err
    llm.generate(["a", "b", "c"], SamplingParams(max_tokens=8), use_tqdm=False)
    assert capsys.readouterr().err == ""


def test_fallback_bar_on_a_terminal(tiny_model):
    child = textwrap.dedent("""
        import sys
        import nanovllm.progress
        nanovllm.progress._tqdm = None  # as if tqdm were not installed
        from nanovllm import LLM, SamplingParams
        llm = LLM(sys.argv[1], num_kvcache_blocks=32, kvcache_block_size=16)
        llm.generate(["a", "b"], SamplingParams(max_tokens=8))
    """)
    master, slave = os.openpty()
    try:
        p = subprocess.run([sys.executable, "-c", child, tiny_model], stderr=slave,
                           stdout=subprocess.PIPE, timeout=120)
        os.close(slave)
        slave = None
        out = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: the terminal's other end is closed and drained
                break
            if not chunk:
                break
            out += chunk
    finally:
        os.close(master)
        if slave is not None:
            os.close(slave)
    text = out.decode("utf-8", "replace")
    assert p.returncode == 0, text
    assert "Generating [" in text and "2/2" in text and "Prefill" in text, text
