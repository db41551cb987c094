#include "engine/request.h"

#include <utility>

namespace nanovllm {

Request::Request(uint64_t id_, std::vector<int> prompt_ids, const SamplingParams& params_,
                 uint64_t seed, int block_size, std::span<const int> eos_ids,
                 const Tokenizer* tokenizer, bool stream_)
    : id(id_),
      output_id(id_),
      stream(stream_),
      params(params_),
      seq(id_, std::move(prompt_ids), params, block_size),
      sampling(params, seed, seq.prompt_token_ids(), eos_ids),
      output(tokenizer, params) {}

RequestOutput Request::final_output() const {
  RequestOutput o;
  o.request_id = output_id;
  o.index = index;
  const auto prompt = seq.prompt_token_ids();
  const auto completion = seq.completion_token_ids();
  o.prompt_token_ids.assign(prompt.begin(), prompt.end());
  o.token_ids.assign(completion.begin(), completion.end());
  o.text = output.text();
  o.finished = true;
  o.finish_reason = finish_reason_name(seq.finish_reason);
  o.error = error;
  o.num_cached_tokens = num_cached_tokens;
  o.logprobs = output.logprobs();
  return o;
}

bool Request::next_delta(bool final, StreamDelta& d) {
  d.request_id = output_id;
  d.index = index;
  const bool any = output.take_delta(seq.completion_token_ids(), final, d);
  d.finished = final;
  d.finish_reason = final ? finish_reason_name(seq.finish_reason) : "";
  d.error = error;
  d.num_prompt_tokens = seq.num_prompt_tokens;
  d.num_generated_tokens = seq.num_completion_tokens();
  return any || final;
}

}  // namespace nanovllm
