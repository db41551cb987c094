#include "structured/grammar_cache.h"

namespace nanovllm::structured {

GrammarCache::GrammarCache(std::shared_ptr<const TokenIndex> vocab, size_t capacity)
    : vocab_(std::move(vocab)), capacity_(std::max<size_t>(1, capacity)) {}

std::shared_ptr<const CompiledGrammar> GrammarCache::get(const std::string& key, const std::function<Grammar()>& build) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = index_.find(key);
    if (it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      return it->second->second;
    }
  }
  // Built outside the lock: compiling a large schema must not stall other requests.
  auto compiled = compile(build(), vocab_);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(key);
  if (it != index_.end()) return it->second->second;  // built concurrently by another request
  lru_.emplace_front(key, compiled);
  index_[key] = lru_.begin();
  if (lru_.size() > capacity_) {
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
  return compiled;
}

size_t GrammarCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lru_.size();
}

}  // namespace nanovllm::structured
