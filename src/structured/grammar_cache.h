// Compiled constraints shared between requests: the position tables a CompiledGrammar fills are
// the expensive part (a trie walk per grammar position), so requests repeating a constraint
// (same schema, same tools) should get the same CompiledGrammar. LRU, thread-safe.
#pragma once
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "structured/compiled_grammar.h"

namespace nanovllm::structured {

class GrammarCache {
 public:
  explicit GrammarCache(std::shared_ptr<const TokenIndex> vocab, size_t capacity = 64);
  // The grammar for `key` (e.g. "json_schema\n" + schema text), built with `build` on a miss.
  // A ConstraintError from build propagates and nothing is cached.
  std::shared_ptr<const CompiledGrammar> get(const std::string& key, const std::function<Grammar()>& build);
  size_t size() const;
  const std::shared_ptr<const TokenIndex>& vocab() const { return vocab_; }

 private:
  std::shared_ptr<const TokenIndex> vocab_;
  size_t capacity_;
  mutable std::mutex mu_;
  std::list<std::pair<std::string, std::shared_ptr<const CompiledGrammar>>> lru_;  // front: newest
  std::unordered_map<std::string, decltype(lru_)::iterator> index_;
};

}  // namespace nanovllm::structured
