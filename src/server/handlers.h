// HTTP handlers shared by http_server.cc (routing) and generate_handler.cc (generation).
#pragma once
#include <atomic>
#include <string>

#include "server/api_error.h"
#include "server/engine_loop.h"
#include "server/httplib_include.h"
#include "server/metrics.h"

namespace nanovllm {
class Tokenizer;
}

namespace nanovllm::server {

struct ServerContext {
  EngineLoop* loop = nullptr;
  ServerMetrics* metrics = nullptr;
  const Tokenizer* tokenizer = nullptr;  // immutable and thread-safe; null without tokenizer.json
  std::string model_name;                // served model name
  std::string model_path;                // --model (also accepted as a model name)
  std::atomic<bool> stopping{false};
  std::atomic<int> active_streams{0};
};

// Writes `e` as the response (status, JSON error object, Retry-After for 503).
void set_error(httplib::Response& res, const ApiError& e);

// POST /v1/completions (chat = false) and /v1/chat/completions (chat = true).
void handle_generate(ServerContext& ctx, const httplib::Request& req, httplib::Response& res, bool chat);

}  // namespace nanovllm::server
