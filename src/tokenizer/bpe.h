// The BPE model of tokenizer.json ("model": {"type": "BPE"}): byte-level (GPT-2, Qwen, Llama-3)
// and SentencePiece-style (Llama-2: byte_fallback, unk, fuse_unk). Words are merged by merge
// rank, lowest first, leftmost on ties (as HF's BPE does). Results for words are cached.
#pragma once
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tokenizer/tokenizer_json.h"

namespace nanovllm {

// std::unordered_map<std::string, V> that can be queried with a string_view.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
template <class V>
using StringMap = std::unordered_map<std::string, V, StringHash, std::equal_to<>>;

struct BpeOptions {
  std::optional<std::string> unk_token;
  std::string continuing_subword_prefix;  // "" when absent
  std::string end_of_word_suffix;         // "" when absent
  bool fuse_unk = false;
  bool byte_fallback = false;
  bool ignore_merges = false;
};

class BpeModel {
 public:
  // Takes model.vocab / model.merges (merges in rank order) from `tj` (its arena is moved).
  // Throws nanovllm::Error when a merge names a token missing from the vocabulary.
  BpeModel(TokenizerJson& tj, BpeOptions opt);

  // Appends the ids of one pre-tokenized word.
  void tokenize(std::string_view word, std::vector<int>& out) const;

  std::optional<int> token_to_id(std::string_view tok) const;
  // The token string of id; false when id is not in the model vocabulary.
  bool id_to_token(int id, std::string_view* tok) const;
  int max_id() const { return static_cast<int>(id_to_tok_.size()) - 1; }
  size_t vocab_size() const { return vocab_count_; }

 private:
  struct Sym {
    int id;
    int prev, next;  // neighbours in the linked list, -1 at the ends
    int len;         // bytes of the word it covers; 0 once merged away
  };
  // Merge lookup: (left id, right id) -> (rank, merged id), open addressing.
  struct MergeEntry {
    uint64_t key;
    int rank, id;
  };
  std::pair<int, int> find_merge(int a, int b) const;  // (-1, -1) when none
  void insert_merge(int a, int b, int rank, int id);
  void merge_word(std::string_view word, std::vector<int>& out) const;
  void initial_symbols(std::string_view word, std::vector<Sym>& syms) const;

  // Vocabulary: token bytes live in arena_; id_to_tok_[id] locates them (len UINT32_MAX: no
  // such id); vocab_slots_ is an open-addressing table of ids keyed by the token's bytes.
  int find_vocab(std::string_view tok) const;
  std::string arena_;
  std::vector<ArenaStr> id_to_tok_;
  std::vector<int32_t> vocab_slots_;
  uint64_t vocab_mask_ = 0;
  size_t vocab_count_ = 0;
  std::string_view tok(int id) const { return std::string_view(arena_).substr(id_to_tok_[id].off, id_to_tok_[id].len); }
  std::vector<MergeEntry> merges_;
  uint64_t merge_mask_ = 0;
  int small_cp_id_[324];  // code point -> id for single-char tokens below 324 (-1: none)
  int byte_id_[256];      // <0xAB> byte-fallback token ids (-1: none)
  std::optional<int> unk_id_;
  BpeOptions opt_;

  mutable std::mutex cache_mu_;
  mutable StringMap<std::vector<int>> cache_;
};

}  // namespace nanovllm
