// Per-request sampling and stop parameters (vLLM's names).
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace nanovllm {

// Constrained decoding (vLLM's StructuredOutputsParams names): every sampled token is masked to
// those a grammar allows, and EOS is allowed only where the grammar's language can end. At most
// one constraint per request; all empty = none. Unsupported schema features are an Error naming
// the keyword and its location (the server's 400), never ignored (src/structured/README.md).
struct StructuredOutputsParams {
  std::string json;                 // a JSON schema, as JSON text (property order is kept)
  std::string regex;                // the whole output matches this regular expression
  std::vector<std::string> choice;  // the output is exactly one of these strings
  bool json_object = false;         // any JSON object
  // Tool calls in the model's own call format (Hermes/Qwen3 <tool_call>{...}</tool_call>, or
  // Llama-3 JSON; chosen from the chat template), their arguments following the tools' parameter
  // schemas. `tools` is the OpenAI "tools" list as JSON text; tool_name "" = one or more calls
  // of any tool (tool_choice "required"), else exactly one call of that function.
  std::string tools;
  std::string tool_name;
  bool disable_any_whitespace = false;  // JSON: no whitespace between tokens (else runs of <= 16)

  bool empty() const {
    return json.empty() && regex.empty() && choice.empty() && !json_object && tools.empty();
  }
};

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
  // Completions per prompt. The prompt's prefill is shared: the n sequences fork after it (its
  // full KV blocks are shared through ref counts). Outputs carry index 0..n-1; completion i > 0
  // samples with a seed derived from `seed` and i, so a seeded request is reproducible.
  int n = 1;                         // [1, 64]
  StructuredOutputsParams structured_outputs;

  // Throws nanovllm::Error naming the parameter and value.
  void validate() const;
};

}  // namespace nanovllm
