// Engine statistics: per step and cumulative.
#pragma once
#include <cstdint>
#include <string>

namespace nanovllm {

struct StepStats {
  int num_seqs = 0;               // sequences in the step
  int num_prefill_tokens = 0;     // tokens computed for prompts (chunks included)
  int num_decode_tokens = 0;      // one per decoding sequence
  int num_preempted = 0;          // preemptions during this step's scheduling
  int num_blocks_used = 0;        // KV blocks in use after the step
  double seconds = 0;
};

struct EngineStats {
  int64_t steps = 0;
  int64_t prefill_tokens = 0;
  int64_t decode_tokens = 0;
  int64_t prompt_tokens = 0;         // prompt tokens of admitted requests (first admission)
  int64_t prefix_cache_hit_tokens = 0;
  int64_t prefix_cache_query_tokens = 0;
  int64_t preemptions = 0;
  int64_t finished_requests = 0;
  int64_t aborted_requests = 0;
  int64_t failed_requests = 0;
  int max_batch_size = 0;            // largest num_seqs seen in a step
  int num_blocks_total = 0;
  int num_blocks_used = 0;           // now
  int peak_blocks_used = 0;
  int num_running = 0;               // now
  int num_waiting = 0;               // now
  double prefill_seconds = 0;        // wall time of steps that had prefill tokens
  double decode_seconds = 0;         // wall time of decode-only steps
  std::string executor = "eager";    // step executor: "eager" | "cuda-graph"
  int64_t graph_pool_bytes = 0;      // device memory reserved by the captured CUDA graphs
  int64_t graph_steps = 0;           // steps that replayed a CUDA graph
  int num_threads = 0;               // CPU threads the backend runs ops on (0: a GPU backend)
};

}  // namespace nanovllm
