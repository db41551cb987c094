// Per-request sampling and stop parameters (vLLM's names).
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace nanovllm {

struct SamplingParams {
  float temperature = 1.0f;          // 0: greedy
  int top_k = -1;                    // -1 or 0: disabled
  float top_p = 1.0f;                // (0, 1]
  float min_p = 0.0f;                // [0, 1]
  std::optional<uint64_t> seed;      // per-request RNG seed; same seed -> same tokens
  int max_tokens = 64;               // >= 1
  int min_tokens = 0;                // EOS / stop tokens suppressed before this many tokens
  bool ignore_eos = false;
  std::vector<int> stop_token_ids;   // in addition to the model's EOS ids
  std::vector<std::string> stop;     // stop strings: matched on text, not included in output
  int logprobs = -1;                 // -1: none; N >= 0: sampled token's logprob + top-N
  // Penalties (vLLM semantics, applied before temperature): presence / frequency subtract
  // once / per occurrence for tokens generated so far; repetition divides positive (multiplies
  // negative) logits of tokens in prompt or output.
  float presence_penalty = 0.0f;     // [-2, 2]
  float frequency_penalty = 0.0f;    // [-2, 2]
  float repetition_penalty = 1.0f;   // > 0; 1: off
  std::map<int, float> logit_bias;   // token id -> added to its logit, [-100, 100] (OpenAI)
  bool skip_special_tokens = true;

  // Throws nanovllm::Error naming the parameter and value.
  void validate() const;
};

}  // namespace nanovllm
