// Per-request sampling and stop parameters (vLLM's names).
//
// A new parameter: a member of SamplingParams plus its row in fields_of() below (name, CLI flag,
// help, rule); Python's keyword, the `generate` flag and the server's request field follow from
// the row. Then its semantics (the sampler).
#pragma once
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "nanovllm/field.h"

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
  // A grammar as text: GBNF / EBNF (`root ::= ...`, llama.cpp's and xgrammar's syntax) or a
  // Lark subset (`start: ...`); src/structured/grammar_text.h.
  std::string grammar;
  // vLLM's structural tag as JSON text: {"structures": [{"begin", "schema", "end"}], "triggers"}:
  // free text in which a trigger starts a tagged JSON structure (src/structured/structural_tag.h).
  std::string structural_tag;
  // Tool calls in the model's own call format (Hermes/Qwen3 <tool_call>{...}</tool_call>, or
  // Llama-3 JSON; chosen from the chat template), their arguments following the tools' parameter
  // schemas. `tools` is the OpenAI "tools" list as JSON text; tool_name "" = one or more calls
  // of any tool (tool_choice "required"), else exactly one call of that function.
  std::string tools;
  std::string tool_name;
  bool disable_any_whitespace = false;  // JSON: no whitespace between tokens (else: src/structured/README.md)

  bool empty() const {
    return json.empty() && regex.empty() && choice.empty() && !json_object && tools.empty() && grammar.empty() && structural_tag.empty();
  }
};

// The field table (nanovllm/field.h). SamplingParams::validate() checks that at most one
// constraint is given; the server reads these from its own request fields (response_format,
// tools, ...: server/request_features.cc).
constexpr auto fields_of(const StructuredOutputsParams*) {
  using O = StructuredOutputsParams;
  return std::tuple{
      field("json", &O::json, "", "a JSON schema (JSON text)"),
      field("regex", &O::regex, "", "the whole output matches this regular expression"),
      field("choice", &O::choice, "", "the output is exactly one of these strings"),
      field("json_object", &O::json_object, "", "any JSON object"),
      field("grammar", &O::grammar, "", "a GBNF / EBNF (root ::= ...) or Lark (start: ...) grammar"),
      field("structural_tag", &O::structural_tag, "",
            "JSON text {structures: [{begin, schema, end}], triggers}: tagged JSON in free text"),
      field("tools", &O::tools, "", "OpenAI tools list (JSON text)"),
      field("tool_name", &O::tool_name, "", "exactly one call of this function"),
      field("disable_any_whitespace", &O::disable_any_whitespace, "",
            "JSON: no whitespace between tokens"),
  };
}
static_assert(table_covers_struct<StructuredOutputsParams>(),
              "every StructuredOutputsParams member needs one row in its fields_of()");

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
  // -1: none; N >= 0: every prompt token's logprob (given the tokens before it), its rank and
  // the top-N alternatives (vLLM's prompt_logprobs). Such a request reuses no prefix-cache block.
  int prompt_logprobs = -1;
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
  // Reasoning models: at most this many generated tokens inside <think> ... </think>, then
  // </think> is forced (src/engine/thinking_budget.h). -1: unlimited. Needs a model whose
  // tokenizer has both markers as tokens; ignored with an output constraint (the grammar
  // decides every token, and no grammar admits the markers).
  int thinking_budget = -1;
  // Scheduling priority with Config::scheduling_policy "priority": lower runs sooner and is
  // preempted later (vLLM's request priority). Must be 0 under "fcfs".
  int priority = 0;
  StructuredOutputsParams structured_outputs;

  // Throws nanovllm::Error naming the parameter and value ("top_p must be in (0, 1], got 0").
  void validate() const;
};

