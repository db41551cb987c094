// The tool-call format a chat template teaches its model. Shared by the parsers of generated
// text (tool_parser.h) and the grammar that makes a model write calls (structured/
// tool_constraint.h), so it lives here, in the lowest of the two libraries (src/chat/README.md).
//  - kHermes (Qwen2.5/Qwen3, Hermes): <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>
//  - kLlama3Json (Llama 3.x JSON tool calling): {"name": ..., "parameters": {...}}
#pragma once
#include <string_view>

namespace nanovllm::chat {

enum class ToolCallFormat { kHermes, kLlama3Json };

// Hermes when the template writes <tool_call>, Llama-3 JSON when it mentions <|python_tag|> or a
// "parameters" key instead; Hermes otherwise.
ToolCallFormat tool_call_format_for_template(std::string_view chat_template);
const char* to_string(ToolCallFormat f);

}  // namespace nanovllm::chat
