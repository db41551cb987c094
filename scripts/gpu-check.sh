#!/usr/bin/env bash
# gpu-check: everything nanovllm verifies and measures on a GPU, in ONE device call of at most
# 10 minutes on a bare H100/H200 machine (nvcc, CMake, ninja, PyTorch, transformers; no Debian
# -dev packages, no network).
#
# Before the call, on the CPU machine, in the checkout the session sends (its repo root):
#     scripts/gpu-bundle.sh          # -> .gpu-bundle/ (git-ignored, 9.3 MB): the -dev .debs
#                                    #    and stories260K
# The device call (tool `run`):
#     command:   bash scripts/gpu-check.sh
#     carry:     [".gpu-bundle"]          (and "gpu-check-prev" when resuming, see below)
#     timeout_s: 600
# What comes back in $OUT (3 files): summary.txt (the table, also printed last), summary.json
# (every step's status, time and measurements) and gpu-check.log (every step's full output).
#
# Steps, in the order that returns performance figures first (each logs; a failing step is
# recorded and the script goes on; a step that would overrun the time budget is cut short or
# skipped):
#   env, build (scripts/gpu-build.sh: unpack the bundle, configure -DNANOVLLM_MINIMAL=ON for
#   sm_90, ninja), gpu_tests (the CUDA op tests and the backend conformance table, one process
#   per suite by tests/gpu/run_gpu_suites.py: a device fault fails its own suite only, and the
#   first failing suite is rerun under compute-sanitizer), attention_bench (decode attention
#   GB/s vs the HBM read pass, kernels v1 and v2), gemm_bench (cuBLASLt TFLOP/s vs peak), models (random
#   Qwen3-0.6B-shaped bf16 and `small` bf16; stories260K from the bundle), bench (`nanovllm
#   bench`: bench.py's 256-sequence workload; decode attention v2 is the default since the first
#   GPU run), bench_candidates (the same with the candidate prefill kernel:
#   NANOVLLM_CUDA_PREFILL=tc), decode_step (step wall time, graphs vs eager),
#   decode_step_skinny / decode_step_cublas (the same with NANOVLLM_CUDA_GEMM=skinny / cublas;
#   cpu_vs_cuda_skinny the skinny kernel's gate),
#   step_split (the step's host phases vs the device forward, from the engine's trace), ncu_top
#   (the decode kernels' time shares and DRAM GB/s under Nsight Compute; ncu_top_bs1 the same at
#   batch 1),
#   cpu_vs_cuda (gate: stories260K; the random models' agreement is a figure), new_arch_cuda
#   (Qwen3-MoE, Mistral, Gemma 3 random models against the CPU backend), gguf_cuda (GGUF files
#   on CUDA against their exact dequantization on the CPU), hf_compare
#   (transformers on the same GPU and weights), hf_compare_tc (the same with the tc prefill, the
#   accuracy half of making it the default), eager_vs_graph, engine_e2e_cuda (the engine
#   tests on --device cuda; engine_e2e_cuda_tc with the tc prefill), determinism
#   (docs/determinism.md measured on CUDA), hf_bench
#   (transformers' continuous batching on the same workload:
#   it gets what is left of the budget), tp_cuda (whether tensor parallelism could run on CUDA
#   here: NCCL linked, GPU count). The CPU unit tests are not run here: CI runs them.
#
# Resuming: a second call skips every step that PASSED in an earlier call's summary.json and
# carries that step's result into the new summary. Copy the first call's summary.json to
# gpu-check-prev/summary.json in the repo root (git-ignored) and name "gpu-check-prev" in carry
# (or set GPU_CHECK_RESUME=FILE). env, build and models always run (no-ops on a warm machine,
# which also keeps build-gpu/ and /tmp/nanovllm-models between calls).
#
# Env: OUT (default ./gpu-check-out), GPU_BUNDLE (default ./.gpu-bundle), BUILD_DIR (default
# ./build-gpu), CUDA_ARCH (90), JOBS (nproc), GPU_CHECK_BUDGET (seconds, default 560),
# GPU_CHECK_SKIP (space-separated step names to skip), GPU_CHECK_RESUME (an earlier
# summary.json; default ./gpu-check-prev/summary.json when it exists). Exit 1 if any step failed.
set -u
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${OUT:-$ROOT/gpu-check-out}"
BUNDLE="${GPU_BUNDLE:-$ROOT/.gpu-bundle}"
BUILD="${BUILD_DIR:-$ROOT/build-gpu}"
ARCH="${CUDA_ARCH:-90}"
JOBS="${JOBS:-$(nproc)}"
BUDGET="${GPU_CHECK_BUDGET:-560}"
SKIP_STEPS=" ${GPU_CHECK_SKIP:-} "
RESUME="${GPU_CHECK_RESUME:-}"
[ -z "$RESUME" ] && [ -f "$ROOT/gpu-check-prev/summary.json" ] && RESUME="$ROOT/gpu-check-prev/summary.json"
START=$(date +%s)
mkdir -p "$OUT"
LOGDIR="$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXX")"
STEPS="$LOGDIR/steps.tsv"
: >"$STEPS"
MODELS="${MODELS_DIR:-/tmp/nanovllm-models}"
BIG="$MODELS/qwen3-0.6b-bf16"
SMALL="$MODELS/qwen3-small-bf16"
STORIES="$BUNDLE/models/stories260K-hf"
NV="$BUILD/nanovllm"
[ -d /usr/local/cuda/bin ] && export PATH="$PATH:/usr/local/cuda/bin"
PY="$(command -v python3)"
# The image's CMake / ctest may be pip packages beside python3.
CTEST="$(command -v ctest || echo "$(dirname "$PY")/ctest")"
export ROOT BUNDLE BUILD MODELS BIG SMALL STORIES NV LOGDIR PY PYTHONUNBUFFERED=1
FAILED=0

