// The vocabulary as the grammar sees it: each token id's bytes (what it adds to the decoded
// text), arranged as a trie in depth-first preorder so that a mask computation is one linear
// pass that skips whole subtrees when the grammar rejects a prefix. Built once per tokenizer and
// shared (immutable, thread-safe) by every compiled constraint.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace nanovllm {
class Tokenizer;
}

namespace nanovllm::structured {

class TokenIndex {
 public:
  struct TrieNode {
    uint8_t byte;      // the byte leading to this node (unused for the root)
    uint16_t depth;    // bytes from the root
    int32_t end;       // preorder index just past this node's subtree
    int32_t tok_begin, tok_end;  // tokens whose bytes end exactly here: tokens()[begin, end)
  };

  // token_bytes[id] for id < token_bytes.size() (ids beyond it, up to vocab_size, are never
  // allowed: e.g. the padding rows of a model's embedding). Tokens with empty bytes and ids in
  // `excluded` (special tokens such as <|im_start|>) never match grammar text; ids in
  // `eos_ids` are allowed exactly when the grammar can end.
  TokenIndex(std::vector<std::string> token_bytes, std::vector<int32_t> eos_ids,
             const std::vector<int32_t>& excluded, int32_t vocab_size);
  // From a tokenizer: bytes from Tokenizer::token_bytes, special tokens excluded. vocab_size is
  // the model's logits width (>= the tokenizer's ids; -1: the tokenizer's vocab_size()).
  static std::shared_ptr<const TokenIndex> from_tokenizer(const Tokenizer& tok, std::vector<int32_t> eos_ids,
                                                          int32_t vocab_size = -1);

  int32_t vocab_size() const { return vocab_size_; }
  // uint32 words of an allowed-token bitmask: ceil(vocab_size / 32); bit (id & 31) of word
  // id >> 5 set = id allowed.
  int32_t mask_words() const { return (vocab_size_ + 31) / 32; }
  const std::string& bytes(int32_t id) const;  // "" for ids without text
  const std::vector<int32_t>& eos_ids() const { return eos_ids_; }
  bool is_eos(int32_t id) const;
  // True when the token can be matched against grammar text (has bytes, not excluded).
  bool in_trie(int32_t id) const { return id >= 0 && id < static_cast<int32_t>(in_trie_.size()) && in_trie_[id]; }

  const std::vector<TrieNode>& nodes() const { return nodes_; }  // nodes()[0] is the root
  const std::vector<int32_t>& tokens() const { return tokens_; }
  size_t max_token_bytes() const { return max_len_; }

 private:
  int32_t vocab_size_;
  std::vector<std::string> bytes_;
  std::vector<int32_t> eos_ids_;
  std::vector<char> in_trie_;
  std::vector<TrieNode> nodes_;
  std::vector<int32_t> tokens_;
  size_t max_len_ = 0;
};

}  // namespace nanovllm::structured
