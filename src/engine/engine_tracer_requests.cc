// EngineTracer's request records (Config::trace_requests): one `request_record` event when a
// request arrives and one `request_output` event per finished completion, both written at once
// (nothing is kept per request, so memory stays the writer's bounded buffer). Schema:
// src/trace/README.md; reader: trace/request_log.h.
#include "engine/engine_tracer.h"
#include "engine/params_json.h"

namespace nanovllm {

namespace {
constexpr int kRecordFormat = 1;  // bumped when a field changes meaning (request_log.cc reads it)
}

void EngineTracer::record_request(uint64_t id, const std::vector<int>& prompt_ids,
                                  const SamplingParams& resolved, bool seed_given,
                                  const RequestOrigin* origin) {
  if (!record_requests_ || closed_) return;
  auto it = requests_.find(id);
  const double ts = it != requests_.end() ? it->second.arrival : now_us();
  auto& js = writer_.begin_event('i', "request_record", "replay", kRecordTid, ts);
  js.field("s", "t").key("args").begin_object();
  js.field("format", kRecordFormat).field("request_id", id).field("step", steps_);
  js.field("route", origin ? std::string_view(origin->route) : std::string_view());
  js.key("prompt_token_ids").begin_array();
  for (int t : prompt_ids) js.value(t);
  js.end_array();
  js.key("params").raw(params_to_json(resolved).dump(-1, ' ', false,
                                                     nlohmann::json::error_handler_t::replace));
  js.field("seed_given", seed_given);
  if (origin && !origin->body.empty()) js.field("body", std::string_view(origin->body));
  js.end_object();
  writer_.end_event();
}

void EngineTracer::record_output(const RequestOutput& out) {
  if (!record_requests_ || closed_) return;
  auto& js = writer_.begin_event('i', "request_output", "replay", kRecordTid, now_us());
  js.field("s", "t").key("args").begin_object();
  js.field("request_id", out.request_id).field("index", out.index).field("step", steps_);
  js.field("finish_reason", std::string_view(out.finish_reason));
  js.key("token_ids").begin_array();
  for (int t : out.token_ids) js.value(t);
  js.end_array();
  if (!out.text.empty()) js.field("text", std::string_view(out.text));
  if (!out.error.empty()) js.field("error", std::string_view(out.error));
  js.end_object();
  writer_.end_event();
}

}  // namespace nanovllm