elapsed() { echo $(($(date +%s) - START)); }

# Rewrites $OUT/summary.{txt,json} and $OUT/gpu-check.log (after every step, so that a call
# killed at its limit still brings back everything done so far).
publish() {
  "$PY" "$ROOT/tests/gpu/gpu_summary.py" --steps "$STEPS" --logdir "$LOGDIR" --model "$BIG" \
    --out "$OUT" ${RESUME:+--resume "$RESUME"} >/dev/null 2>"$LOGDIR/summary.err" ||
    cp "$STEPS" "$OUT/summary.txt"
  cut -f1 "$STEPS" | while read -r n; do cat "$LOGDIR/$n.log" 2>/dev/null; done >"$OUT/gpu-check.log"
}

record() {  # record NAME STATUS SECONDS NOTE
  printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$STEPS"
  publish
}

# step NAME CAP_SECONDS COMMAND...: runs COMMAND (from the repo root) with at most CAP seconds
# and what is left of the budget; output to $LOGDIR/NAME.log. Exit 77 = SKIP, 124 = TIMEOUT.
step() {
  local name="$1" cap="$2"; shift 2
  local log="$LOGDIR/$name.log" left limit t0 rc status
  if [[ "$SKIP_STEPS" == *" $name "* ]]; then record "$name" SKIP 0 "GPU_CHECK_SKIP"; return; fi
  # A step that passed in an earlier call (GPU_CHECK_RESUME): its result is carried, not rerun.
  if [ -n "$RESUME" ] && [[ " env build models " != *" $name "* ]] &&
     "$PY" "$ROOT/tests/gpu/gpu_summary.py" --passed-in "$RESUME" --step "$name" 2>/dev/null; then
    echo "=== $name: PASS in an earlier call ($RESUME): not rerun" | tee "$log"
    record "$name" PASS 0 "earlier call"
    return
  fi
  left=$((BUDGET - $(elapsed)))
  if ((left < 15)); then record "$name" SKIP 0 "time budget spent"; return; fi
  limit=$((cap < left - 5 ? cap : left - 5))
  t0=$(date +%s)
  echo "=== [$(elapsed)s] $name (limit ${limit}s): $*" | tee "$log"
  (cd "$ROOT" && timeout -k 5 "$limit" "$@") >>"$log" 2>&1
  rc=$?
  case $rc in
    0) status=PASS ;;
    77) status=SKIP ;;
    124|137) status=TIMEOUT; FAILED=1 ;;
    *) status="FAIL($rc)"; FAILED=1 ;;
  esac
  local note
  note="$(grep -v '^[[:space:]]*$' "$log" | tail -n 1 | cut -c1-200)"
  echo "=== $name: $status ($(($(date +%s) - t0)) s)" | tee -a "$log"
  tail -n 4 "$log" | sed 's/^/    /'
  record "$name" "$status" "$(($(date +%s) - t0))" "$note"
}

need() {  # need NAME PATH...: records SKIP for NAME and returns 1 if a path is missing
  local name="$1"; shift
  for p in "$@"; do
    [ -e "$p" ] || { record "$name" SKIP 0 "missing $p"; return 1; }
  done
}

