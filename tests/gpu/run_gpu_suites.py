"""Runs a GoogleTest binary (gpu_tests) one suite per process, so that a device fault, which leaves
the CUDA context unusable, fails only the suite that caused it and not every later test. The
conformance table (one parameterized suite of a few hundred cases) is split further, by the
first word of the case name (the op: attention_..., rms_norm_..., linear_...).

After the first failing unit, that unit's failed tests (or the whole unit, if it crashed before
naming one) run again under `compute-sanitizer --tool memcheck`; its log is kept beside the unit
logs and its first errors are printed.

    run_gpu_suites.py GTEST_BINARY --log-dir DIR [--unit-timeout S] [--sanitizer PATH|none]

Prints one line per unit and, last, GoogleTest-style totals ("[  PASSED  ] N tests." and
"[  FAILED  ] M tests, listed below:") that gpu_summary.test_counts reads. Exit 0 when every
unit passed, 1 otherwise.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import time

SPLIT_ABOVE = 40  # a suite with more tests than this is split by case-name prefix


def list_tests(binary):
    """[(suite, test)] from --gtest_list_tests (parameterized names included, comments dropped)."""
    out = subprocess.run([binary, "--gtest_list_tests"], capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise RuntimeError(f"{binary} --gtest_list_tests: exit {out.returncode}: {out.stderr[-500:]}")
    tests, suite = [], None
    for line in out.stdout.splitlines():
        if not line.strip():
            continue
        if not line.startswith(" "):
            suite = line.split("#")[0].strip().rstrip(".")
        elif suite:
            tests.append((suite, line.split("#")[0].strip()))
    return tests


def units(tests):
    """[(unit name, gtest filter)]: one per suite; a big suite one per case-name prefix."""
    by_suite = {}
    for suite, test in tests:
        by_suite.setdefault(suite, []).append(test)
    out = []
    for suite, names in by_suite.items():
        if len(names) <= SPLIT_ABOVE:
            out.append((suite, f"{suite}.*"))
            continue
        groups = {}
        for n in names:
            case = n.split("/", 1)[1] if "/" in n else n  # MatchesReference/<case>
            groups.setdefault(case.split("_", 1)[0], []).append(n)
        for prefix, members in groups.items():
            out.append((f"{suite}:{prefix}", ":".join(f"{suite}.{m}" for m in members)))
    return out


def run_unit(binary, gfilter, log_path, timeout):
    """(passed, skipped, failed names, crashed, seconds, exit code) of one process."""
    t0 = time.time()
    with open(log_path, "w") as log:
        try:
            p = subprocess.run([binary, f"--gtest_filter={gfilter}"], stdout=log, stderr=subprocess.STDOUT,
                               timeout=timeout)
            rc = p.returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
    with open(log_path, errors="replace") as f:
        text = f.read()
    passed = re.search(r"\[  PASSED  \] (\d+) tests?", text)
    skipped = re.search(r"\[  SKIPPED \] (\d+) tests?", text)
    failed = re.findall(r"^\[  FAILED  \] (\S+?)(?:,| \(|$)", text, re.M)
    failed = sorted({n for n in failed if "." in n})
    crashed = rc not in (0, 1) or (rc == 1 and not failed)
    return (int(passed.group(1)) if passed else 0), (int(skipped.group(1)) if skipped else 0), failed, crashed, \
        time.time() - t0, rc


def find_sanitizer(arg):
    if arg == "none":
        return None
    if arg != "auto":
        return arg
    for c in (shutil.which("compute-sanitizer"), "/usr/local/cuda/bin/compute-sanitizer"):
        if c and os.access(c, os.X_OK):
            return c
    return None


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--log-dir", required=True)
    ap.add_argument("--unit-timeout", type=int, default=150)
    ap.add_argument("--sanitizer", default="auto", help="compute-sanitizer path, 'auto' or 'none'")
    ap.add_argument("--sanitizer-timeout", type=int, default=240)
    a = ap.parse_args(argv)
    os.makedirs(a.log_dir, exist_ok=True)
    tests = list_tests(a.binary)
    plan = units(tests)
    print(f"{len(tests)} tests in {len(plan)} processes", flush=True)
    total_pass, total_skip, all_failed, first_bad = 0, 0, [], None
    for name, gfilter in plan:
        log = os.path.join(a.log_dir, "unit-" + re.sub(r"[^A-Za-z0-9_.-]", "_", name) + ".log")
        passed, skipped, failed, crashed, secs, rc = run_unit(a.binary, gfilter, log, a.unit_timeout)
        total_pass += passed
        total_skip += skipped
        bad = failed or crashed
        state = "ok" if not bad else ("CRASHED (exit %s)" % rc if crashed else "FAILED")
        print(f"  {name}: {passed} passed, {len(failed)} failed, {state} ({secs:.1f} s)", flush=True)
        if crashed and not failed:
            all_failed.append(f"{name} (exit {rc}, no test named)")
        all_failed += failed
        if bad:
            with open(log, errors="replace") as f:
                print("    | " + "\n    | ".join(f.read().splitlines()[-15:]), flush=True)
            if first_bad is None:
                first_bad = (name, ":".join(failed) if failed else gfilter)
    if first_bad:
        san = find_sanitizer(a.sanitizer)
        name, gfilter = first_bad
        if san:
            slog = os.path.join(a.log_dir, "sanitizer.log")
            print(f"compute-sanitizer on {name}: {gfilter[:200]} (log {slog})", flush=True)
            try:
                subprocess.run([san, "--tool", "memcheck", "--log-file", slog, a.binary,
                                f"--gtest_filter={gfilter}"], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, timeout=a.sanitizer_timeout)
            except subprocess.TimeoutExpired:
                print(f"  compute-sanitizer stopped after {a.sanitizer_timeout} s", flush=True)
            try:
                with open(slog, errors="replace") as f:
                    lines = [l for l in f.read().splitlines() if l.strip()]
                print("  " + "\n  ".join(lines[:40]), flush=True)
            except OSError:
                print("  (no sanitizer log)")
        else:
            print("compute-sanitizer not found: no memcheck rerun", flush=True)
    print(f"[  PASSED  ] {total_pass} tests.")
    if total_skip:
        print(f"[  SKIPPED ] {total_skip} tests.")
    if all_failed:
        print(f"[  FAILED  ] {len(all_failed)} tests, listed below:")
        for n in all_failed:
            print(f"[  FAILED  ] {n}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
