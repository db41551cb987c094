// Host-side token sampler over f32 logits [S, V] (one row per sampling sequence).
//
// Per row: optional EOS/stop-token suppression (min_tokens), then greedy argmax when
// temperature < 1e-5 (0 in practice), else logits / T -> top-k -> top-p -> min-p -> softmax -> exponential race
// (token = argmax_i p_i / E_i, E_i ~ Exp(1); nano-vLLM's Gumbel-max sampler). The noise E_i
// comes from Philox4x32-10 keyed by the request seed with counter (step, i), so a seeded
// request gets the same tokens whatever else is in the batch.
#pragma once
#include <cstdint>
#include <vector>

#include "nanovllm/request_output.h"
#include "nanovllm/sampling_params.h"

namespace nanovllm {

class ThreadPool;

struct SampleRequest {
  const SamplingParams* params = nullptr;
  uint64_t seed = 0;
  int64_t step = 0;           // tokens the request has generated so far
  bool suppress_eos = false;  // mask eos_ids and params->stop_token_ids (min_tokens not reached)
  const std::vector<int>* eos_ids = nullptr;
};

// logits: [S, V] row-major. Returns S token ids. When logprobs_out is given it is resized to
// S and, for rows with params->logprobs >= 0, filled from the raw logits (log_softmax before
// suppression, temperature and filters): the sampled token's logprob and the top-N tokens.
// pool may be null (sequential); rows run in parallel when S > 1.
std::vector<int> sample(const float* logits, int S, int V, const std::vector<SampleRequest>& reqs,
                        ThreadPool* pool, std::vector<TokenLogprobs>* logprobs_out = nullptr);

// One row (exposed for tests and for callers that sample a single row).
int sample_row(const float* logits, int V, const SampleRequest& req,
               TokenLogprobs* logprobs_out = nullptr);

}  // namespace nanovllm
