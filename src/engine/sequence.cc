#include "engine/sequence.h"

#include <algorithm>
#include <utility>

#include "util/check.h"

namespace nanovllm {

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone: return "";
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kAbort: return "abort";
    case FinishReason::kError: return "error";
  }
  return "";
}

Sequence::Sequence(uint64_t seq_id_, std::vector<int> prompt_ids, const SamplingParams& params_,
                   int block_size_)
    : seq_id(seq_id_), token_ids(std::move(prompt_ids)), params(params_), block_size(block_size_) {
  NV_CHECK_GT(block_size, 0, "block size must be positive");
  num_prompt_tokens = size();
  last_token = token_ids.empty() ? -1 : token_ids.back();
}

std::span<const int> Sequence::block(int i) const {
  NV_CHECK(i >= 0 && i < num_blocks(), "block index ", i, " out of range [0, ", num_blocks(), ")");
  const int begin = i * block_size;
  const int end = std::min(size(), begin + block_size);
  return std::span<const int>(token_ids.data() + begin, static_cast<size_t>(end - begin));
}

void Sequence::append_token(int id) {
  token_ids.push_back(id);
  last_token = id;
}

std::span<const int> Sequence::prompt_token_ids() const {
  return std::span<const int>(token_ids.data(), static_cast<size_t>(num_prompt_tokens));
}

std::span<const int> Sequence::completion_token_ids() const {
  return std::span<const int>(token_ids.data() + num_prompt_tokens,
                              static_cast<size_t>(num_completion_tokens()));
}

}  // namespace nanovllm
