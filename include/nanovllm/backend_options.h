// Backend options: how a backend runs its kernels (not what the model computes). A field of
// Config (Config::backend); the backend factory hands them to the backend it makes, which keeps
// them (no process-wide switches, so two backends in one process can differ).
//
// backend_options_from_env() fills the defaults from the NANOVLLM_* environment variables: the
// one place the runtime reads them (README.md "Environment knobs").
#pragma once
#include <string>

namespace nanovllm {

// The CPU linear layer's kernel (src/kernels/cpu/gemm.h). kAuto picks by shape and dtype; the
// others force one path (tests, benchmarks).
enum class LinearPath { kAuto = 0, kStreaming = 1, kBlas = 2, kOnednn = 3 };

struct BackendOptions {
  // CPU threads per rank when Config::num_threads is 0 (NANOVLLM_NUM_THREADS); 0: all cores
  // (divided among the ranks under tensor parallelism).
  int num_threads = 0;
  // std::thread pool: microseconds an idle worker spins before it sleeps (NANOVLLM_SPIN_US).
  int spin_us = 2000;
  // Shrink a parallel region's team when another process holds a core
  // (NANOVLLM_ADAPTIVE_THREADS=0 turns it off).
  bool adaptive_threads = true;
  // CPU: copy weights into huge-page memory at load (NANOVLLM_CPU_WEIGHT_COPY=0: keep the mmap).
  bool cpu_weight_copy = true;
  // CPU linear kernel; kAuto in production.
  LinearPath linear_path = LinearPath::kAuto;
  // Cap on the CPU instruction set: "" (what the CPU has) | avxvnni | avx2 | scalar
  // (NANOVLLM_ISA). Process-wide: read once, at the first kernel dispatch (see cpu_features.h).
  std::string isa;
  // CUDA prefill attention kernel: simple (CUDA cores, fp32) | tc (tensor cores)
  // (NANOVLLM_CUDA_PREFILL).
  std::string cuda_prefill = "simple";
  // CUDA decode attention kernel: v1 | v2 (lanes split each key row, vectorized K/V, splits
  // from the occupancy API; falls back to v1 for shapes it lacks) (NANOVLLM_CUDA_DECODE).
  std::string cuda_decode = "v1";

  // Throws nanovllm::Error naming the field and the allowed values.
  void validate() const;
};

// The defaults above, overridden by the NANOVLLM_* variables that are set. Throws on a malformed
// value (naming the variable).
BackendOptions backend_options_from_env();

}  // namespace nanovllm