step env 30 bash -c 'uname -a; nvidia-smi; nvcc --version | tail -1; cmake --version | head -1
  c++ --version | head -1; ldd --version | head -1
  python3 -c "import torch, transformers, numpy; print(\"torch\", torch.__version__, \"transformers\",
    transformers.__version__, \"numpy\", numpy.__version__, torch.cuda.get_device_name(0))"
  git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo "commit: unknown (no .git on this machine)"
  cat "$BUNDLE/MANIFEST.txt"'

step build 330 bash scripts/gpu-build.sh --bundle "$BUNDLE" --build "$BUILD" --arch "$ARCH" \
  --jobs "$JOBS" --keep-going

T="$ROOT/tests/gpu"
# 1. Correctness of the kernels: the conformance table and the GPU unit tests, a process per suite.
GT="$BUILD/tests/gpu/gpu_tests"
need gpu_tests "$GT" &&
  step gpu_tests 200 "$PY" "$T/run_gpu_suites.py" "$GT" --log-dir "$LOGDIR/gpu_tests" --unit-timeout 120

# 2. Microbenchmarks against the hardware: decode attention vs an HBM read pass, GEMM vs peak.
need attention_bench "$BUILD/bench/bench_gpu_decode_attention" && step attention_bench 120 \
  bash -c '"$BUILD/bench/bench_gpu_decode_attention" --json >"$LOGDIR/attention_bench.json"'
need gemm_bench "$BUILD/bench/bench_gpu_gemm" && step gemm_bench 90 \
  bash -c '"$BUILD/bench/bench_gpu_gemm" --json >"$LOGDIR/gemm_bench.json"'

# 3. The workload: nano-vLLM's bench.py on the Qwen3-0.6B shape, and the decode step's time.
need models "$NV" && step models 150 bash -c 'set -e; mkdir -p "$MODELS"
  [ -f "$BIG/config.json" ] ||
    "$NV" make-model --arch qwen3 --preset qwen3-0.6b --dtype bf16 --seed 0 --out "$BIG"
  [ -f "$SMALL/config.json" ] ||
    "$NV" make-model --arch qwen3 --preset small --dtype bf16 --seed 0 --out "$SMALL"
  du -sh "$BIG" "$SMALL" | tr "\n" " "; echo'
need bench "$NV" "$BIG/config.json" && step bench 200 \
  bash -c '"$NV" bench --device cuda --model "$BIG" --json --no-progress >"$LOGDIR/bench.json"'
# The attention kernel that is not the default yet (tensor-core prefill), end to end on the same
# workload; the summary gives its speed relative to `bench`. (Decode v2 became the default after
# the first GPU run, 2026-11-28: 5.3x v1 on this workload.)
need bench_candidates "$NV" "$BIG/config.json" && step bench_candidates 120 \
  env NANOVLLM_CUDA_PREFILL=tc bash -c \
  '"$NV" bench --device cuda --model "$BIG" --json --no-progress >"$LOGDIR/bench_candidates.json"'
need decode_step "$NV" "$BIG/config.json" &&
  step decode_step 100 "$PY" "$T/decode_step.py" "$NV" --json-out "$LOGDIR/decode_step.json" "$BIG"
# The decode linears (BackendOptions::cuda_gemm): the default `auto` takes the skinny kernel at
# T = 1 only; the same step times with `skinny` (T <= 8) and with `cublas` (cuBLASLt throughout).
need decode_step_skinny "$NV" "$BIG/config.json" && step decode_step_skinny 100 env NANOVLLM_CUDA_GEMM=skinny \
  "$PY" "$T/decode_step.py" "$NV" --json-out "$LOGDIR/decode_step_skinny.json" "$BIG"
need decode_step_cublas "$NV" "$BIG/config.json" && step decode_step_cublas 100 env NANOVLLM_CUDA_GEMM=cublas \
  "$PY" "$T/decode_step.py" "$NV" --json-out "$LOGDIR/decode_step_cublas.json" "$BIG"
# The decode step's wall time split into host phases and the device forward (engine trace).
need step_split "$NV" "$BIG/config.json" &&
  step step_split 60 "$PY" "$T/step_split.py" "$NV" --json-out "$LOGDIR/step_split.json" "$BIG"

# Where a decode step's time goes, kernel by kernel (ncu, a window of decode launches).
need ncu_top "$NV" "$BIG/config.json" &&
  step ncu_top 120 "$PY" "$T/ncu_top.py" "$NV" "$BIG" --json-out "$LOGDIR/ncu_top.json"
