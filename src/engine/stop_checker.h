// The one place that decides whether and why a completion finishes after a sampled token
// (vLLM's check_stop). Every token-driven finish is decided here, once, in this order:
//   error   the grammar refused the token (a bug of the mask: this request ends, not the engine)
//   stop    a stop string matched (the text is cut before it), the grammar ended (EOS taken, or
//           nothing but EOS may follow; ignore_eos or not), an EOS token (unless ignore_eos) or
//           a stop_token_ids token (also with ignore_eos, like vLLM) once min_tokens were generated
//   length  max_tokens generated, or the sequence reached max_seq_len (min(max_model_len, cache
//           tokens + 1): a sequence never needs more blocks than the cache has)
// The other finishes are events, not decisions about a token: abort (the caller), error at
// admission (a request that can never run); the engine records them through the same finish
// path (LLMEngine::finish), which sets a completion's reason exactly once.
#pragma once
#include <span>
#include <vector>

#include "engine/sequence.h"
#include "nanovllm/request_output.h"

namespace nanovllm {

struct Completion;

// The token rules alone (EOS, stop ids, min_tokens, length) for a sequence that just got `token`
// appended. Scheduler tests use these without a completion.
FinishReason token_stop_reason(const Sequence& seq, int token, std::span<const int> eos_ids, int max_seq_len);

class StopChecker {
 public:
  StopChecker(std::vector<int> eos_ids, int max_seq_len) : eos_ids_(std::move(eos_ids)), max_seq_len_(max_seq_len) {}
  // After `token` was appended to c.seq: feeds it to the completion's sampling state, output
  // stream (text, stop strings, logprobs) and grammar, and returns why it finishes (kNone: it goes
  // on). Sets c.error when the reason is kError.
  FinishReason check(Completion& c, int token, const TokenLogprobs* logprobs) const;

 private:
  std::vector<int> eos_ids_;
  int max_seq_len_;
};

}  // namespace nanovllm
