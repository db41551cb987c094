#!/usr/bin/env bash
# make fuzz-smoke (tests/fuzz/README.md): every libFuzzer target that `make fuzz` built in
# $1 (default build-fuzz) runs for FUZZ_SECONDS (default 5) on its corpus tests/fuzz/corpus/<name>
# when there is one (read only: new inputs go to $1/fuzz-smoke/<name>/new). Any finding (crash,
# sanitizer report, leak, timeout, invariant abort) fails the check; the reproducer and the log
# are left in $1/fuzz-smoke/<name>/.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD_FUZZ=${1:-build-fuzz}
SECS=${FUZZ_SECONDS:-5}

failed=()
for src in tests/fuzz/*_fuzz.cc; do
  name=$(basename "$src" _fuzz.cc)
  bin=$BUILD_FUZZ/fuzz_$name
  if [ ! -x "$bin" ]; then
    echo "fuzz-smoke: $name: $bin was not built"
    failed+=("$name")
    continue
  fi
  work=$BUILD_FUZZ/fuzz-smoke/$name
  rm -rf "$work"
  mkdir -p "$work/new"
  corpus=()
  [ -d "tests/fuzz/corpus/$name" ] && corpus=("tests/fuzz/corpus/$name")
  start=$SECONDS
  "$bin" -max_total_time="$SECS" -timeout=30 -print_final_stats=1 \
    -artifact_prefix="$work/" "$work/new" "${corpus[@]}" >"$work/log" 2>&1
  rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log")
  what="${corpus[*]:-no corpus}"
  if [ $rc -ne 0 ]; then
    echo "fuzz-smoke: $name: FAILED (exit $rc, $what); log $work/log:"
    tail -n 40 "$work/log"
    failed+=("$name")
  else
    echo "fuzz-smoke: $name: ok (${runs:-?} inputs in $((SECONDS - start)) s, $what)"
  fi
done
if ((${#failed[@]})); then
  echo "fuzz-smoke: findings in: ${failed[*]}"
  exit 1
fi
