#!/usr/bin/env bash
# One command for a GPU machine: configure + build with the CUDA backend and GPU tests, run the
# kernel tests, then the end-to-end and benchmark steps, logging each step under $OUT (or
# ./gpu-check-out) and printing a summary table last. A failing step is recorded and the
# script goes on; the exit status is 1 if any step failed. Two files land in $OUT
# (gpu-check.log with every step's log, and summary.txt): the device tool returns at most 8.
#
#   OUT=/some/dir scripts/gpu-check.sh [model_dir]
# Env: CUDA_ARCH (default 90), BUILD_DIR (default build-gpu), JOBS (default nproc),
#      NANOVLLM_MODEL (model folder for the e2e / bench steps; also the first argument).
set -u
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${OUT:-$ROOT/gpu-check-out}"
BUILD="${BUILD_DIR:-$ROOT/build-gpu}"
ARCH="${CUDA_ARCH:-90}"
JOBS="${JOBS:-$(nproc)}"
MODEL="${1:-${NANOVLLM_MODEL:-}}"
mkdir -p "$OUT"
# Per-step logs go to LOGDIR and are concatenated into $OUT/gpu-check.log at the end: the device
# tool brings back at most 8 files.
LOGDIR="${TMPDIR:-/tmp}/gpu-check-logs"
rm -rf "$LOGDIR"; mkdir -p "$LOGDIR"
SUMMARY=()
FAILED=0

# step NAME COMMAND...: runs COMMAND with output to $LOGDIR/NAME.log, records status and time.
step() {
  local name="$1"; shift
  local log="$LOGDIR/$name.log" t0 t1 rc
  t0=$(date +%s)
  echo "=== $name: $*" | tee "$log"
  ( cd "$ROOT" && "$@" ) >>"$log" 2>&1
  rc=$?
  t1=$(date +%s)
  if [ $rc -eq 0 ]; then status=PASS; elif [ $rc -eq 77 ]; then status=SKIP; else status="FAIL($rc)"; FAILED=1; fi
  SUMMARY+=("$(printf '%-14s %-10s %6ss  %s' "$name" "$status" "$((t1 - t0))" "$log")")
  echo "=== $name: $status" | tee -a "$log"
  tail -n 5 "$log"
}

skip() {  # skip NAME REASON
  SUMMARY+=("$(printf '%-14s %-10s %6ss  %s' "$1" "SKIP" 0 "$2")")
}

step env bash -c 'uname -a; cmake --version; nvcc --version; nvidia-smi'
# Until the top level has `add_subdirectory(tests/gpu)`, this hook (run at the end of the top
# level's configure) adds the GPU tests itself; it does nothing once the target exists.
HOOK="${TMPDIR:-/tmp}/nanovllm_gpu_tests_hook.cmake"
cat >"$HOOK" <<'HOOK_EOF'
cmake_language(DEFER DIRECTORY ${CMAKE_SOURCE_DIR} CALL _nv_gpu_tests_hook)
macro(_nv_gpu_tests_hook)
  if(NANOVLLM_CUDA AND NOT TARGET gpu_tests)
    include(${CMAKE_SOURCE_DIR}/tests/gpu/CMakeLists.txt)
  endif()
endmacro()
HOOK_EOF
step configure cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DNANOVLLM_CUDA=ON -DNANOVLLM_GPU_TESTS=ON -DCMAKE_CUDA_ARCHITECTURES="$ARCH" \
  -DCMAKE_PROJECT_INCLUDE="$HOOK"
# -k 0: keep building the other targets when one fails, so gpu_tests still gets built.
step build cmake --build "$BUILD" -j "$JOBS" -- -k 0
if [ -x "$BUILD/gpu_tests" ] || [ -x "$BUILD/tests/gpu/gpu_tests" ]; then
  GT="$BUILD/gpu_tests"; [ -x "$GT" ] || GT="$BUILD/tests/gpu/gpu_tests"
  step gpu_tests "$GT"
else
  skip gpu_tests "gpu_tests was not built (is tests/gpu added to the top-level CMakeLists.txt?)"
fi
step unit_tests ctest --test-dir "$BUILD" -L unit --output-on-failure -j 4

NV="$BUILD/nanovllm"
if [ ! -x "$NV" ]; then
  skip e2e "nanovllm CLI not built"
else
  MODELS="${MODELS_DIR:-/tmp/nanovllm-models}"
  SMALL="$MODELS/qwen3-small-bf16"
  [ -f "$SMALL/config.json" ] || "$NV" make-model --arch qwen3 --preset small --dtype bf16 --seed 0 --out "$SMALL" >/dev/null
  # CPU and CUDA backends: the same greedy tokens (32) on a random Qwen3 small model.
  step cpu_vs_cuda bash -c "set -e; for d in cpu cuda; do \"$NV\" generate --device \$d --model \"$SMALL\" \
      --prompt-ids 11,22,33,44,55 --max-tokens 32 --temperature 0 --ignore-eos --json > $LOGDIR/gen_\$d.json; done; \
      python3 -c \"import json; a,b=[json.load(open('$LOGDIR/gen_'+d+'.json'))['outputs'][0]['token_ids'] for d in ('cpu','cuda')]; \
      print('cpu ',a); print('cuda',b); assert a==b\""
  # transformers on the same GPU and weights: logits rel err <= 2e-2, first 32 greedy tokens equal.
  step hf_compare python3 "$ROOT/tests/gpu/hf_compare.py" "$NV" "$SMALL"
  # Eager vs default (CUDA graphs, where the runner uses them): identical outputs.
  step eager_vs_graph bash -c "set -e; \"$NV\" generate --device cuda --model \"$SMALL\" --prompt-ids 1,2,3 --max-tokens 32 \
      --temperature 0 --ignore-eos --json > $LOGDIR/g1.json; \"$NV\" generate --device cuda --enforce-eager --model \"$SMALL\" \
      --prompt-ids 1,2,3 --max-tokens 32 --temperature 0 --ignore-eos --json > $LOGDIR/g2.json; \
      python3 -c \"import json; a,b=[json.load(open('$LOGDIR/'+f))['outputs'][0]['token_ids'] for f in ('g1.json','g2.json')]; assert a==b\""
  # The exact bench.py workload on a Qwen3-0.6B-shaped bf16 model.
  BIG="${MODEL:-$MODELS/qwen3-0.6b-bf16}"
  [ -f "$BIG/config.json" ] || "$NV" make-model --arch qwen3 --preset qwen3-0.6b --dtype bf16 --seed 0 --out "$BIG" >/dev/null
  step bench "$NV" bench --device cuda --model "$BIG" --json --no-progress
fi

echo
echo "================ gpu-check summary ($(date -u +%FT%TZ)) ================"
printf '%-14s %-10s %7s  %s\n' STEP STATUS TIME LOG
for line in "${SUMMARY[@]}"; do echo "$line"; done | tee "$OUT/summary.txt"
cat "$LOGDIR"/*.log > "$OUT/gpu-check.log" 2>/dev/null
exit $FAILED
