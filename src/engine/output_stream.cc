#include "engine/output_stream.h"

#include <algorithm>

namespace nanovllm {

OutputStream::OutputStream(const Tokenizer* tokenizer, const SamplingParams& params)
    : params_(params) {
  if (tokenizer)
    detok_ = std::make_unique<IncrementalDetokenizer>(*tokenizer, params.skip_special_tokens);
  for (const auto& s : params.stop) max_stop_len_ = std::max(max_stop_len_, s.size());
}

bool OutputStream::on_token(int token, const TokenLogprobs* logprobs) {
  if (logprobs) logprobs_.push_back(*logprobs);
  if (!detok_) return false;
  const size_t before = text_.size();
  text_ += detok_->push(token);
  if (params_.stop.empty()) return false;
  // A match must end in the new text, so it starts at most max_stop_len_ - 1 bytes before it.
  const size_t from = before >= max_stop_len_ ? before - max_stop_len_ + 1 : 0;
  size_t best = std::string::npos;
  const std::string* which = nullptr;
  for (const auto& s : params_.stop) {
    const size_t at = text_.find(s, from);
    if (at < best) {  // the earliest match; the first listed wins a tie
      best = at;
      which = &s;
    }
  }
  if (best == std::string::npos) return false;
  matched_stop_ = *which;
  text_.resize(best);
  stopped_by_string_ = true;
  return true;
}

void OutputStream::finish() {
  if (detok_ && !stopped_by_string_) text_ += detok_->finish();
}

bool OutputStream::take_delta(std::span<const int> completion, bool final, StreamDelta& d) {
  d.token_ids.assign(completion.begin() + long(streamed_tokens_), completion.end());
  streamed_tokens_ = completion.size();
  d.logprobs.assign(logprobs_.begin() + long(streamed_logprobs_), logprobs_.end());
  streamed_logprobs_ = logprobs_.size();
  size_t upto = text_.size();
  if (!final && max_stop_len_ > 0) {
    upto = upto > max_stop_len_ - 1 ? upto - (max_stop_len_ - 1) : 0;
    while (upto > streamed_text_ && (static_cast<unsigned char>(text_[upto]) & 0xC0) == 0x80)
      --upto;
  }
  d.text.clear();
  if (upto > streamed_text_) {
    d.text = text_.substr(streamed_text_, upto - streamed_text_);
    streamed_text_ = upto;
  }
  return !d.token_ids.empty() || !d.text.empty();
}

}  // namespace nanovllm
