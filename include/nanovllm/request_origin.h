// Where a request came from, kept in the trace when Config::trace_requests is on, so that
// `nanovllm replay` can send it again: the HTTP route and the body as the server received it.
#pragma once
#include <string>

namespace nanovllm {

struct RequestOrigin {
  // "/v1/completions", "/v1/chat/completions", ...; empty: the in-process API (generate, bench,
  // Python, C++), whose prompt token ids and sampling parameters are the whole request.
  std::string route;
  std::string body;  // the request body as received (HTTP routes only)
};

}  // namespace nanovllm
