// Decoders of tokenizer.json ("decoder"): turn the token strings of ids back into text. Each
// step maps a list of token strings to a new list (HF's decode_chain); the result is joined.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace nanovllm {

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
  // True for ByteFallback (or a Sequence holding it): "<0xAB>" tokens combine across ids.
  virtual bool uses_byte_fallback() const { return false; }
};

// Builds the decoder described by j; nullptr for JSON null. Supported types: ByteLevel,
// ByteFallback, Fuse, Strip, Replace, Metaspace, Sequence. Anything else throws
// nanovllm::Error naming the type.
std::unique_ptr<Decoder> make_decoder(const nlohmann::json& j);

// True when tok is a byte-fallback token "<0xAB>"; *byte receives its value.
bool parse_byte_token(std::string_view tok, unsigned char* byte);

}  // namespace nanovllm
