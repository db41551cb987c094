// IncrementalDetokenizer: streaming decode (incremental.cc explains how).
#pragma once
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace nanovllm {

// Streaming decode: push ids one at a time; returns text that is new and complete (never a
// partial UTF-8 character). Without prompt ids, the concatenation of all pushes + finish()
// equals decode(all pushed ids). With prompt ids, it equals the text that decoding
// prompt + pushed adds after decode(prompt) (so a SentencePiece "▁word" right after the prompt
// keeps its space).
class IncrementalDetokenizer {
 public:
  IncrementalDetokenizer(const Tokenizer& tok, bool skip_special_tokens, std::vector<int> prompt_ids = {});
  std::string push(int id);
  std::string finish();

 private:
  std::string emit(bool final);
  const Tokenizer& tok_;
  bool skip_;
  std::vector<int> ids_;     // prompt + pushed
  size_t ctx_ = 0;           // decoding window start (context for leading-space handling)
  size_t read_ = 0;          // ids before this have had their text emitted
  std::string base_;         // decode_raw(ids_[ctx_, read_))
  std::string pending_;      // raw text held back for clean_up_tokenization_spaces
  bool cleanup_ = false;
};

}  // namespace nanovllm
