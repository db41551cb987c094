// Position-mask walks over the vocabulary trie (see compiled_grammar.h).
#include "structured/compiled_grammar.h"

#include <chrono>

namespace nanovllm::structured {

void TokenSet::or_into(uint32_t* words) const {
  if (!dense.empty()) {
    for (size_t i = 0; i < dense.size(); ++i) words[i] |= dense[i];
    return;
  }
  for (int32_t t : sparse) words[t >> 5] |= 1u << (t & 31);
}

size_t TokenSet::count() const {
  if (dense.empty()) return sparse.size();
  size_t n = 0;
  for (uint32_t w : dense) n += static_cast<size_t>(__builtin_popcount(w));
  return n;
}

CompiledGrammar::CompiledGrammar(Grammar g, std::shared_ptr<const TokenIndex> vocab)
    : g_(std::move(g)), vocab_(std::move(vocab)), walk_pda_(g_) {
  NV_CHECK(vocab_ != nullptr, "CompiledGrammar: no vocabulary");
}

std::shared_ptr<const CompiledGrammar> compile(Grammar g, std::shared_ptr<const TokenIndex> vocab) {
  return std::make_shared<const CompiledGrammar>(std::move(g), std::move(vocab));
}

const PositionMasks& CompiledGrammar::position(int32_t state, bool root_frame) const {
  int64_t key = static_cast<int64_t>(state) * 2 + (root_frame ? 1 : 0);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = positions_.find(key);
  if (it != positions_.end()) return *it->second;
  auto t0 = std::chrono::steady_clock::now();
  auto pm = std::make_unique<PositionMasks>(walk(state, root_frame));
  walk_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return *positions_.emplace(key, std::move(pm)).first->second;
}

size_t CompiledGrammar::precompute() const {
  size_t n = 0;
  for (int32_t s = 0; s < static_cast<int32_t>(g_.states.size()); ++s) {
    if (g_.states[s].bytes.empty()) continue;
    position(s, false);
    position(s, true);
    n += 2;
  }
  return n;
}

CompiledGrammar::Stats CompiledGrammar::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {positions_.size(), walk_seconds_, walk_pda_.num_configs()};
}

// One preorder pass over the trie. cfg[d] is the configuration after the first d bytes of the
// current path (kDead once nothing survives); ends[0..nends[d]) are the path offsets (<= d)
// at which g's rule could end. A dead path is still descended while it has such offsets: its
// tokens are pop candidates. Otherwise the whole subtree is skipped.
PositionMasks CompiledGrammar::walk(int32_t state, bool root_frame) const {
  const TokenIndex& v = *vocab_;
  const auto& nodes = v.nodes();
  const auto& toks = v.tokens();
  size_t depth = v.max_token_bytes() + 1;
  std::vector<int32_t> cfg(depth, Pda::kDead), nends(depth, 0), ends(depth, 0);
  cfg[0] = walk_pda_.single(state, root_frame ? Pda::kRoot : Pda::kBase);
  std::vector<int32_t> accepted;
  PositionMasks out;
  const TokenIndex::TrieNode* node = nodes.data();
  int32_t* cf = cfg.data();
  int32_t* ne = nends.data();
  for (int32_t i = 1, n = static_cast<int32_t>(nodes.size()); i < n;) {
    const TokenIndex::TrieNode& nd = node[i];
    int d = nd.depth;
    int32_t c = cf[d - 1] == Pda::kDead ? Pda::kDead : walk_pda_.next(cf[d - 1], nd.byte);
    cf[d] = c;
    ne[d] = ne[d - 1];
    if (c != Pda::kDead && walk_pda_.bottom(c)) ends[ne[d]++] = d;
    if (c == Pda::kDead && (root_frame || ne[d] == 0)) {
      i = nd.end;
      continue;
    }
    for (int32_t k = nd.tok_begin; k < nd.tok_end; ++k) {
      if (c != Pda::kDead) {
        accepted.push_back(toks[k]);
      } else {
        for (int32_t e = 0; e < ne[d]; ++e) out.pops.push_back({toks[k], ends[e]});
      }
    }
    ++i;
  }
  if (accepted.size() >= static_cast<size_t>(v.mask_words())) {
    out.inside.dense.assign(v.mask_words(), 0);
    for (int32_t t : accepted) out.inside.dense[t >> 5] |= 1u << (t & 31);
  } else {
    out.inside.sparse = std::move(accepted);
  }
  return out;
}

}  // namespace nanovllm::structured
