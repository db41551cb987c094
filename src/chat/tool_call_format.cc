#include "chat/tool_call_format.h"

namespace nanovllm::chat {

ToolCallFormat tool_call_format_for_template(std::string_view t) {
  if (t.find("<tool_call>") != std::string_view::npos) return ToolCallFormat::kHermes;
  if (t.find("<|python_tag|>") != std::string_view::npos || t.find("\"parameters\"") != std::string_view::npos)
    return ToolCallFormat::kLlama3Json;
  return ToolCallFormat::kHermes;
}

const char* to_string(ToolCallFormat f) { return f == ToolCallFormat::kHermes ? "hermes" : "llama3_json"; }

}  // namespace nanovllm::chat
