#include "structured/matcher.h"

#include <algorithm>
#include <cstring>

namespace nanovllm::structured {

namespace {
constexpr size_t kMaskCacheEntries = 8;

inline void set_bit(uint32_t* w, int32_t id) { w[id >> 5] |= 1u << (id & 31); }
inline bool has_bit(const uint32_t* w, int32_t id) { return (w[id >> 5] >> (id & 31)) & 1u; }
}  // namespace

GrammarMatcher::GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar)
    : g_(std::move(grammar)), pda_(g_->grammar()), config_(pda_.start()) {
  NV_CHECK(config_ != Pda::kDead, "GrammarMatcher: the grammar matches nothing");
}

void GrammarMatcher::reset() {
  config_ = pda_.start();
  terminated_ = false;
}

bool GrammarMatcher::can_end() const { return !terminated_ && pda_.config(config_).bottom; }

bool GrammarMatcher::must_end() const { return can_end() && pda_.config(config_).kernel.empty(); }

bool GrammarMatcher::is_allowed(int32_t id) {
  if (terminated_) return false;
  const TokenIndex& v = g_->vocab();
  if (v.is_eos(id)) return can_end();
  return v.in_trie(id) && pda_.run(config_, v.bytes(id)) != Pda::kDead;
}

bool GrammarMatcher::accept_token(int32_t id) {
  if (terminated_) return false;
  const TokenIndex& v = g_->vocab();
  if (v.is_eos(id)) {
    if (!can_end()) return false;
    terminated_ = true;
    return true;
  }
  if (!v.in_trie(id)) return false;
  int32_t c = pda_.run(config_, v.bytes(id));
  if (c == Pda::kDead) return false;
  config_ = c;
  return true;
}

bool GrammarMatcher::accept_bytes(std::string_view bytes) {
  if (terminated_) return false;
  int32_t c = pda_.run(config_, bytes);
  if (c == Pda::kDead) return false;
  config_ = c;
  return true;
}

std::vector<uint32_t> GrammarMatcher::next_token_bitmask() {
  std::vector<uint32_t> w(mask_words());
  fill_next_token_bitmask(w.data());
  return w;
}

void GrammarMatcher::fill_next_token_bitmask(uint32_t* words) {
  const TokenIndex& v = g_->vocab();
  size_t n = static_cast<size_t>(v.mask_words());
  if (terminated_) {
    std::memset(words, 0, n * sizeof(uint32_t));
    for (int32_t e : v.eos_ids()) set_bit(words, e);
    return;
  }
  for (auto& c : cache_) {
    if (c.config == config_) {
      std::memcpy(words, c.words.data(), n * sizeof(uint32_t));
      return;
    }
  }
  compute_mask(words);
  CachedMask* slot;
  if (cache_.size() < kMaskCacheEntries) {
    slot = &cache_.emplace_back();
  } else {
    slot = &cache_[cache_next_];
    cache_next_ = (cache_next_ + 1) % kMaskCacheEntries;
  }
  slot->config = config_;
  slot->words.assign(words, words + n);
}

void GrammarMatcher::compute_mask(uint32_t* words) {
  const TokenIndex& v = g_->vocab();
  std::memset(words, 0, static_cast<size_t>(v.mask_words()) * sizeof(uint32_t));
  // Copies: resolving pops interns new configurations, which may reallocate pda_'s tables.
  std::vector<int32_t> kernel = pda_.config(config_).kernel;
  bool bottom = pda_.config(config_).bottom;
  for (int32_t n : kernel) {
    Pda::Node nd = pda_.node(n);
    const PositionMasks& pm = g_->position(nd.state, nd.parent == Pda::kRoot);
    pm.inside.or_into(words);
    if (nd.parent < 0 || pm.pops.empty()) continue;
    int32_t after = pda_.after_pop(n);
    for (auto [tok, off] : pm.pops) {
      if (has_bit(words, tok)) continue;
      std::string_view rest = std::string_view(v.bytes(tok)).substr(static_cast<size_t>(off));
      if (pda_.run(after, rest) != Pda::kDead) set_bit(words, tok);
    }
  }
  if (bottom)
    for (int32_t e : v.eos_ids()) set_bit(words, e);
}

}  // namespace nanovllm::structured
