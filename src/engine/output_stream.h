// A request's output as the caller sees it: the generated text (incremental detokenization of
// the completion tokens only, so the text equals decode(completion ids) like nano-vLLM), stop
// strings (searched in the new text only; the text is cut before the match), logprobs, and how
// much of it has been streamed.
#pragma once
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "nanovllm/request_output.h"
#include "nanovllm/sampling_params.h"
#include "tokenizer/incremental.h"

namespace nanovllm {

class OutputStream {
 public:
  // tokenizer: null for a model without one (token ids only; stop strings then are rejected by
  // the engine). params must outlive this object (the owning Request holds both).
  OutputStream(const Tokenizer* tokenizer, const SamplingParams& params);

  // After each generated token. True when a stop string matched: the text now ends before it.
  bool on_token(int token, const TokenLogprobs* logprobs);
  // The request finished: releases the text the detokenizer held back (none after a stop
  // string, whose text is final).
  void finish();

  bool stopped_by_string() const { return stopped_by_string_; }
  // The stop string that matched ("" when none did).
  const std::string& matched_stop() const { return matched_stop_; }
  const std::string& text() const { return text_; }
  const std::vector<TokenLogprobs>& logprobs() const { return logprobs_; }

  // Moves what is new since the last call into d: the ids of `completion` (the sequence's
  // generated tokens), logprobs and text. Unless `final`, text that may be the start of a stop
  // string (max stop length - 1 bytes, cut on a UTF-8 character boundary) is held back.
  // Returns whether d got anything.
  bool take_delta(std::span<const int> completion, bool final, StreamDelta& d);

 private:
  const SamplingParams& params_;
  std::unique_ptr<IncrementalDetokenizer> detok_;  // null without a tokenizer
  size_t max_stop_len_ = 0;
  std::string text_;
  std::vector<TokenLogprobs> logprobs_;
  bool stopped_by_string_ = false;
  std::string matched_stop_;
  size_t streamed_text_ = 0;  // bytes of text_ already in deltas
  size_t streamed_tokens_ = 0;
  size_t streamed_logprobs_ = 0;
};

}  // namespace nanovllm
