// Added tokens ("added_tokens" in tokenizer.json): found in the input before the model runs.
// Matching is leftmost-longest over all tokens of one kind (HF uses an Aho-Corasick automaton
// with the same semantics), honouring single_word, lstrip and rstrip. Tokens with
// normalized=false match the raw text; normalized=true ones match normalized text.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace nanovllm {

class Normalizer;

struct AddedToken {
  int id = -1;
  std::string content;
  bool single_word = false, lstrip = false, rstrip = false, normalized = false, special = false;
};

// A piece of the input: an added token (id >= 0) or text to encode (id == -1) at [b, e).
struct Segment {
  int id;
  size_t b, e;
};

class AddedTokenMatcher {
 public:
  // `patterns` are the strings to search for (the token content, normalized when the token is),
  // parallel to `tokens`.
  void build(std::vector<AddedToken> tokens, std::vector<std::string> patterns);
  bool empty() const { return tokens_.empty(); }
  // Splits s into text and token segments covering all of s, in order.
  std::vector<Segment> split(std::string_view s) const;

 private:
  // Longest pattern starting at s[i], or -1.
  int longest_at(std::string_view s, size_t i) const;
  std::vector<AddedToken> tokens_;
  std::vector<std::string> patterns_;
  std::vector<int> by_first_byte_[256];  // pattern indices, longest first
};

}  // namespace nanovllm
