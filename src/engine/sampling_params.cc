// SamplingParams::validate (include/nanovllm/sampling_params.h).
#include "nanovllm/sampling_params.h"

#include <cmath>

#include "util/check.h"

namespace nanovllm {

void SamplingParams::validate() const {
  if (!(std::isfinite(temperature) && temperature >= 0.f))
    NV_THROW("temperature must be finite and >= 0, got ", temperature);
  if (top_k < -1) NV_THROW("top_k must be -1 or 0 (disabled) or >= 1, got ", top_k);
  if (!(top_p > 0.f && top_p <= 1.f)) NV_THROW("top_p must be in (0, 1], got ", top_p);
  if (!(min_p >= 0.f && min_p <= 1.f)) NV_THROW("min_p must be in [0, 1], got ", min_p);
  if (max_tokens < 1) NV_THROW("max_tokens must be >= 1, got ", max_tokens);
  if (min_tokens < 0 || min_tokens > max_tokens)
    NV_THROW("min_tokens must be in [0, max_tokens=", max_tokens, "], got ", min_tokens);
  if (logprobs < -1 || logprobs > 20) NV_THROW("logprobs must be in [-1, 20], got ", logprobs);
  for (const auto& s : stop)
    if (s.empty()) NV_THROW("stop strings must be non-empty, got an empty string");
  if (!(presence_penalty >= -2.f && presence_penalty <= 2.f))
    NV_THROW("presence_penalty must be in [-2, 2], got ", presence_penalty);
  if (!(frequency_penalty >= -2.f && frequency_penalty <= 2.f))
    NV_THROW("frequency_penalty must be in [-2, 2], got ", frequency_penalty);
  if (!(std::isfinite(repetition_penalty) && repetition_penalty > 0.f))
    NV_THROW("repetition_penalty must be finite and > 0, got ", repetition_penalty);
  for (const auto& [token, bias] : logit_bias) {
    if (token < 0) NV_THROW("logit_bias token ids must be >= 0, got ", token);
    if (!(bias >= -100.f && bias <= 100.f))
      NV_THROW("logit_bias values must be in [-100, 100], got ", bias, " for token ", token);
  }
  if (n < 1 || n > 64) NV_THROW("n must be in [1, 64], got ", n);
  const StructuredOutputsParams& so = structured_outputs;
  const int constraints = int(!so.json.empty()) + int(!so.regex.empty()) + int(!so.choice.empty()) +
                          int(so.json_object) + int(!so.tools.empty());
  if (constraints > 1)
    NV_THROW("structured_outputs: give only one of json, regex, choice, json_object, tools");
  if (!so.tool_name.empty() && so.tools.empty())
    NV_THROW("structured_outputs.tool_name '", so.tool_name, "' needs structured_outputs.tools");
}

}  // namespace nanovllm
