#include "engine/stop_checker.h"

#include <algorithm>
#include <string>

#include "engine/request.h"

namespace nanovllm {

FinishReason token_stop_reason(const Sequence& seq, int token, std::span<const int> eos_ids, int max_seq_len) {
  const SamplingParams& p = seq.params;
  const int nc = seq.num_completion_tokens();
  if (nc >= p.min_tokens) {
    if (!p.ignore_eos && std::find(eos_ids.begin(), eos_ids.end(), token) != eos_ids.end())
      return FinishReason::kStop;
    const auto& st = p.stop_token_ids;
    if (std::find(st.begin(), st.end(), token) != st.end()) return FinishReason::kStop;
  }
  if (nc >= p.max_tokens) return FinishReason::kLength;
  if (seq.size() >= max_seq_len) return FinishReason::kLength;
  return FinishReason::kNone;
}

FinishReason StopChecker::check(Completion& c, int token, const TokenLogprobs* logprobs) const {
  c.sampling.on_token(token);
  if (c.thinking) c.thinking->on_token(token);
  const bool stop_string = c.output.on_token(token, c.request.params.logprobs >= 0 ? logprobs : nullptr);
  if (c.grammar) {
    if (!c.grammar->accept(token)) {
      c.error = "internal error: sampled token " + std::to_string(token) + " is outside the output constraint";
      return FinishReason::kError;
    }
    if (c.grammar->done()) return FinishReason::kStop;
  }
  if (stop_string) return FinishReason::kStop;
  return token_stop_reason(c.seq, token, eos_ids_, max_seq_len_);
}

}  // namespace nanovllm
