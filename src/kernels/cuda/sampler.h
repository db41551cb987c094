// The sampling op on the device (definition: kernels/sampling.h). One thread block per logits
// row does everything (after a split pre-pass for the rows that allow it, see launch_sample): raw logprobs (logsumexp, top-N, chosen token), the
// processed logits (allowed-token mask, then the row's sorted LogitEdits: suppression,
// logit_bias, penalties; an "edited" bitmap in shared memory finds them), greedy or Gumbel-max
// with top-k / top-p / min-p, and the step-4 fallback. Thresholds are found exactly by 4-pass
// radix selection over the order-preserving uint32 key of z (top-p accumulates probability
// mass in 2^-40 fixed point, so it is deterministic). The logits are never written.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/sampling_math.h"

namespace nanovllm::cuda {

// A row's parameters as the kernel reads them (packed on the host by CudaBackend::sample).
struct SampleRowDev {
  float temperature = 1.f;  // is_greedy_temperature(): greedy
  int32_t top_k = -1;       // <= 0 or >= V: off
  float top_p = 1.f;        // >= 1: off
  float min_p = 0.f;        // <= 0: off
  uint64_t seed = 0;        // Philox key
  uint64_t step = 0;        // Philox counter
  Penalties penalties;
  int32_t num_logprobs = -1;  // -1: none; else min(N, V) top entries at lp_offset
  int32_t lp_offset = 0;
  int32_t edit_begin = 0;  // this row's edits: edits[edit_begin, edit_begin + edit_count),
  int32_t edit_count = 0;  // ascending token ids
  int64_t mask_offset = -1;  // first word of the row's allowed mask in `masks`; -1: all allowed
};

// Outputs (device): tokens [S], chosen_logprob [S] (rows with num_logprobs >= 0), and the
// top-N lists: top_ids / top_logprobs at each row's lp_offset.
struct SampleOutputs {
  int32_t* tokens = nullptr;
  float* chosen_logprob = nullptr;
  int32_t* top_ids = nullptr;
  float* top_logprobs = nullptr;
};

// Rows that need no quantity of the whole row before their argmax (no logprobs; greedy, which
// ignores top-k / top-p / min-p, or none of those filters) are raced in chunks of kSplitChunk
// entries, one block per chunk, then reduced (sampler.cu): the same tokens, more of the GPU at
// small batches. The host and both kernels decide with this one predicate.
NV_HD bool sample_split_row(const SampleRowDev& p, int64_t V) {
  return p.num_logprobs < 0 &&
         (is_greedy_temperature(p.temperature) ||
          (!(p.top_k > 0 && p.top_k < V) && !(p.top_p < 1.f) && !(p.min_p > 0.f)));
}
constexpr int64_t kSplitChunk = 2048;
inline int64_t sample_split_count(int64_t V) { return (V + kSplitChunk - 1) / kSplitChunk; }
// Device scratch launch_sample needs: one chunk winner per (row, chunk).
size_t sample_scratch_bytes(int64_t S, int64_t V);

// logits [S, V] F32 (device); rows [S], edits, masks (device); scratch: sample_scratch_bytes(S, V)
// bytes of device memory, 16-byte aligned; any_split: some row is a sample_split_row (else the
// split pass is not launched).
void launch_sample(const float* logits, int64_t S, int64_t V, const SampleRowDev* rows,
                   const LogitEdit* edits, const uint32_t* masks, const SampleOutputs& out,
                   void* scratch, bool any_split, cudaStream_t s);

}  // namespace nanovllm::cuda
