// A Grammar bound to a vocabulary, with the per-position token tables that make masks cheap.
//
// Position masks. For an NFA state g that has byte edges, walk the vocabulary trie running the
// pushdown automaton from the single stack (g, base), where `base` stands for "whatever called
// g's rule". Each token lands in one of three classes:
//   inside  - all its bytes are consumed while g's rule is still running (or it ends exactly
//             as the rule ends): allowed whatever the caller is;
//   pops    - the rule ends after `offset` bytes and the rest must be matched by the caller:
//             recorded as (token, offset) and checked per request against the real stack;
//   neither - rejected.
// Because rules end at a closing delimiter (", }, ]), the pops are few (tokens such as `",` or
// `}]`), and the inside sets are shared by every request and every stack depth that reaches
// g. For the frame at the bottom of the stack (g's rule is the root) the walk runs from
// (g, root) instead: the rule's end is the end of the output, and no pops are kept.
//
// Thread-safe: tables are computed on first use under a mutex and never change afterwards.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "structured/grammar.h"
#include "structured/pda.h"
#include "structured/token_index.h"

namespace nanovllm::structured {

// A set of token ids: a bitmask when large, a list when small.
struct TokenSet {
  std::vector<uint32_t> dense;   // mask_words() words, or empty
  std::vector<int32_t> sparse;   // used when dense is empty
  void or_into(uint32_t* words) const;
  size_t count() const;
};

struct PositionMasks {
  TokenSet inside;
  std::vector<std::pair<int32_t, int32_t>> pops;  // (token, offset): the rule ends after offset bytes
};

class CompiledGrammar {
 public:
  CompiledGrammar(Grammar g, std::shared_ptr<const TokenIndex> vocab);
  CompiledGrammar(const CompiledGrammar&) = delete;
  CompiledGrammar& operator=(const CompiledGrammar&) = delete;

  const Grammar& grammar() const { return g_; }
  const TokenIndex& vocab() const { return *vocab_; }
  const std::shared_ptr<const TokenIndex>& vocab_ptr() const { return vocab_; }

  // The tables of NFA state `state` (which must have byte edges) in a frame whose caller is
  // unknown (root_frame false) or which is the bottom frame (root_frame true).
  const PositionMasks& position(int32_t state, bool root_frame) const;
  // Computes the tables of every state that has byte edges, for both frame kinds, so that no
  // request pays a first-visit walk (e.g. in a background thread when a constraint is first
  // seen). Optional: tables are otherwise computed on first use. Returns the count.
  size_t precompute() const;

  struct Stats {
    size_t positions = 0;     // tables computed so far
    double walk_seconds = 0;  // time spent computing them
    size_t walk_configs = 0;  // relative configurations interned by the walks
  };
  Stats stats() const;

 private:
  PositionMasks walk(int32_t state, bool root_frame) const;  // with mu_ held

  Grammar g_;
  std::shared_ptr<const TokenIndex> vocab_;
  mutable std::mutex mu_;
  mutable Pda walk_pda_;  // relative configurations, shared by all walks (refers to g_)
  mutable std::unordered_map<int64_t, std::unique_ptr<PositionMasks>> positions_;
  mutable double walk_seconds_ = 0;
};

// Compiles a grammar for a vocabulary (shared by every request using this constraint).
std::shared_ptr<const CompiledGrammar> compile(Grammar g, std::shared_ptr<const TokenIndex> vocab);

}  // namespace nanovllm::structured
