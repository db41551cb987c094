#include "engine/stats_json.h"

namespace nanovllm {

nlohmann::json to_json(const EngineStats& s) {
  return {{"steps", s.steps},
          {"prefill_tokens", s.prefill_tokens},
          {"decode_tokens", s.decode_tokens},
          {"prompt_tokens", s.prompt_tokens},
          {"prefix_cache_hit_tokens", s.prefix_cache_hit_tokens},
          {"prefix_cache_query_tokens", s.prefix_cache_query_tokens},
          {"preemptions", s.preemptions},
          {"finished_requests", s.finished_requests},
          {"aborted_requests", s.aborted_requests},
          {"failed_requests", s.failed_requests},
          {"max_batch_size", s.max_batch_size},
          {"num_blocks_total", s.num_blocks_total},
          {"num_blocks_used", s.num_blocks_used},
          {"peak_blocks_used", s.peak_blocks_used},
          {"num_running", s.num_running},
          {"num_waiting", s.num_waiting},
          {"prefill_seconds", s.prefill_seconds},
          {"decode_seconds", s.decode_seconds},
          {"executor", s.executor},
          {"graph_pool_bytes", s.graph_pool_bytes},
          {"graph_steps", s.graph_steps},
          {"num_threads", s.num_threads},
          {"spec_draft_tokens", s.spec_draft_tokens},
          {"spec_accepted_tokens", s.spec_accepted_tokens},
          {"spec_verifications", s.spec_verifications},
          {"spec_acceptance_rate", s.spec_acceptance_rate()},
          {"spec_mean_accepted_length", s.spec_mean_accepted_length()}};
}

nlohmann::json to_json(const RequestOutput& o) {
  nlohmann::json j = {{"request_id", o.request_id},
                      {"text", o.text},
                      {"token_ids", o.token_ids},
                      {"num_prompt_tokens", o.prompt_token_ids.size()},
                      {"num_cached_tokens", o.num_cached_tokens},
                      {"finish_reason", o.finish_reason}};
  if (!o.error.empty()) j["error"] = o.error;
  if (!o.logprobs.empty()) {
    nlohmann::json lp = nlohmann::json::array();
    for (const auto& t : o.logprobs) {
      nlohmann::json top = nlohmann::json::array();
      for (const auto& a : t.top) top.push_back({{"token_id", a.token_id}, {"logprob", a.logprob}});
      lp.push_back({{"logprob", t.logprob}, {"top", top}});
    }
    j["logprobs"] = lp;
  }
  return j;
}

}  // namespace nanovllm
