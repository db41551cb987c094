// Normalizers of tokenizer.json ("normalizer"): applied to each piece of text that is not an
// added token, before pre-tokenization. Offsets are not tracked (nanovllm needs ids only).
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

namespace nanovllm {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  // Rewrites s (valid UTF-8) in place.
  virtual void normalize(std::string& s) const = 0;
};

// Builds the normalizer described by j; nullptr for JSON null. Supported types: NFC, NFD, NFKC,
// NFKD, Lowercase, Prepend, Replace, Strip, Sequence. Anything else throws nanovllm::Error
// naming the type.
std::unique_ptr<Normalizer> make_normalizer(const nlohmann::json& j);

// Replaces every non-overlapping occurrence of `from` in s by `to`, left to right.
std::string replace_all(std::string_view s, std::string_view from, std::string_view to);

}  // namespace nanovllm
