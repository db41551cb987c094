// The sampling op's host-side description: what Backend::sample(logits, batch) takes and returns.
// Device-free; both backends implement the same definition (kernels/cpu/sampling.cc,
// kernels/cuda/sampler.cu), with the per-element formulas in kernels/sampling_math.h.
//
// For each row r of logits [S, V] (F32, on the backend's device), with raw logits x (NaN = -inf):
//  1. Logprobs (num_logprobs >= 0): log_softmax of the RAW row x (before anything below): the
//     chosen token's logprob and the top num_logprobs tokens (value desc, index asc).
//  2. Processed logits z (vLLM's order, all before temperature):
//       z_i = -inf where the allowed-token mask clears bit i,
//       then per token (apply_logit_edit): suppressed ids -> -inf, + logit_bias,
//       repetition penalty (token in prompt or output: z > 0 ? z / r : z * r),
//       frequency / presence penalties (z -= f * count + p, count = generated occurrences > 0).
//  3. Greedy when is_greedy_temperature(temperature) (T < 1e-5): argmax z, lowest index on ties.
//     Else z / T (float reciprocal then multiply) -> kept set = z >= max of the thresholds:
//     top-k (k-th largest, ties kept), top-p (smallest set of largest values whose renormalised
//     mass reaches p, ties at the threshold kept), min-p (z >= zmax + log(min_p)); token =
//     argmax over the kept set of exp(z - zmax) / E_i, E_i = Philox noise of (seed, step, i)
//     (util/philox.h), lowest index on ties. The noise depends only on (seed, step, i), so a
//     seeded row samples the same token alone or in any batch.
//  4. Nothing samplable (every allowed token has z = -inf: suppression removed all finite
//     logits, or the raw logits are all -inf / NaN): token = the allowed token with the largest
//     raw logit (lowest index on ties, -inf candidates included). Never an error, never a token
//     the mask forbids.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/sampling_math.h"
#include "nanovllm/request_output.h"

namespace nanovllm {

// A token of the row's history: every token of prompt + output appears once, sorted by token
// id; count = how many times it was generated (0: prompt only). Presence / frequency use
// count, repetition any entry.
struct TokenCount {
  int32_t token = 0;
  int32_t count = 0;
};

struct TokenBias {
  int32_t token = 0;
  float bias = 0.f;  // added to the logit; finite (OpenAI's range is [-100, 100])
};

// One logits row's parameters. Spans are views of caller-owned data that must outlive sample().
struct SamplingRow {
  float temperature = 1.f;  // < 1e-5: greedy
  int32_t top_k = -1;       // <= 0 or >= V: off
  float top_p = 1.f;        // >= 1: off; (0, 1]
  float min_p = 0.f;        // <= 0: off; [0, 1]
  uint64_t seed = 0;        // Philox key
  uint64_t step = 0;        // Philox counter (the request's output position)
  int32_t num_logprobs = -1;  // -1: none; N >= 0: chosen token's logprob + top N (N <= 20)
  Penalties penalties;        // presence, frequency, repetition (vLLM semantics)
  std::span<const TokenCount> history;    // ascending unique tokens; read only if penalties on
  std::span<const TokenBias> logit_bias;  // ascending unique tokens
  std::span<const int32_t> suppress;      // ids forced to -inf (min_tokens: EOS + stop ids);
                                          // repeats fine, ids outside [0, V) ignored
  // Allowed-token bitmask of ceil(V / 32) words (bit i of word i / 32 = token i allowed), e.g.
  // a grammar state's mask; empty = every token allowed. Must allow at least one token < V.
  std::span<const uint32_t> allowed;

  bool greedy() const { return is_greedy_temperature(temperature); }
  bool has_penalties() const {
    return penalties.presence != 0.f || penalties.frequency != 0.f ||
           penalties.repetition != 1.f;
  }
};

struct SamplingBatch {
  std::vector<SamplingRow> rows;  // rows[r] samples logits row r
};

struct SampleResult {
  std::vector<int32_t> tokens;          // [S]
  std::vector<TokenLogprobs> logprobs;  // [S]; empty entries for rows with num_logprobs < 0
};

constexpr int kMaxLogprobs = 20;

// Throws nanovllm::Error naming the row and the value: row count != S, V mismatch of a mask,
// token ids outside [0, V), history / bias not strictly ascending, bad parameter ranges, a mask
// that allows nothing. Both backends call it before any work.
void validate_sampling_batch(const SamplingBatch& batch, int64_t S, int64_t V);

// The row's suppression (ids outside [0, V) dropped: they cannot be sampled), logit_bias and
// (when penalties are on) history merged into one LogitEdit per token, appended to `out` in
// ascending token order. Returns how many. Call after validate_sampling_batch.
size_t build_logit_edits(const SamplingRow& row, int64_t V, std::vector<LogitEdit>& out);

}  // namespace nanovllm
