// HTTP handlers shared by http_server.cc (routing) and generate_handler.cc (generation).
#pragma once
#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include "chat/tool_call_format.h"
#include "server/api_error.h"
#include "server/engine_loop.h"
#include "server/httplib_include.h"
#include "server/metrics.h"
#include "server/prompt_prep.h"
#include "server/response_store.h"

namespace nanovllm {
class Tokenizer;
}

namespace nanovllm::server {

struct ServerContext {
  EngineLoop* loop = nullptr;
  ServerMetrics* metrics = nullptr;
  PrepGate* prep = nullptr;
  const Tokenizer* tokenizer = nullptr;  // immutable and thread-safe; null without tokenizer.json
  // Only for LLM::prepare_constraint (thread-safe); everything else of the LLM is the engine
  // thread's.
  const LLM* llm = nullptr;
  // /v1/responses: stored and background responses (run_server sizes it by --max-stored-responses)
  std::shared_ptr<ResponseStore> responses = std::make_shared<ResponseStore>(256);
  bool embed = false;            // an embedding engine (--task embed): /v1/embeddings only
  bool embed_normalize = true;   // its vectors are L2-normalized (`dimensions` renormalizes)
  bool reasoning = false;  // the chat template writes <think>: split reasoning_content
  chat::ToolCallFormat tool_format = chat::ToolCallFormat::kHermes;
  std::string model_name;                // served model name
  std::string model_path;                // --model (also accepted as a model name)
  int max_model_len = 0;
  bool webui = true;                     // GET / serves the web page (--no-webui: 404)
  // The engine records requests (--trace-requests): generation handlers keep each request's
  // route and body (GenerationRequest::origin) for the trace.
  bool trace_requests = false;
  nlohmann::json engine_config = nlohmann::json::object();  // the stats stream's "config"
  size_t max_body_bytes = 8u << 20;
  size_t max_json_depth = 128;
  std::chrono::milliseconds prep_timeout{60000};  // longest wait for a tokenizer slot
  std::atomic<bool> stopping{false};
  std::atomic<int> active_requests{0};  // generation requests in flight (the drain waits for them)
  std::atomic<int> stats_streams{0};    // open /v1/stats/stream responses (end within 100 ms of stopping)
};

// Writes `e` as the response (status, JSON error object, Retry-After for 503).
void set_error(httplib::Response& res, const ApiError& e);

class GuardedServer;

// Every route and hook of the server on `svr` (routes.cc); `api_key` "" = no authentication.
void install_routes(GuardedServer& svr, ServerContext& ctx, const std::string& api_key);

// POST /v1/completions (chat = false) and /v1/chat/completions (chat = true); `body` is the
// request body, already read within the size limit.
void handle_generate(ServerContext& ctx, const std::string& body, httplib::Response& res, bool chat);

// POST /v1/messages and /v1/messages/count_tokens (Anthropic's Messages API), POST
// /v1/responses, GET / DELETE /v1/responses/{id}, POST /v1/responses/{id}/cancel
// (api_generate.cc). Their errors use the API's own error shape.
void handle_messages(ServerContext& ctx, const std::string& body, httplib::Response& res);
// POST /v1/embeddings (embeddings_handler.cc): an embedding engine only (else 400).
void handle_embeddings(ServerContext& ctx, const std::string& body, httplib::Response& res);
void handle_count_tokens(ServerContext& ctx, const std::string& body, httplib::Response& res);
void handle_responses(ServerContext& ctx, const std::string& body, httplib::Response& res);
void handle_response_get(ServerContext& ctx, const std::string& id, httplib::Response& res);
void handle_response_cancel(ServerContext& ctx, const std::string& id, httplib::Response& res);
void handle_response_delete(ServerContext& ctx, const std::string& id, httplib::Response& res);

// GET /: the web page (webui.cc).
void handle_webui(httplib::Response& res);

// The HTTP front end's state (connections, engine liveness) for /metrics and the stats stream.
FrontendSnapshot frontend_snapshot(const GuardedServer& svr, const ServerContext& ctx);

// GET /v1/stats/stream: the dashboard's server-sent events (stats_stream.cc).
void handle_stats_stream(ServerContext& ctx, const GuardedServer& svr, const httplib::Request& req,
                         httplib::Response& res);

// POST /tokenize and /detokenize (vLLM's request and response shapes), tokenize_handler.cc.
void handle_tokenize(ServerContext& ctx, const std::string& body, httplib::Response& res);
void handle_detokenize(ServerContext& ctx, const std::string& body, httplib::Response& res);

}  // namespace nanovllm::server
