// What `nanovllm replay` sends, built from a trace's request records (trace/request_log.h): per
// request its prompt ids, its sampling parameters (the seed the recorded engine drew included,
// so sampled requests repeat their tokens in-process), its route and body, and when it arrives:
// by engine step (the recorded run's schedule, exactly) or by wall-clock offset.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "nanovllm/request_origin.h"
#include "nanovllm/sampling_params.h"
#include "trace/request_log.h"

namespace nanovllm::replay {

enum class Timing { kSteps, kWall };

// A trace marker written again before the same step (or at the same offset).
struct ReplayMarker {
  std::string name;
  double offset_us = 0;
  int64_t step = 0;
};

struct ReplayRequest {
  uint64_t recorded_id = 0;
  std::vector<int> prompt_token_ids;
  SamplingParams params;
  RequestOrigin origin;   // route "" = the in-process API
  bool seed_given = false;  // the recorded client gave the seed (else params.seed is the drawn one)
  double offset_us = 0;   // arrival since the first recorded arrival
  int64_t step = 0;       // engine steps completed before it arrived
  // The recorded run aborted it (a client that left, or shutdown): the step before which and
  // the time at which that happened. -1: it was not aborted.
  int64_t abort_step = -1;
  double abort_offset_us = -1;
};

// In arrival order. Throws nanovllm::Error naming the record whose parameters do not read.
std::vector<ReplayRequest> plan_replay(const trace::RequestLog& log);
std::vector<ReplayMarker> plan_markers(const trace::RequestLog& log);

// The route and body `replay --url` sends: the recorded ones, with "return_token_ids": true
// added to a /v1/completions body (so its outputs compare token by token); a request recorded
// from the in-process API becomes a /v1/completions body of its prompt ids and the parameters
// that differ from the defaults (the drawn seed included). Throws for what that body cannot say
// (an output constraint).
struct HttpRequest {
  std::string route, body;
};
HttpRequest http_request(const ReplayRequest& q);

}  // namespace nanovllm::replay
