#include "replay/replay_plan.h"

#include <algorithm>

#include "engine/params_json.h"
#include "util/check.h"

namespace nanovllm::replay {

std::vector<ReplayRequest> plan_replay(const trace::RequestLog& log) {
  std::vector<ReplayRequest> plan;
  plan.reserve(log.requests.size());
  const double t0 = log.requests.empty() ? 0 : log.requests.front().ts;
  for (const trace::RecordedRequest& r : log.requests) {
    ReplayRequest q;
    q.recorded_id = r.id;
    q.prompt_token_ids = r.prompt_token_ids;
    try {
      q.params = params_from_json(r.params);
    } catch (const Error& e) {
      NV_THROW("request ", r.id, ": ", e.what());
    }
    q.origin = {r.route, r.body};
    q.seed_given = r.seed_given;
    q.offset_us = std::max(0.0, r.ts - t0);
    q.step = r.step;
    for (const trace::RecordedOutput* o : log.outputs_of(r.id))
      if (o->finish_reason == "abort" && (q.abort_step < 0 || o->step < q.abort_step)) {
        q.abort_step = o->step;
        q.abort_offset_us = std::max(0.0, o->ts - t0);
      }
    plan.push_back(std::move(q));
  }
  // Arrival order = request id order (ids are handed out at arrival), which log.requests has.
  return plan;
}

std::vector<ReplayMarker> plan_markers(const trace::RequestLog& log) {
  const double t0 = log.requests.empty() ? 0 : log.requests.front().ts;
  std::vector<ReplayMarker> out;
  for (const trace::RecordedMarker& m : log.markers) out.push_back({m.name, std::max(0.0, m.ts - t0), m.step});
  return out;
}

HttpRequest http_request(const ReplayRequest& q) {
  if (!q.origin.route.empty()) {
    HttpRequest r{q.origin.route, q.origin.body};
    if (r.route == "/v1/completions") {
      nlohmann::json b = nlohmann::json::parse(r.body, nullptr, false);
      if (b.is_object() && !b.contains("return_token_ids")) {
        b["return_token_ids"] = true;
        r.body = b.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      }
    }
    return r;
  }
  NV_CHECK(q.params.structured_outputs.empty(), "request ", q.recorded_id,
           " was recorded from the in-process API with an output constraint, which replay "
           "cannot send as a /v1/completions body; replay it in-process (without --url)");
  const nlohmann::json defaults = params_to_json(SamplingParams{});
  nlohmann::json body = {{"prompt", q.prompt_token_ids}, {"return_token_ids", true}};
  const nlohmann::json params = params_to_json(q.params);  // (items() must not outlive it)
  for (const auto& [k, v] : params.items())
    if (k != "structured_outputs" && v != defaults[k]) body[k] = v;
  return {"/v1/completions", body.dump()};
}

}  // namespace nanovllm::replay
