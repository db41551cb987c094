// Post-processors of tokenizer.json ("post_processor"): add the special tokens of a single
// sequence when encode() is called with add_special_tokens. Pairs are not supported (nanovllm
// encodes single prompts).
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

namespace nanovllm {

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  virtual std::vector<int> process(std::vector<int> ids) const = 0;
  // True when this processor decides the special tokens (so tokenizer_config's add_bos_token
  // must not add a BOS again); false for ByteLevel, which only adjusts offsets.
  virtual bool adds_special_tokens() const { return true; }
};

// Builds the post-processor described by j; nullptr for JSON null. Supported types:
// TemplateProcessing, ByteLevel, BertProcessing, RobertaProcessing, Sequence; anything else
// throws nanovllm::Error naming the type.
std::unique_ptr<PostProcessor> make_post_processor(const nlohmann::json& j);

}  // namespace nanovllm
