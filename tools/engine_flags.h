// Engine and sampling flags shared by generate, bench, chat and serve.
#pragma once
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "nanovllm/config.h"
#include "nanovllm/sampling_params.h"

namespace nanovllm::cli {

// --model is added by the caller (some commands make a model first).
void add_engine_flags(CLI::App& app, Config& c);
// --quantization, --kv-cache-dtype, --lm-head-quantization (part of add_engine_flags; also
// `nanovllm logits`).
void add_weight_format_flags(CLI::App& app, Config& c);

struct SamplingFlags {
  SamplingParams p;
  std::string stop_token_ids;  // "1,2,3"
  int64_t seed = -1;
  std::vector<std::string> stop;
  SamplingParams build() const;
};
void add_sampling_flags(CLI::App& app, SamplingFlags& f);

std::vector<int> parse_ids(const std::string& s);  // "1,2, 3" -> {1,2,3}; clear error otherwise
std::string read_file(const std::string& path);

}  // namespace nanovllm::cli