// The field table (nanovllm/field.h), in Python's keyword order (nano-vLLM's temperature,
// max_tokens, ignore_eos first, so SamplingParams(0.6, 256) means the same). The names are
// also the server's request fields (vLLM's); rows without a flag have no `generate` flag.
// min_tokens <= max_tokens and one structured-output constraint at most are validate()'s.
constexpr auto fields_of(const SamplingParams*) {
  using S = SamplingParams;
  return std::tuple{
      field("temperature", &S::temperature, "--temperature", "0 = greedy",
            +[](const float& v) {
              return std::isfinite(v) && v >= 0 ? std::string() : rule::got("finite and >= 0", v);
            }),
      field("max_tokens", &S::max_tokens, "--max-tokens", "max generated tokens",
            rule::at_least<1>),
      field("ignore_eos", &S::ignore_eos, "--ignore-eos", "do not stop at EOS"),
      field("top_k", &S::top_k, "--top-k", "-1 = disabled",
            +[](const int& v) {
              return v >= -1 ? std::string() : rule::got("-1 or 0 (disabled) or >= 1", v);
            }),
      field("top_p", &S::top_p, "--top-p", "nucleus sampling", rule::in_half_open<0, 1>),
      field("min_p", &S::min_p, "--min-p", "min-p filtering", rule::in_closed<0, 1>),
      field("seed", &S::seed, "--seed", "per-request RNG seed (default, or negative: random)"),
      field("min_tokens", &S::min_tokens, "--min-tokens", "min generated tokens before EOS/stop"),
      field("stop", &S::stop, "--stop", "stop string (repeatable)",
            +[](const std::vector<std::string>& v) {
              for (const auto& s : v)
                if (s.empty()) return std::string("strings must be non-empty, got an empty string");
              return std::string();
            }),
      field("stop_token_ids", &S::stop_token_ids, "--stop-token-ids",
            "extra stop token ids, e.g. 1,2"),
      field("logprobs", &S::logprobs, "--logprobs", "return the top-N logprobs per token",
            rule::in_closed<-1, 20>),
      field("prompt_logprobs", &S::prompt_logprobs, "", "logprobs of the prompt tokens + top-N per position",
            rule::in_closed<-1, 20>),
      field("presence_penalty", &S::presence_penalty, "--presence-penalty",
            "[-2, 2]: subtracted once from tokens generated so far", rule::in_closed<-2, 2>),
      field("frequency_penalty", &S::frequency_penalty, "--frequency-penalty",
            "[-2, 2]: subtracted per occurrence among tokens generated so far",
            rule::in_closed<-2, 2>),
      field("repetition_penalty", &S::repetition_penalty, "--repetition-penalty",
            "> 0: divides positive / multiplies negative logits of prompt and output tokens",
            +[](const float& v) {
              return std::isfinite(v) && v > 0 ? std::string() : rule::got("finite and > 0", v);
            }),
      field("logit_bias", &S::logit_bias, "", "token id -> added to its logit, [-100, 100]",
            +[](const std::map<int, float>& m) {
              for (const auto& [token, bias] : m) {
                if (token < 0) return "token ids must be >= 0, got " + std::to_string(token);
                if (!(bias >= -100.f && bias <= 100.f)) {
                  std::ostringstream os;
                  os << "values must be in [-100, 100], got " << bias << " for token " << token;
                  return os.str();
                }
              }
              return std::string();
            }),
      field("skip_special_tokens", &S::skip_special_tokens, "", "decode without special tokens"),
      field("n", &S::n, "", "completions per prompt, their prefill shared",
            rule::in_closed<1, 64>),
      field("thinking_budget", &S::thinking_budget, "", "max tokens inside <think> (then </think> is forced); -1 = unlimited",
            +[](const int& v) { return v >= -1 ? std::string() : rule::got("-1 (unlimited) or >= 0", v); }),
      field("priority", &S::priority, "", "scheduling priority (lower first) with scheduling_policy priority"),
      field("structured_outputs", &S::structured_outputs, "",
            "constrained decoding (StructuredOutputsParams)"),
  };
}
static_assert(table_covers_struct<SamplingParams>(),
              "every SamplingParams member needs one row in fields_of(const SamplingParams*)");

}  // namespace nanovllm
