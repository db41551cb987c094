#include "structured/token_index.h"

#include <algorithm>
#include <numeric>

#include "tokenizer/tokenizer.h"
#include "util/check.h"

namespace nanovllm::structured {

TokenIndex::TokenIndex(std::vector<std::string> token_bytes, std::vector<int32_t> eos_ids,
                       const std::vector<int32_t>& excluded, int32_t vocab_size)
    : vocab_size_(vocab_size), bytes_(std::move(token_bytes)), eos_ids_(std::move(eos_ids)) {
  NV_CHECK(vocab_size_ > 0, "TokenIndex: vocab_size must be positive");
  if (bytes_.size() > static_cast<size_t>(vocab_size_)) bytes_.resize(vocab_size_);
  for (int32_t e : eos_ids_)
    NV_CHECK(e >= 0 && e < vocab_size_, "TokenIndex: eos id ", e, " outside the vocabulary of ", vocab_size_);
  in_trie_.assign(bytes_.size(), 0);
  for (size_t i = 0; i < bytes_.size(); ++i) in_trie_[i] = !bytes_[i].empty();
  for (int32_t x : excluded)
    if (x >= 0 && x < static_cast<int32_t>(in_trie_.size())) in_trie_[x] = 0;
  for (int32_t e : eos_ids_)
    if (e < static_cast<int32_t>(in_trie_.size())) in_trie_[e] = 0;  // EOS is handled apart

  std::vector<int32_t> order;
  for (size_t i = 0; i < bytes_.size(); ++i)
    if (in_trie_[i]) order.push_back(static_cast<int32_t>(i));
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return bytes_[a] < bytes_[b] || (bytes_[a] == bytes_[b] && a < b); });

  // Preorder construction: `path` holds the nodes of the previous token's bytes.
  nodes_.push_back({0, 0, 0, 0, 0});
  std::vector<int32_t> path{0};
  const std::string* prev = nullptr;
  for (int32_t id : order) {
    const std::string& b = bytes_[id];
    NV_CHECK(b.size() < 65535, "TokenIndex: token ", id, " has ", b.size(), " bytes");
    max_len_ = std::max(max_len_, b.size());
    size_t lcp = 0;
    if (prev)
      while (lcp < b.size() && lcp < prev->size() && b[lcp] == (*prev)[lcp]) ++lcp;
    while (path.size() > lcp + 1) {
      nodes_[path.back()].end = static_cast<int32_t>(nodes_.size());
      path.pop_back();
    }
    for (size_t d = lcp; d < b.size(); ++d) {
      int32_t t = static_cast<int32_t>(tokens_.size());
      path.push_back(static_cast<int32_t>(nodes_.size()));
      nodes_.push_back({static_cast<uint8_t>(b[d]), static_cast<uint16_t>(d + 1), 0, t, t});
    }
    // Sorted order: this node's tokens are added right after it is created (or right after its
    // previous token, for duplicate byte strings), so its range in tokens_ stays contiguous.
    tokens_.push_back(id);
    nodes_[path.back()].tok_end = static_cast<int32_t>(tokens_.size());
    prev = &b;
  }
  while (!path.empty()) {
    nodes_[path.back()].end = static_cast<int32_t>(nodes_.size());
    path.pop_back();
  }
}

std::shared_ptr<const TokenIndex> TokenIndex::from_tokenizer(const Tokenizer& tok, std::vector<int32_t> eos_ids,
                                                             int32_t vocab_size) {
  int32_t n = tok.vocab_size();
  if (vocab_size < 0) vocab_size = n;
  std::vector<std::string> bytes(std::min(n, vocab_size));
  std::vector<int32_t> excluded;
  for (int32_t id = 0; id < static_cast<int32_t>(bytes.size()); ++id) {
    bytes[id] = tok.token_bytes(id);
    if (tok.is_special(id)) excluded.push_back(id);
  }
  return std::make_shared<const TokenIndex>(std::move(bytes), std::move(eos_ids), excluded, vocab_size);
}

const std::string& TokenIndex::bytes(int32_t id) const {
  static const std::string kNone;
  return id >= 0 && id < static_cast<int32_t>(bytes_.size()) ? bytes_[id] : kNone;
}

bool TokenIndex::is_eos(int32_t id) const {
  return std::find(eos_ids_.begin(), eos_ids_.end(), id) != eos_ids_.end();
}

}  // namespace nanovllm::structured