need ncu_top_bs1 "$NV" "$BIG/config.json" &&
  step ncu_top_bs1 90 "$PY" "$T/ncu_top.py" "$NV" "$BIG" --json-out "$LOGDIR/ncu_top_bs1.json" \
    --num-seqs 1 --prompt-len 64 --output-len 128 --skip 3000 --count 700

# 4. Comparisons: CPU backend, transformers, eager vs graphs, the engine tests on CUDA.
# stories260K (Llama, head_dim 8, real weights) and its Qwen2 twin come from the bundle; they are
# cpu_vs_cuda's pass/fail gate (real logit margins), the random models are reported as figures.
CMP_MODELS=("$SMALL" "$BIG")
for m in "$STORIES" "$BUNDLE/models/stories260K-qwen2-hf"; do
  [ -f "$m/config.json" ] && CMP_MODELS=("$m" "${CMP_MODELS[@]}")
done
need cpu_vs_cuda "$NV" "$BIG/config.json" &&
  step cpu_vs_cuda 180 "$PY" "$T/cpu_vs_cuda.py" "$NV" --json-out "$LOGDIR/cpu_vs_cuda.json" \
    --gate stories260K "${CMP_MODELS[@]}"
# The skinny decode GEMM's correctness end to end: the same gate with NANOVLLM_CUDA_GEMM=skinny
# (decode steps of up to 8 sequences take it), on the small models only.
SK_MODELS=("$SMALL")
[ -f "$STORIES/config.json" ] && SK_MODELS=("$STORIES" "${SK_MODELS[@]}")
need cpu_vs_cuda_skinny "$NV" "$SMALL/config.json" && step cpu_vs_cuda_skinny 120 env NANOVLLM_CUDA_GEMM=skinny \
  "$PY" "$T/cpu_vs_cuda.py" "$NV" --json-out "$LOGDIR/cpu_vs_cuda_skinny.json" --gate stories260K "${SK_MODELS[@]}"
# The architectures added after the first GPU run (issue 28), random bf16 weights: Qwen3-MoE (the
# router and expert ops; tiny has a dense layer too), Mistral (sliding window 16) and Gemma 3
# (local/global layers, window 16, GELU-tanh, (1 + w) norms). Gates: their logits against our
# CPU backend within 2e-2, greedy tokens equal up to near ties. qwen3_moe-small (16 experts, top
# 4) is a figure: its router has near-ties that bf16 activations flip (H200, 2026-11-30: 9.0e-2,
# top-1 64/64); tests/reference/moe_router_margins.py, run here, prints how many flip from a bf16
# router input alone and how far that moves the logits.
need new_arch_cuda "$NV" && step new_arch_cuda 150 bash -c 'set -e
  ms=()
  for spec in qwen3_moe:tiny qwen3_moe:small mistral:tiny gemma3_text:tiny; do
    a="${spec%%:*}"; p="${spec#*:}"; d="$MODELS/$a-$p-bf16"
    [ -f "$d/config.json" ] || "$NV" make-model --arch "$a" --preset "$p" --dtype bf16 --seed 0 --out "$d" >/dev/null
    ms+=("$d")
  done
  timeout --foreground 40 "$PY" "$ROOT/tests/reference/moe_router_margins.py" "$MODELS/qwen3_moe-small-bf16" || true
  exec "$PY" "$ROOT/tests/gpu/cpu_vs_cuda.py" "$NV" --json-out "$LOGDIR/new_arch_cuda.json" \
    --gate qwen3_moe-tiny --gate mistral --gate gemma3_text "${ms[@]}"'
# GGUF files on CUDA (issue 29): the engine loads their exact dequantization there (auto means
# none on CUDA). Files written by tests/reference/gguf_ref.py (numpy): stories260K in Q8_0 and
# Q4_K_M (its 64-wide rows fall back to Q5_0 / Q8_0, the legacy types), the random small Qwen3
# in Q4_K_M (Q4_K and Q6_K). CPU reference: the same file with --quantization none (the exact
# dequantized weights, f32); stories260K gates.
need gguf_cuda "$NV" "$SMALL/config.json" "$STORIES/config.json" && step gguf_cuda 150 bash -c 'set -e
  G="$MODELS/gguf"; mkdir -p "$G"
  files=()
  conv() {  # written under a temporary name: a killed conversion leaves no file to reuse
    [ -f "$G/$3" ] || { "$PY" "$ROOT/tests/reference/gguf_ref.py" convert "$1" "$G/$3.tmp" --type "$2" &&
                        mv "$G/$3.tmp" "$G/$3"; } && files+=("$G/$3")
  }
  conv "$STORIES" Q8_0 stories260K-q8_0.gguf
  conv "$STORIES" Q4_K_M stories260K-q4_k_m.gguf
  # (gguf_ref.py needs a tokenizer.json: make-model writes one only where the npm tokenizer
  # packages are, so this one may be skipped)
  conv "$SMALL" Q4_K_M qwen3-small-q4_k_m.gguf || echo "qwen3-small: not converted (no tokenizer.json?): skipped"
  exec "$PY" "$ROOT/tests/gpu/cpu_vs_cuda.py" "$NV" --json-out "$LOGDIR/gguf_cuda.json" \
    --cpu-arg=--quantization=none --gate stories260K "${files[@]}"'
