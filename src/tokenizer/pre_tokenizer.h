// Pre-tokenizers of tokenizer.json ("pre_tokenizer"): split normalized text into words that
// the model (BPE) encodes independently.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace nanovllm {

struct PreToken {
  std::string text;
  bool at_start;  // begins at offset 0 of the original input (Metaspace prepend_scheme "first")
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Replaces `pieces` by their split (and possibly rewritten) sub-pieces, in order.
  virtual void apply(std::vector<PreToken>& pieces) const = 0;
};

// Builds the pre-tokenizer described by j; nullptr for JSON null. Supported types: Split,
// ByteLevel, Metaspace, Digits, Whitespace, WhitespaceSplit, Sequence. Anything else throws
// nanovllm::Error naming the type.
std::unique_ptr<PreTokenizer> make_pre_tokenizer(const nlohmann::json& j);

}  // namespace nanovllm
