// Backend options: how a backend runs its kernels (not what the model computes). A field of
// Config (Config::backend); the backend factory hands them to the backend it makes, which keeps
// them (no process-wide switches, so two backends in one process can differ).
//
// backend_options_from_env() fills the defaults from the NANOVLLM_* environment variables named
// in the field table below: the one place the runtime reads them (README.md "Environment
// knobs"). The choices are enums, named by strings at the edges (environment, JSON, Python).
#pragma once
#include <array>
#include <string_view>

#include "nanovllm/field.h"

namespace nanovllm {

// The CPU linear layer's kernel (src/kernels/cpu/gemm.h). kAuto picks by shape and dtype; the
// others force one path (tests, benchmarks).
enum class LinearPath { kAuto = 0, kStreaming = 1, kBlas = 2, kOnednn = 3 };
constexpr std::array<std::string_view, 4> enum_names(LinearPath) {
  return {"auto", "streaming", "blas", "onednn"};
}

// Cap on the CPU instruction set (util/cpu_features.h): none (what the CPU has), avxvnni (no
// AVX-512), avx2 (no AVX-512, no AVX-VNNI), scalar (the x86-64 baseline).
enum class IsaCap { kNone = 0, kAvxVnni = 1, kAvx2 = 2, kScalar = 3 };
constexpr std::array<std::string_view, 4> enum_names(IsaCap) {
  return {"", "avxvnni", "avx2", "scalar"};
}

// CUDA prefill attention kernel: CUDA cores, fp32 (simple) | WMMA tensor cores (tc).
enum class CudaPrefill { kSimple = 0, kTensorCore = 1 };
constexpr std::array<std::string_view, 2> enum_names(CudaPrefill) { return {"simple", "tc"}; }

// CUDA decode attention kernel: v1 | v2 (lanes split each key row, vectorized K/V, splits from
// the occupancy API; falls back to v1 for shapes it lacks). Default v2.
enum class CudaDecode { kV1 = 0, kV2 = 1 };
constexpr std::array<std::string_view, 2> enum_names(CudaDecode) { return {"v1", "v2"}; }

// CUDA dense linears at decode batch sizes (bf16): cuBLASLt for every shape (cublas), the skinny
// kernel (one warp per weight row, batch-invariant sums) for T <= 8 rows (skinny), or the skinny
// kernel for T = 1 and cuBLASLt above (auto: where the H200 measured it faster on every shape).
enum class CudaGemm { kCublas = 0, kSkinny = 1, kAuto = 2 };
constexpr std::array<std::string_view, 3> enum_names(CudaGemm) { return {"cublas", "skinny", "auto"}; }

struct BackendOptions {
  // CPU threads per rank when Config::num_threads is 0; 0: all cores (divided among the ranks
  // under tensor parallelism).
  int num_threads = 0;
  int spin_us = 2000;  // std::thread pool: microseconds an idle worker spins before it sleeps
  // Shrink a parallel region's team when another process holds a core.
  bool adaptive_threads = true;
  bool cpu_weight_copy = true;  // CPU: copy weights into huge-page memory at load (else the mmap)
  LinearPath linear_path = LinearPath::kAuto;  // CPU linear kernel; kAuto in production
  // Process-wide: read once, at the first kernel dispatch (see cpu_features.h); a backend whose
  // options name another cap refuses to start.
  IsaCap isa = IsaCap::kNone;
  CudaPrefill cuda_prefill = CudaPrefill::kSimple;
  // v2 by measurement (H200, 2026-11-28): 6.9x v1 on decode attention (B 256 x L 1024: 3,268 vs
  // 477 GB/s, 0.72 of the read pass), 5.3x on bench.py's workload; both pass the conformance table.
  CudaDecode cuda_decode = CudaDecode::kV2;
  // auto by measurement (H200, 2026-11-30, bench_gpu_gemm): at T = 1 the skinny kernel beat
  // cuBLASLt on every Qwen3-0.6B shape (1.04-2.76x; batch-1 decode step 1.68 -> 1.34 ms), at
  // T = 4 / 8 it lost on some (0.47-0.82x: gate_up, lm_head, qkv).
  CudaGemm cuda_gemm = CudaGemm::kAuto;

  // Throws nanovllm::Error naming the field and the allowed values.
  void validate() const;
};

// The field table (nanovllm/field.h): names, NANOVLLM_* variables, rules. Python's keyword order.
constexpr auto fields_of(const BackendOptions*) {
  using B = BackendOptions;
  return std::tuple{
      env_field("num_threads", &B::num_threads, "NANOVLLM_NUM_THREADS",
                "CPU threads per rank when Config.num_threads is 0 (0: all cores)",
                rule::at_least<0>),
      env_field("spin_us", &B::spin_us, "NANOVLLM_SPIN_US",
                "microseconds an idle pool thread spins before it sleeps", rule::at_least<0>),
      env_field("adaptive_threads", &B::adaptive_threads, "NANOVLLM_ADAPTIVE_THREADS",
                "shrink a parallel region's team when another process holds a core"),
      env_field("cpu_weight_copy", &B::cpu_weight_copy, "NANOVLLM_CPU_WEIGHT_COPY",
                "copy weights into huge-page memory at load (else keep the mmap)"),
      env_field("linear_path", &B::linear_path, "NANOVLLM_LINEAR_PATH",
                "CPU linear kernel (tests, benchmarks; streaming: the batch-invariant kernels)"),
      env_field("isa", &B::isa, "NANOVLLM_ISA", "cap on the CPU instruction set (process-wide)"),
      env_field("cuda_prefill", &B::cuda_prefill, "NANOVLLM_CUDA_PREFILL",
                "CUDA prefill attention kernel"),
      env_field("cuda_decode", &B::cuda_decode, "NANOVLLM_CUDA_DECODE",
                "CUDA decode attention kernel"),
      env_field("cuda_gemm", &B::cuda_gemm, "NANOVLLM_CUDA_GEMM",
                "CUDA linears at decode batch sizes: cublas, skinny (T <= 8), auto (skinny at T = 1)"),
  };
}
static_assert(table_covers_struct<BackendOptions>(),
              "every BackendOptions member needs one row in fields_of(const BackendOptions*)");

// The defaults above, overridden by the NANOVLLM_* variables that are set. Throws on a malformed
// value (naming the variable).
BackendOptions backend_options_from_env();

}  // namespace nanovllm
