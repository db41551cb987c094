// Constrained decoding in the engine (SamplingParams::structured_outputs): one
// StructuredDecoding per engine compiles constraints against the model's vocabulary (a
// GrammarCache: requests repeating a constraint share its CompiledGrammar and its mask tables);
// one SequenceGrammar per sequence holds a GrammarMatcher and the mask buffer the sampling
// row's `allowed` span points at. Per step: allowed() -> SamplingRow::allowed (EOS ids set only
// where the grammar may end), then accept(token); done() = the grammar finished the sequence.
#pragma once
#include <memory>
#include <span>
#include <vector>

#include "chat/tool_call_format.h"
#include "nanovllm/sampling_params.h"
#include "structured/grammar_cache.h"
#include "structured/matcher.h"

namespace nanovllm {

class Tokenizer;

class SequenceGrammar {
 public:
  explicit SequenceGrammar(std::shared_ptr<const structured::CompiledGrammar> g)
      : matcher_(std::move(g)) {}
  // The mask for the next token: ceil(V / 32) words; valid until the next call.
  std::span<const uint32_t> allowed();
  // After the sampled token (the sampling op only samples allowed ones). False, the state
  // unchanged, if it is not allowed (a bug: the mask and the matcher disagree).
  bool accept(int token) { return matcher_.accept_token(token); }
  // An EOS was accepted, or nothing but EOS may follow: the sequence is complete.
  bool done() const { return matcher_.is_terminated() || matcher_.must_end(); }
  // Speculative decoding: the masks for the tokens after each prefix of `drafts`
  // (drafts.size() + 1 masks into `masks`, each ceil(V / 32) words), the state unchanged after.
  // A draft the grammar refuses cannot be accepted (its row's mask forbids it): the masks after
  // it repeat the last valid one.
  void masks_after(std::span<const int> drafts, std::vector<std::vector<uint32_t>>& masks);

 private:
  structured::GrammarMatcher matcher_;
  std::vector<uint32_t> mask_;
};

// Thread-safe: compile() may run on server handler threads while the engine thread steps.
class StructuredDecoding {
 public:
  // vocab_size = the model's logits width; format = the chat template's tool-call format.
  StructuredDecoding(const Tokenizer& tok, std::vector<int> eos_ids, int vocab_size,
                     chat::ToolCallFormat format);
  // The compiled constraint (cached; every position table precomputed, so the engine thread
  // pays no trie walks). Throws structured::ConstraintError naming the unsupported feature.
  std::shared_ptr<const structured::CompiledGrammar> compile(
      const StructuredOutputsParams& p) const;
  std::unique_ptr<SequenceGrammar> start(const StructuredOutputsParams& p) const;
  chat::ToolCallFormat tool_call_format() const { return format_; }

 private:
  chat::ToolCallFormat format_;
  mutable structured::GrammarCache cache_;
};

}  // namespace nanovllm
