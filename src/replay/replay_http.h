// Replays a plan against a running server (`nanovllm replay --url URL`): each request's route
// and body (replay_plan.h: http_request) go to that one server at the request's recorded
// wall-clock offset (divided by `speed`), from a pool of client threads, and what comes back is
// written as a client-side trace: per request its send time, time to first streamed content,
// end-to-end time and HTTP status as a request span, its request record (so the replay can be
// replayed and compared again) and its outputs (request_output, with token ids where the route
// returns them). The server's own `--trace` has the steps, queues and KV blocks.
#pragma once
#include <string>
#include <vector>

#include "replay/replay_engine.h"
#include "replay/replay_plan.h"
#include "replay/target_url.h"

namespace nanovllm::replay {

struct HttpReplayOptions {
  ReplayOptions replay;     // timing must be kWall (a remote server's steps are not ours)
  std::string api_key;      // sent as "Authorization: Bearer KEY" when set
  std::string trace_path;   // the client-side trace ("" = none)
  int max_concurrency = 256;  // requests in flight at once; later ones wait (and start late)
  double timeout_s = 600;     // per request
};

struct HttpReplayStats {
  ReplayStats replay;
  int64_t http_errors = 0;       // responses other than 2xx
  int64_t transport_errors = 0;  // no response (refused, reset, timed out)
  std::string first_error;
};

// Throws nanovllm::Error when no request got any response (the server is not there), naming
// the URL and the client's error; a build without cpp-httplib throws at once.
HttpReplayStats replay_over_http(const TargetUrl& url, const std::vector<ReplayRequest>& plan,
                                 const HttpReplayOptions& opt);

}  // namespace nanovllm::replay
