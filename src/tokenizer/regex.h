// A compiled PCRE2 regular expression (UTF + Unicode properties, JIT when available) used by the
// Split / ByteLevel pre-tokenizers and the Replace normalizer/decoder. Thread-safe: matching
// state lives in per-call match data.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace nanovllm {

class Regex {
 public:
  // Throws nanovllm::Error with PCRE2's message when the pattern does not compile.
  explicit Regex(const std::string& pattern);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // All non-overlapping matches, left to right, as byte ranges [start, end) of s (valid UTF-8).
  // Empty matches are skipped.
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view s) const;

  const std::string& pattern() const { return pattern_; }

 private:
  std::string pattern_;
  void* code_ = nullptr;  // pcre2_code_8*
};

// Escapes s so that it matches literally inside a PCRE2 pattern.
std::string regex_escape(std::string_view s);

}  // namespace nanovllm
