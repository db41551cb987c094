// What the engine returns per request: final outputs and incremental stream deltas.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace nanovllm {

struct TokenLogprob {
  int token_id = 0;
  float logprob = 0.f;
};

// Per generated token: the sampled token's logprob and the top-N alternatives.
struct TokenLogprobs {
  float logprob = 0.f;
  std::vector<TokenLogprob> top;
};

// One completion of a request (a request with SamplingParams::n > 1 has n of them, each with its
// own output, delta stream and finish, told apart by `index`).
struct RequestOutput {
  uint64_t request_id = 0;
  int index = 0;                       // which of the request's n completions
  std::vector<int> prompt_token_ids;
  std::vector<int> token_ids;          // generated tokens (stop token included, stop string not)
  std::string text;                    // decoded generated text (stop string cut off)
  bool finished = false;
  std::string finish_reason;           // "stop" | "length" | "abort" | "error"
  std::string error;                   // set when finish_reason == "error"
  int num_cached_tokens = 0;           // prompt tokens served from the prefix cache
  std::vector<TokenLogprobs> logprobs; // when SamplingParams::logprobs >= 0
};

// An incremental piece of a request's output (for streaming).
struct StreamDelta {
  uint64_t request_id = 0;
  int index = 0;                       // which of the request's n completions
  std::vector<int> token_ids;          // tokens new since the last delta
  std::string text;                    // text new since the last delta (complete UTF-8 only)
  std::vector<TokenLogprobs> logprobs;
  bool finished = false;               // this completion is done (the request: when all n are)
  std::string finish_reason;
  std::string error;
  int num_prompt_tokens = 0;
  int num_generated_tokens = 0;        // total so far
};

}  // namespace nanovllm
