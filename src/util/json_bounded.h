// The one way JSON text is read in nanovllm: parsing with a nesting-depth and a size limit.
// nlohmann's parser itself is iterative, but copying, dumping and comparing a json value, and
// turning it into template values, recurse once per nesting level: a 60 KB request body of
// 30,000 nested brackets overflowed the stack. Everything that reads JSON (server bodies, CLI
// files, config.json, tokenizer_config.json, safetensors headers) goes through parse_json(),
// so every later recursion is bounded by JsonLimits::max_depth.
#pragma once
#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace nanovllm {

// Default depth for files and requests. Real configs and tool schemas nest < 20 levels.
inline constexpr size_t kJsonMaxDepth = 512;

struct JsonLimits {
  size_t max_depth = kJsonMaxDepth;    // objects/arrays open at once; deeper input is rejected
  size_t max_bytes = size_t(1) << 30;  // longer text is rejected before parsing
};

// Parses `text` (strict JSON, no comments). Throws nanovllm::Error starting with `what` (e.g.
// "config.json" or "request body") for malformed JSON, numbers out of range (1e309), text over
// max_bytes and nesting deeper than max_depth. Never throws nlohmann exceptions.
nlohmann::json parse_json(std::string_view text, const std::string& what, const JsonLimits& limits = {});
nlohmann::ordered_json parse_ordered_json(std::string_view text, const std::string& what,
                                          const JsonLimits& limits = {});

// Nesting depth of a json value (0 for a scalar, 1 for [1]), measured without recursion: for
// values built in code, before anything recursive (a copy, dump(), template conversion) runs.
size_t json_depth(const nlohmann::json& j);
size_t json_depth(const nlohmann::ordered_json& j);

// Reads a whole file and parses it (what = the path). Throws nanovllm::Error if unreadable.
nlohmann::json read_json_file(const std::string& path, const JsonLimits& limits = {});
nlohmann::ordered_json read_ordered_json_file(const std::string& path, const JsonLimits& limits = {});

}  // namespace nanovllm
