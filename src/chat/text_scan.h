// Small helpers for the streaming output parsers (reasoning_parser, tool_parser).
#pragma once
#include <algorithm>
#include <string_view>

namespace nanovllm::chat {

// Length of the longest suffix of `text` that is a proper prefix of `tag`: the bytes a
// streaming parser must hold back because the next piece may complete the tag.
inline size_t partial_tag_suffix(std::string_view text, std::string_view tag) {
  for (size_t n = std::min(text.size(), tag.size() - 1); n > 0; --n)
    if (text.substr(text.size() - n) == tag.substr(0, n)) return n;
  return 0;
}

inline bool is_json_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

}  // namespace nanovllm::chat
