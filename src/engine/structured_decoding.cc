#include "engine/structured_decoding.h"

#include "structured/output_constraint.h"
#include "structured/token_index.h"
#include "tokenizer/tokenizer.h"
#include "util/check.h"

namespace nanovllm {

std::span<const uint32_t> SequenceGrammar::allowed() {
  mask_.resize(size_t(matcher_.mask_words()));
  matcher_.fill_next_token_bitmask(mask_.data());
  return mask_;
}

void SequenceGrammar::masks_after(std::span<const int> drafts,
                                  std::vector<std::vector<uint32_t>>& masks) {
  const auto saved = matcher_.state();
  const size_t words = size_t(matcher_.mask_words());
  masks.resize(drafts.size() + 1);
  bool valid = true;
  for (size_t i = 0; i <= drafts.size(); ++i) {
    masks[i].resize(words);
    if (valid) matcher_.fill_next_token_bitmask(masks[i].data());
    else masks[i] = masks[i - 1];
    if (i < drafts.size() && valid) valid = matcher_.accept_token(drafts[i]);
  }
  matcher_.restore(saved);
}

StructuredDecoding::StructuredDecoding(const Tokenizer& tok, std::vector<int> eos_ids,
                                       int vocab_size, chat::ToolCallFormat format)
    : format_(format),
      cache_(structured::TokenIndex::from_tokenizer(
          tok, std::vector<int32_t>(eos_ids.begin(), eos_ids.end()), vocab_size)) {}

std::shared_ptr<const structured::CompiledGrammar> StructuredDecoding::compile(
    const StructuredOutputsParams& p) const {
  // The default options bound whitespace and digit runs (structured/json_exprs.h), so that a
  // constrained output always ends.
  std::optional<structured::RequestConstraint> c = structured::constraint_for(p, format_);
  NV_CHECK(c.has_value(), "compile: the request has no output constraint");
  auto g = cache_.get(c->key, c->build);
  g->precompute();  // no-op once done
  return g;
}

std::unique_ptr<SequenceGrammar> StructuredDecoding::start(const StructuredOutputsParams& p) const {
  return std::make_unique<SequenceGrammar>(compile(p));
}

}  // namespace nanovllm
