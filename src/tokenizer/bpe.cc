#include "tokenizer/bpe.h"

#include <algorithm>
#include <cstdio>
#include <queue>

#include "tokenizer/utf8.h"
#include "util/check.h"

namespace nanovllm {
namespace {

constexpr uint64_t kEmpty = ~0ull;
constexpr size_t kCacheMaxEntries = 1 << 16;  // cleared when full; bounds memory
constexpr size_t kCacheMaxWordBytes = 256;     // longer words are rare and not worth caching

uint64_t mix(uint64_t x) {  // splitmix64 finalizer
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

}  // namespace

BpeModel::BpeModel(TokenizerJson& tj, BpeOptions opt) : opt_(std::move(opt)) {
  arena_ = std::move(tj.arena);
  int max_id = -1;
  for (auto& [t, id] : tj.vocab) max_id = std::max(max_id, id);
  id_to_tok_.assign(max_id + 1, ArenaStr{0, UINT32_MAX});
  size_t cap = 16;
  while (cap < tj.vocab.size() * 2 + 16) cap <<= 1;
  vocab_slots_.assign(cap, -1);
  vocab_mask_ = cap - 1;
  for (auto& [t, id] : tj.vocab) {
    std::string_view s = std::string_view(arena_).substr(t.off, t.len);
    // A token listed twice keeps its last id (like a JSON object read into a map); an id listed
    // twice keeps its last token.
    for (uint64_t h = std::hash<std::string_view>{}(s) & vocab_mask_;; h = (h + 1) & vocab_mask_) {
      int32_t& slot = vocab_slots_[h];
      if (slot < 0) {
        slot = id;
        ++vocab_count_;
        break;
      }
      if (tok(slot) == s) {
        slot = id;
        break;
      }
    }
    id_to_tok_[id] = t;
  }
  for (int& x : small_cp_id_) x = -1;
  for (int& x : byte_id_) x = -1;
  for (uint32_t cp = 0; cp < 324; ++cp) {
    std::string s;
    utf8::append_cp(s, cp);
    small_cp_id_[cp] = find_vocab(s);
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    byte_id_[b] = find_vocab(name);
  }
  if (opt_.unk_token) {
    int u = find_vocab(*opt_.unk_token);
    NV_CHECK(u >= 0, "tokenizer: unk_token '", *opt_.unk_token, "' is not in the vocabulary");
    unk_id_ = u;
  }

  cap = 16;
  while (cap < tj.merges.size() * 2 + 16) cap <<= 1;
  merges_.assign(cap, MergeEntry{kEmpty, 0, 0});
  merge_mask_ = cap - 1;
  size_t prefix_len = opt_.continuing_subword_prefix.size();
  std::string merged;
  for (size_t r = 0; r < tj.merges.size(); ++r) {
    std::string_view a = std::string_view(arena_).substr(tj.merges[r].first.off, tj.merges[r].first.len);
    std::string_view b = std::string_view(arena_).substr(tj.merges[r].second.off, tj.merges[r].second.len);
    int ia = find_vocab(a), ib = find_vocab(b);
    NV_CHECK(ia >= 0 && ib >= 0, "tokenizer: merge ", r, " ('", a, "' '", b,
             "') uses a token missing from the vocabulary");
    merged.assign(a);
    merged.append(b.size() >= prefix_len ? b.substr(prefix_len) : b);
    int im = find_vocab(merged);
    NV_CHECK(im >= 0, "tokenizer: merge ", r, " ('", a, "' '", b, "') gives '", merged,
             "' which is not in the vocabulary");
    // A repeated pair keeps its first (lowest) rank.
    if (find_merge(ia, ib).first < 0) insert_merge(ia, ib, static_cast<int>(r), im);
  }
}

int BpeModel::find_vocab(std::string_view s) const {
  for (uint64_t h = std::hash<std::string_view>{}(s) & vocab_mask_;; h = (h + 1) & vocab_mask_) {
    int32_t slot = vocab_slots_[h];
    if (slot < 0) return -1;
    if (tok(slot) == s) return slot;
  }
}

void BpeModel::insert_merge(int a, int b, int rank, int id) {
  uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  for (uint64_t h = mix(key) & merge_mask_;; h = (h + 1) & merge_mask_) {
    if (merges_[h].key == kEmpty) {
      merges_[h] = {key, rank, id};
      return;
    }
  }
}

std::pair<int, int> BpeModel::find_merge(int a, int b) const {
  uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  for (uint64_t h = mix(key) & merge_mask_;; h = (h + 1) & merge_mask_) {
    const auto& e = merges_[h];
    if (e.key == key) return {e.rank, e.id};
    if (e.key == kEmpty) return {-1, -1};
  }
}

std::optional<int> BpeModel::token_to_id(std::string_view t) const {
  int id = find_vocab(t);
  if (id < 0) return std::nullopt;
  return id;
}

bool BpeModel::id_to_token(int id, std::string_view* t) const {
  if (id < 0 || id >= static_cast<int>(id_to_tok_.size()) || id_to_tok_[id].len == UINT32_MAX) return false;
  *t = tok(id);
  return true;
}

// One symbol per character (HF: prefix/suffix applied, byte fallback, then unk with fuse_unk).
void BpeModel::initial_symbols(std::string_view w, std::vector<Sym>& syms) const {
  bool affix = !opt_.continuing_subword_prefix.empty() || !opt_.end_of_word_suffix.empty();
  int unk = -1, unk_len = 0;  // pending unk symbol (id, byte length); -1: none
  auto add = [&](int id, int len) { syms.push_back({id, -1, -1, len}); };
  size_t i = 0;
  std::string tmp;
  while (i < w.size()) {
    size_t start = i;
    uint32_t cp = utf8::next_cp(w, i);
    int len = static_cast<int>(i - start);
    int id = -1;
    if (!affix && cp < 324) {
      id = small_cp_id_[cp];
    } else {
      std::string_view s = w.substr(start, len);
      if (affix) {
        tmp.clear();
        if (start > 0) tmp += opt_.continuing_subword_prefix;
        tmp += s;
        if (i == w.size()) tmp += opt_.end_of_word_suffix;
        s = tmp;
      }
      id = find_vocab(s);
    }
    if (id >= 0) {
      if (unk >= 0) {
        add(unk, unk_len);
        unk = -1;
      }
      add(id, len);
      continue;
    }
    if (opt_.byte_fallback) {
      bool all = true;
      for (size_t k = start; k < i; ++k) all = all && byte_id_[static_cast<uint8_t>(w[k])] >= 0;
      if (all) {
        for (size_t k = start; k < i; ++k) add(byte_id_[static_cast<uint8_t>(w[k])], 1);
        continue;
      }
    }
    if (unk_id_) {
      if (unk >= 0 && opt_.fuse_unk) {
        unk_len += len;
      } else {
        if (unk >= 0) add(unk, unk_len);
        unk = *unk_id_;
        unk_len = len;
      }
    }
    // No unk token: HF drops the character silently; so do we.
  }
  if (unk >= 0) add(unk, unk_len);
  for (size_t k = 0; k < syms.size(); ++k) {
    syms[k].prev = static_cast<int>(k) - 1;
    syms[k].next = k + 1 < syms.size() ? static_cast<int>(k) + 1 : -1;
  }
}

void BpeModel::merge_word(std::string_view w, std::vector<int>& out) const {
  std::vector<Sym> syms;
  syms.reserve(w.size());
  initial_symbols(w, syms);
  size_t n = syms.size();
  if (n <= 24) {
    // Short words: repeated scans are cheaper than a heap. Lowest rank wins, leftmost on ties.
    std::vector<int> ids(n);
    for (size_t k = 0; k < n; ++k) ids[k] = syms[k].id;
    while (ids.size() > 1) {
      int best_rank = -1, best_pos = -1, best_id = -1;
      for (size_t k = 0; k + 1 < ids.size(); ++k) {
        auto [rank, id] = find_merge(ids[k], ids[k + 1]);
        if (rank >= 0 && (best_rank < 0 || rank < best_rank)) {
          best_rank = rank;
          best_pos = static_cast<int>(k);
          best_id = id;
        }
      }
      if (best_rank < 0) break;
      ids[best_pos] = best_id;
      ids.erase(ids.begin() + best_pos + 1);
    }
    out.insert(out.end(), ids.begin(), ids.end());
    return;
  }
  // Long words: a min-heap of candidate merges keyed by (rank, position); stale entries (whose
  // symbols changed since they were pushed) are skipped when popped.
  struct Cand {
    int rank, pos, id;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
  auto push = [&](int pos) {
    int nx = syms[pos].next;
    if (nx < 0) return;
    auto [rank, id] = find_merge(syms[pos].id, syms[nx].id);
    if (rank >= 0) heap.push({rank, pos, id});
  };
  for (size_t k = 0; k + 1 < n; ++k) push(static_cast<int>(k));
  while (!heap.empty()) {
    Cand c = heap.top();
    heap.pop();
    Sym& left = syms[c.pos];
    if (left.len == 0 || left.next < 0) continue;
    Sym& right = syms[left.next];
    auto [rank, id] = find_merge(left.id, right.id);
    if (rank != c.rank || id != c.id) continue;  // stale
    left.id = id;
    left.len += right.len;
    right.len = 0;
    left.next = right.next;
    if (right.next >= 0) syms[right.next].prev = c.pos;
    if (left.prev >= 0) push(left.prev);
    push(c.pos);
  }
  for (int k = 0; k >= 0 && k < static_cast<int>(n); k = syms[k].next) out.push_back(syms[k].id);
}

void BpeModel::tokenize(std::string_view word, std::vector<int>& out) const {
  if (word.empty()) return;
  if (opt_.ignore_merges) {
    if (int id = find_vocab(word); id >= 0) {
      out.push_back(id);
      return;
    }
  }
  bool cacheable = word.size() <= kCacheMaxWordBytes;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mu_);
    auto it = cache_.find(word);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  size_t before = out.size();
  merge_word(word, out);
  if (cacheable) {
    std::vector<int> ids(out.begin() + before, out.end());
    std::lock_guard<std::mutex> lock(cache_mu_);
    if (cache_.size() >= kCacheMaxEntries) cache_.clear();
    cache_.emplace(std::string(word), std::move(ids));
  }
}

}  // namespace nanovllm
