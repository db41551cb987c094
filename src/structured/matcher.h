// The per-request state of a constraint: advances over sampled tokens and computes the mask of
// tokens allowed next.
//
// Mask of a configuration = union over its stacks (top node (g, parent)) of
//   position(g).inside, plus the position's pop tokens whose remaining bytes the caller's
//   continuation (Pda::after_pop) accepts, plus the EOS ids when the grammar can end.
// Masks are cached per configuration (a small LRU): inside a JSON string the configuration
// repeats from token to token, so the common step is a copy.
//
// Not thread-safe (one matcher per request); the CompiledGrammar it shares is.
#pragma once
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "structured/compiled_grammar.h"
#include "structured/pda.h"

namespace nanovllm::structured {

class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar);

  // Advances over a sampled token. Returns false, leaving the state unchanged, when the token
  // is not allowed. An EOS id is allowed when can_end(), and terminates the matcher.
  bool accept_token(int32_t id);
  // Advances over raw bytes (no EOS meaning); false and unchanged if they do not fit.
  bool accept_bytes(std::string_view bytes);
  // Whether accept_token(id) would succeed now (runs the automaton on the token's bytes; the
  // mask gives the same answer for every id at once).
  bool is_allowed(int32_t id);

  // Writes vocab().mask_words() uint32 words: bit (id & 31) of word (id >> 5) set = id allowed.
  // Ids the vocabulary has no text for (beyond the tokenizer, special tokens) are never set;
  // EOS ids are set exactly when can_end(). After termination only EOS ids are set.
  void fill_next_token_bitmask(uint32_t* words);
  std::vector<uint32_t> next_token_bitmask();

  bool can_end() const;         // the text so far is a complete match: EOS allowed
  bool must_end() const;        // and nothing may follow: only EOS allowed
  bool is_terminated() const { return terminated_; }  // an EOS was accepted
  void reset();
  // The position in the grammar (what accept_token changes): saved before accepting tokens
  // that may be taken back (speculative decoding's drafts), restored after.
  struct State {
    int32_t config;
    bool terminated;
  };
  State state() const { return {config_, terminated_}; }
  void restore(State s) {
    config_ = s.config;
    terminated_ = s.terminated;
  }

  const CompiledGrammar& grammar() const { return *g_; }
  int32_t mask_words() const { return g_->vocab().mask_words(); }

 private:
  void compute_mask(uint32_t* words);

  std::shared_ptr<const CompiledGrammar> g_;
  Pda pda_;  // full stacks of this request
  int32_t config_;
  bool terminated_ = false;
  struct CachedMask {
    int32_t config = -1;
    std::vector<uint32_t> words;
  };
  std::vector<CachedMask> cache_;  // LRU by round robin
  size_t cache_next_ = 0;
};

}  // namespace nanovllm::structured
