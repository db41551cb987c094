"""Issue 16: with one core kept busy by another process, a default (all cores) generation is
not much slower than what one thread gets under the same busy loop, and nowhere near the old
collapse (64 stories260K tokens went from 0.004 s to 13 s: the pool's threads waited on a thread
descheduled behind the busy loop; see src/util/team_sizer.h).

Models: stories260K (real, tiny: its ops now run on one thread) and a random Qwen3 `small` model
(its LM head and MLP run multithreaded). Each runs 64 greedy tokens with the busy loop pinned to
CPU 0, to CPU 1 and unpinned, and without it; the conditions alternate, best of 3 each, and the
greedy tokens must not change. Bounds (generous: shared CI boxes are noisy):
  default threads, busy  <=  1.5 x (--threads 1, same busy loop) + 0.05 s
  default threads, busy  <=  6 x (default threads, idle) + 0.1 s
The in-process generation time (`seconds` of --json) is compared, not process start-up.

A bound missed after 3 rounds gets up to 2 more sets of 3 (the best of all rounds counts). Why:
one CI run measured the small model at 1.70x the one-thread time on cpu 0 (0.50 s vs 0.30 s)
where a 2-core AMD EPYC VM measured 1.06-1.30x in 9 runs of 3 rounds (2026-11-30); a real
regression (the pool waiting a time slice per region) misses by 10-1000x in every round."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
import e2e_util as U  # noqa: E402

TOKENS = 64
REPS = 3
EXTRA_SETS = 2
BUSY = {"idle": None, "cpu 0": 0, "cpu 1": 1, "unpinned": -1}


def start_busy(cpu):
    if cpu is None:
        return None
    cmd = [sys.executable, "-c", "while True: pass"]
    if cpu >= 0:
        return subprocess.Popen(cmd, preexec_fn=lambda: os.sched_setaffinity(0, {cpu}))
    return subprocess.Popen(cmd)


def generate(model, threads):
    args = ["generate", "--model", model, "--prompt-ids", "1,2,3", "--max-tokens", TOKENS,
            "--temperature", 0, "--ignore-eos", "--json"]
    if threads:
        args += ["--threads", threads]
    r = json.loads(U.run_cli(args, timeout=300))
    return r["seconds"], r["outputs"][0]["token_ids"]


def measure(model, best, want):
    """One round of every condition; best[(condition, threads)] keeps the minimum seconds."""
    for name, cpu in BUSY.items():
        busy = start_busy(cpu)
        try:
            for threads in ([0] if cpu is None else [0, 1]):
                t, ids = generate(model, threads)
                if not want:
                    want.extend(ids)
                elif ids != want:
                    raise AssertionError(f"{name}, threads {threads}: greedy tokens changed")
                key = (name, threads)
                best[key] = min(best.get(key, t), t)
        finally:
            if busy is not None:
                busy.kill()
                busy.wait()


def missed_bounds(best):
    """The bounds the best times miss (an empty list when all hold); prints the table."""
    idle = best[("idle", 0)]
    print(f"  idle: {idle:.4f} s", flush=True)
    missed = []
    for name, cpu in BUSY.items():
        if cpu is None:
            continue
        t, one = best[(name, 0)], best[(name, 1)]
        print(f"  busy loop {name}: {t:.4f} s = {t / idle:.2f}x idle; one thread under the same "
              f"busy loop {one:.4f} s", flush=True)
        if t > 1.5 * one + 0.05:
            missed.append(f"busy loop {name}: {t:.4f} s > 1.5 x {one:.4f} (one thread) + 0.05")
        if t > 6 * idle + 0.1:
            missed.append(f"busy loop {name}: {t:.4f} s > 6 x {idle:.4f} (idle) + 0.1")
    return missed


def check(model):
    best = {}  # (condition, threads) -> seconds
    want = []
    for _ in range(REPS):
        measure(model, best, want)
    missed = missed_bounds(best)
    for extra in range(EXTRA_SETS):
        if not missed:
            return
        print(f"  missed ({'; '.join(missed)}): {REPS} more rounds ({extra + 1} of {EXTRA_SETS})",
              flush=True)
        for _ in range(REPS):
            measure(model, best, want)
        missed = missed_bounds(best)
    if missed:
        raise AssertionError("; ".join(missed))


def main():
    if len(os.sched_getaffinity(0)) < 2 or not {0, 1} <= os.sched_getaffinity(0):
        print("SKIP: needs CPUs 0 and 1")
        return U.SKIP
    run = U.Runner()
    tmp = U.make_tmpdir("contention-")
    try:
        shared = os.environ.get("NANOVLLM_SHARED_DATA", "")
        stories = os.path.join(shared, "models", "stories260K-hf")
        if os.path.isdir(stories):
            run.case("stories260K", check, stories)
        else:
            print(f"stories260K skipped: {stories} not found")
        small = os.path.join(tmp, "small")
        U.run_cli(["make-model", "--arch", "qwen3", "--preset", "small", "--dtype", "bf16",
                   "--seed", "0", "--out", small])
        run.case("random qwen3 small", check, small)
    finally:
        U.remove_tree(tmp)
    return run.exit_code()


if __name__ == "__main__":
    sys.exit(main())