HF_MODELS=("$BIG")
for m in "$BUNDLE/models/stories260K-hf-bf16" "$STORIES"; do
  [ -f "$m/config.json" ] && HF_MODELS=("$m" "${HF_MODELS[@]}")
done
need hf_compare "$NV" "$BIG/config.json" &&
  step hf_compare 180 "$PY" "$T/hf_compare.py" "$NV" --json-out "$LOGDIR/hf_compare.json" "${HF_MODELS[@]}"
# The tc prefill against transformers (it rounds P to bf16 before P.V): its accuracy gate.
need hf_compare_tc "$NV" "$BIG/config.json" && step hf_compare_tc 120 env NANOVLLM_CUDA_PREFILL=tc \
  "$PY" "$T/hf_compare.py" "$NV" --json-out "$LOGDIR/hf_compare_tc.json" "${HF_MODELS[@]}"
need eager_vs_graph "$NV" "$BIG/config.json" &&
  step eager_vs_graph 120 "$PY" "$T/eager_vs_graph.py" "$NV" --json-out "$LOGDIR/eager_vs_graph.json" "$BIG"
# docs/determinism.md on CUDA: same-config reruns must repeat; batch layout, batch 1 and chunked
# prefill are measured (identical sequences, largest logprob difference).
DET_MODELS=("$SMALL")
[ -f "$STORIES/config.json" ] && DET_MODELS=("$STORIES" "${DET_MODELS[@]}")
need determinism "$NV" "$SMALL/config.json" &&
  step determinism 90 "$PY" "$T/determinism.py" "$NV" --json-out "$LOGDIR/determinism.json" "${DET_MODELS[@]}"
need engine_e2e_cuda "$BUILD/tests/test_engine_e2e" &&
  step engine_e2e_cuda 120 env NANOVLLM_TEST_DEVICE=cuda "$BUILD/tests/test_engine_e2e"
# The same with the tc prefill (its accuracy passed hf_compare_tc on 2026-11-30): the engine half
# of making it the default.
need engine_e2e_cuda_tc "$BUILD/tests/test_engine_e2e" && step engine_e2e_cuda_tc 120 \
  env NANOVLLM_TEST_DEVICE=cuda NANOVLLM_CUDA_PREFILL=tc "$BUILD/tests/test_engine_e2e"

# 5. transformers' own continuous batching gets what is left: it stops itself 20 s before the
# budget ends (after its own model load and warm-up), and reports the requests finished by then.
need hf_bench "$BIG/config.json" &&
  step hf_bench 400 "$PY" "$T/hf_bench.py" "$BIG" --json-out "$LOGDIR/hf_bench.json" \
    --stop-at "$((START + BUDGET - 20))"

# 6. Could tensor parallelism run on CUDA here? (NCCL linked into the build, and >= 2 GPUs.)
step tp_cuda 10 bash -c 'lib="$(sed -n "s/^NCCL_LIB:FILEPATH=//p" "$BUILD/CMakeCache.txt" 2>/dev/null)"
  gpus="$(nvidia-smi -L 2>/dev/null | grep -c "^GPU")"
  case "$lib" in *NOTFOUND*|"") echo "TP on CUDA: no (NCCL not found at configure time; $gpus GPU(s))"; exit 0;; esac
  if [ "$gpus" -ge 2 ]; then echo "TP on CUDA: possible (NCCL $lib, $gpus GPUs)"
  else echo "TP on CUDA: NCCL linked ($lib) but only $gpus GPU here: not run"; fi'

publish
echo
cat "$OUT/summary.txt"
cat "$LOGDIR/summary.err" 2>/dev/null
echo "total $(elapsed) s; files in $OUT: $(ls "$OUT" | tr '\n' ' ')"
exit $FAILED
