// The tokenizer stored in a GGUF file's metadata (the tokenizer.* keys) and its translation into
// the tokenizer.json / tokenizer_config.json text that Tokenizer loads. Two vocabulary kinds:
// "gpt2" (byte-level BPE with stored merges; the pre-tokenizer is chosen by tokenizer.ggml.pre)
// and "llama" (SentencePiece BPE: scores instead of merges; merges are derived from the scores).
// The rules, and what is not supported, are in README.md ("GGUF vocabularies").
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace nanovllm {

struct GgufVocab {             // the tokenizer.* keys of a GGUF file
  std::string model;           // tokenizer.ggml.model: "gpt2" (byte-level BPE) | "llama" (SentencePiece) | others -> error
  std::string pre;             // tokenizer.ggml.pre ("" when absent)
  std::vector<std::string> tokens;    // tokenizer.ggml.tokens
  std::vector<float> scores;          // tokenizer.ggml.scores (may be empty)
  std::vector<int32_t> token_types;   // tokenizer.ggml.token_type (may be empty): 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte
  std::vector<std::string> merges;    // tokenizer.ggml.merges, "a b" (may be empty)
  std::optional<int> bos_id, eos_id, unk_id, pad_id, eot_id, eom_id;  // tokenizer.ggml.*_token_id
  std::optional<bool> add_bos, add_eos, add_space_prefix;              // tokenizer.ggml.add_bos_token / add_eos_token / add_space_prefix
  std::string chat_template;          // tokenizer.chat_template ("" when absent)
};

struct TokenizerFiles { std::string tokenizer_json, tokenizer_config_json; };

// HF tokenizer.json + tokenizer_config.json text equivalent to the GGUF vocabulary; `where`
// (the file name) goes into error messages. Throws nanovllm::Error for an unsupported model or
// pre-tokenizer, ids out of range, arrays of different lengths, a merge naming an unknown token.
TokenizerFiles tokenizer_files_from_gguf(const GgufVocab& v, const std::string& where);

// The ids that end generation: eos, eot and eom (each once, in that order; llama.cpp's
// end-of-generation set without its guesses by token text). For "llama" vocabularies eos
// defaults to 2 as in llama.cpp. Ids out of range are left out (tokenizer_files_from_gguf
// rejects them).
std::vector<int> gguf_eos_token_ids(const GgufVocab& v);

}  // namespace nanovllm
