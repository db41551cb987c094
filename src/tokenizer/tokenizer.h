// Hugging Face `tokenizers`-compatible tokenizer driven by tokenizer.json (+ tokenizer_config.json
// and generation_config.json). Supports the BPE model (byte-level and SentencePiece-style), the
// normalizers / pre-tokenizers / post-processors / decoders listed in README.md, added and
// special tokens. encode() and decode() give exactly HF's ids and text for supported files.
// Thread-safe: all methods are const (the BPE word cache has its own lock).
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace nanovllm {

struct GgufVocab;

class Tokenizer {
 public:
  ~Tokenizer();
  // Loads <dir>/tokenizer.json, and tokenizer_config.json / generation_config.json when present.
  static std::unique_ptr<Tokenizer> from_dir(const std::string& dir);
  static std::unique_ptr<Tokenizer> from_json(const std::string& tokenizer_json_text,
                                              const std::string& tokenizer_config_json_text = "");
  // The tokenizer stored in a GGUF file's metadata (gguf_vocab.h); `where` (the file name) goes
  // into error messages. eos_token_ids() are the vocabulary's eos, eot and eom ids.
  static std::unique_ptr<Tokenizer> from_gguf_vocab(const GgufVocab& vocab, const std::string& where);

  // Invalid UTF-8 in `text` is replaced by U+FFFD first (like Python's errors="replace").
  std::vector<int> encode(std::string_view text, bool add_special_tokens = true) const;
  // Unknown ids are skipped (HF does the same).
  std::string decode(const std::vector<int>& ids, bool skip_special_tokens = false) const;

  int vocab_size() const;  // including added tokens
  std::optional<int> token_to_id(std::string_view token) const;
  std::string id_to_token(int id) const;  // "" if unknown
  bool is_special(int id) const;
  int bos_token_id() const;              // -1 if none
  std::vector<int> eos_token_ids() const;  // generation_config eos_token_id, else tokenizer_config eos_token
  std::string bos_token() const;         // "" if none
  std::string eos_token() const;         // "" if none
  const std::string& chat_template() const;  // tokenizer_config "chat_template" ("" if none)
  const nlohmann::json& tokenizer_config() const;

  // --- Lower-level pieces (used by IncrementalDetokenizer and tests). ---
  // decode() without clean_up_tokenization_spaces, over ids[0, n).
  std::string decode_raw(const int* ids, size_t n, bool skip_special_tokens) const;
  // Whether tokenizer_config.json asks decode() to clean up spaces before punctuation.
  bool clean_up_tokenization_spaces() const;
  // transformers' clean_up_tokenization: " ." -> "." etc.
  static std::string clean_up_spaces(std::string_view text);
  // True for "<0xAB>" ids when the decoder joins byte-fallback runs (their text is not final
  // until a non-byte id follows).
  bool is_fallback_byte(int id) const;
  // True when decode(..., skip) drops this id (unknown, or special and skip).
  bool is_dropped(int id, bool skip_special_tokens) const;
  // The bytes this id adds to the decoded text in the middle of a sequence, before UTF-8
  // replacement and clean-up: a byte-fallback token's byte, a byte-level token's bytes, a
  // SentencePiece "▁word" with its space. "" for unknown ids. (Used by constrained decoding.)
  std::string token_bytes(int id) const;

  struct Impl;

 private:
  Tokenizer();
  std::unique_ptr<Impl> impl_;
};

}  // namespace nanovllm
