// A fast reader for tokenizer.json. nlohmann::json needs ~250 ms to build a DOM for Qwen3's
// 11 MB file, most of it for model.vocab (150k entries) and model.merges (150k pairs); this
// parser reads those two straight into flat vectors and builds nlohmann::json only for the
// (small) rest of the document.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace nanovllm {

// A string stored in TokenizerJson::arena.
struct ArenaStr {
  uint32_t off, len;
};

struct TokenizerJson {
  nlohmann::json doc;  // the whole document without model.vocab / model.merges
  std::string arena;   // bytes of all vocab / merge strings (no per-string allocation)
  std::vector<std::pair<ArenaStr, int>> vocab;          // model.vocab (object form)
  std::vector<std::pair<ArenaStr, ArenaStr>> merges;    // model.merges ("a b" or [a, b])
  bool has_vocab = false, has_merges = false;
  std::string_view str(ArenaStr a) const { return std::string_view(arena).substr(a.off, a.len); }
};

// Throws nanovllm::Error with the byte offset on malformed JSON.
TokenizerJson parse_tokenizer_json(std::string_view text);

}  // namespace nanovllm
