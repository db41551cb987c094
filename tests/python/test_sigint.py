"""Ctrl-C: a process running a long generate() that receives SIGINT raises KeyboardInterrupt
promptly (between engine steps), its requests are aborted, no thread is left behind, and the
same LLM generates again afterwards."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

CHILD = textwrap.dedent("""
    import json, os, sys, time
    from nanovllm import LLM, SamplingParams

    def threads():
        return len(os.listdir("/proc/self/task"))

    llm = LLM(sys.argv[1], num_threads=2, num_kvcache_blocks=512, kvcache_block_size=16)
    llm.generate(["warm up"], SamplingParams(max_tokens=4))  # starts workers (and tqdm's bar)
    report = {"threads_before": threads()}
    print("READY", flush=True)
    try:
        # Minutes of work: only an interrupt ends it in time.
        llm.generate([[7] * 64] * 32, SamplingParams(max_tokens=4000, ignore_eos=True))
        report["interrupted"] = False
    except KeyboardInterrupt:
        report["interrupted"] = True
        report["t_interrupt"] = time.monotonic()  # system-wide clock: comparable with the parent
    report["threads_after"] = threads()
    report["finished"] = llm.is_finished()
    report["aborted"] = llm.stats().aborted_requests
    out = llm.generate(["again"], SamplingParams(temperature=0, max_tokens=5), use_tqdm=False)
    report["reused_tokens"] = len(out[0]["token_ids"])
    print("REPORT " + json.dumps(report), flush=True)
""")


def test_sigint_interrupts_generate(tiny_model):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    child = subprocess.Popen([sys.executable, "-c", CHILD, tiny_model], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = child.stdout.readline()
        assert line.strip() == "READY", (line, child.stderr.read() if child.poll() is not None else "")
        time.sleep(0.5)  # well into the long generate
        t0 = time.monotonic()
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 0, err[-3000:]
    report = json.loads(next(l for l in out.splitlines() if l.startswith("REPORT "))[7:])
    assert report["interrupted"], report
    # Steps of this model take milliseconds; the interrupt must not wait for the whole batch.
    latency = report["t_interrupt"] - t0
    assert latency < 2, f"KeyboardInterrupt came {latency:.2f} s after SIGINT"
    assert report["finished"] and report["aborted"] == 32, report
    assert report["threads_after"] <= report["threads_before"], report
    assert report["reused_tokens"] == 5, report
