#include "engine/request.h"

#include <utility>

namespace nanovllm {

Completion::Completion(Request& request_, int index_, uint64_t seq_id, std::vector<int> prompt_ids,
                       uint64_t seed, int block_size, std::span<const int> eos_ids, const Tokenizer* tokenizer)
    : request(request_),
      index(index_),
      seq(seq_id, std::move(prompt_ids), request_.params, block_size),
      sampling(request_.params, seed, seq.prompt_token_ids(), eos_ids),
      output(tokenizer, request_.params) {
  seq.owner = this;
}

RequestOutput Completion::final_output() const {
  RequestOutput o;
  o.request_id = request.id;
  o.index = index;
  const auto prompt = seq.prompt_token_ids();
  const auto completion = seq.completion_token_ids();
  o.prompt_token_ids.assign(prompt.begin(), prompt.end());
  o.token_ids.assign(completion.begin(), completion.end());
  o.text = output.text();
  o.finished = true;
  o.finish_reason = finish_reason_name(seq.finish_reason);
  o.error = error;
  o.stop_reason = output.matched_stop();
  o.prompt_logprobs = request.prompt_logprobs;
  if (embed) {
    o.token_ids.clear();
    o.text.clear();
    o.embedding = embedding;
  }
  o.num_cached_tokens = num_cached_tokens;
  o.logprobs = output.logprobs();
  return o;
}

bool Completion::next_delta(bool final, StreamDelta& d) {
  d.request_id = request.id;
  d.index = index;
  const bool any = output.take_delta(seq.completion_token_ids(), final, d);
  d.finished = final;
  d.finish_reason = final ? finish_reason_name(seq.finish_reason) : "";
  d.error = error;
  d.stop_reason = final ? output.matched_stop() : "";
  d.num_prompt_tokens = seq.num_prompt_tokens;
  d.num_generated_tokens = seq.num_completion_tokens();
  d.num_cached_tokens = num_cached_tokens;
  if (final) d.prompt_logprobs = request.prompt_logprobs;
  if (embed) {
    d.token_ids.clear();
    d.text.clear();
    d.logprobs.clear();
    d.num_generated_tokens = 0;
    if (final) d.embedding = embedding;
  }
  return any || final;
}

}  // namespace nanovllm
