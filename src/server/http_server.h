// `nanovllm serve`: an OpenAI-compatible HTTP server (cpp-httplib) over one LLM.
// Endpoints: POST /v1/completions, POST /v1/chat/completions (JSON or server-sent events),
// GET /v1/models, GET /health, GET /metrics (Prometheus text).
#pragma once
#include <cstddef>
#include <string>

namespace nanovllm {
class LLM;
}

namespace nanovllm::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;                      // 0: any free port
  std::string api_key;                  // "": no authentication
  std::string served_model_name;        // name in /v1/models and responses
  int max_waiting = 1024;               // queued + engine-waiting requests before 503
  int http_threads = 512;               // worker pool (one per open connection)
  size_t max_body_bytes = 8u << 20;     // larger request bodies: 413
};

// Installs SIGINT/SIGTERM handlers that ask the server to shut down (a signal during model
// loading is kept and acted on once the server runs), and ignores SIGPIPE. run_server() calls it
// too; call it early to cover the model loading.
void install_shutdown_handlers();

// Serves until SIGINT/SIGTERM, then aborts in-flight requests, stops and returns 0.
// Prints "nanovllm: listening on http://HOST:PORT" (flushed) once it accepts connections.
// Throws nanovllm::Error when the address cannot be bound.
int run_server(LLM& llm, const ServerOptions& opt);

}  // namespace nanovllm::server
