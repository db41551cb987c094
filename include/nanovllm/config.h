// Engine configuration, with nano-vLLM's names and defaults.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "nanovllm/backend_options.h"

namespace nanovllm {

struct Config {
  std::string model;                     // Hugging Face model directory
  int max_num_batched_tokens = 16384;    // token budget of one step
  int max_num_seqs = 512;                // sequences in one step
  int max_model_len = 4096;              // clipped to the model's max_position_embeddings
  float gpu_memory_utilization = 0.9f;   // CUDA: fraction of device memory the engine may use
  int tensor_parallel_size = 1;          // ranks (processes); rank 0 runs the engine
  // tensor_parallel_size > 1. Empty: this process starts ranks 1..N-1 on this machine with
  // worker_command. HOST:PORT: rank 0 serves the rendezvous there and ranks 1..N-1 are started
  // separately, on any machine (`nanovllm worker --rank R --tensor-parallel-size N
  // --dist-init-addr HOST:PORT`).
  std::string dist_init_addr;
  // argv prefix that starts a worker process (rank, size and address are appended), e.g.
  // {"/usr/bin/nanovllm", "worker"}. The CLI and the Python package set it.
  std::vector<std::string> worker_command;
  float dist_timeout_s = 120;            // seconds: rendezvous, and any collective of a step
  bool enforce_eager = false;            // CUDA: no graphs
  int kvcache_block_size = 256;          // any positive multiple of 16
  int num_kvcache_blocks = -1;           // -1: computed from the memory budget
  int64_t cpu_kvcache_bytes = 0;         // CPU KV budget in bytes; 0: cpu_kvcache_fraction of RAM
  float cpu_kvcache_fraction = 0.2f;
  std::string device = "auto";           // auto | cpu | cuda
  std::string policy = "prefill-first";  // prefill-first | mixed
  bool enable_prefix_caching = true;
  int num_threads = 0;                   // CPU threads per rank; 0: cores / tensor_parallel_size
  // Weights quantized at load (CPU): none | int8 | int4 (| int4-g32 | int4-g64 | int4-g32-zp |
  // int4-g64-zp); see src/kernels/quantized.h.
  std::string quantization = "none";
  // The LM head: auto (int8 when the layers are int4, else the layers' scheme; docs/perf.md
  // measures the choices) | none | any scheme above.
  std::string lm_head_quantization = "auto";
  // KV cache element type: auto (the backend's activation type: CPU f32, CUDA bf16) | f32 |
  // bf16 (CPU: half the attention bytes; docs/perf.md has its accuracy).
  std::string kv_cache_dtype = "auto";
  int max_waiting = 0;                   // server: bound on waiting requests; 0: unbounded
  bool allow_nonfinite_weights = false;  // load checkpoints holding NaN/Inf (else an error)
  std::string trace_path;                // Chrome trace JSON of steps and requests; "": off
  // How the backend runs its kernels (threads' spinning, weight copy, kernel paths); defaults
  // from the NANOVLLM_* environment variables (backend_options.h).
  BackendOptions backend = backend_options_from_env();

  // Throws nanovllm::Error naming the field for invalid values.
  void validate() const;
};

}  // namespace nanovllm
