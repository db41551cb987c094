// Validation of the public configuration structs (declared in include/nanovllm/*.h).
#include <cmath>

#include "nanovllm/config.h"
#include "nanovllm/sampling_params.h"
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

void Config::validate() const {
  if (kvcache_block_size <= 0 || kvcache_block_size % 16 != 0)
    NV_THROW("kvcache_block_size must be a positive multiple of 16, got ", kvcache_block_size);
  if (max_num_seqs < 1) NV_THROW("max_num_seqs must be >= 1, got ", max_num_seqs);
  if (max_num_batched_tokens < 1)
    NV_THROW("max_num_batched_tokens must be >= 1, got ", max_num_batched_tokens);
  if (max_model_len < 1) NV_THROW("max_model_len must be >= 1, got ", max_model_len);
  if (tensor_parallel_size < 1)
    NV_THROW("tensor_parallel_size must be >= 1, got ", tensor_parallel_size);
  if (!(dist_timeout_s > 0)) NV_THROW("dist_timeout_s must be > 0, got ", dist_timeout_s);
  if (policy != "prefill-first" && policy != "mixed")
    NV_THROW("policy must be prefill-first or mixed, got '", policy, "'");
  if (device != "auto" && device != "cpu" && device != "cuda")
    NV_THROW("device must be auto, cpu or cuda, got '", device, "'");
  if (!(gpu_memory_utilization > 0.f && gpu_memory_utilization <= 1.f))
    NV_THROW("gpu_memory_utilization must be in (0, 1], got ", gpu_memory_utilization);
  if (num_kvcache_blocks != -1 && num_kvcache_blocks < 1)
    NV_THROW("num_kvcache_blocks must be -1 (auto) or >= 1, got ", num_kvcache_blocks);
  if (num_threads < 0) NV_THROW("num_threads (--threads) must be >= 0 (0: all cores), got ", num_threads);
  if (max_waiting < 0) NV_THROW("max_waiting must be >= 0 (0: unbounded), got ", max_waiting);
}

}  // namespace nanovllm
