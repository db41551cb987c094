// `nanovllm serve`: an OpenAI-compatible HTTP server (cpp-httplib) over one LLM.
// Endpoints: POST /v1/completions, POST /v1/chat/completions (JSON or server-sent events),
// GET /v1/models, GET /health, GET /metrics (Prometheus text), GET /v1/stats/stream (the
// dashboard's server-sent events), GET / (the web page, unless --no-webui).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace nanovllm {
class LLM;
}

namespace nanovllm::server {

// Every limit is a `serve` flag; docs/server.md lists them with these defaults.
struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;                    // 0: any free port
  std::string api_key;                // "": no authentication
  std::string served_model_name;      // name in /v1/models and responses
  int max_waiting = 1024;             // --max-waiting: queued requests before 503 (0: unbounded)
  int max_connections = 4096;         // --max-connections: open connections (one thread each)
  size_t max_body_bytes = 8u << 20;   // --max-body-bytes: decoded body, any transfer encoding: 413
  size_t max_json_depth = 128;        // --max-json-depth: deeper request JSON: 400
  double header_timeout_s = 10;       // --header-timeout: request line + headers: else 408
  double request_timeout_s = 60;      // --request-timeout: headers + body: else 408
  double keep_alive_timeout_s = 5;    // --keep-alive-timeout: idle connections close
  double shutdown_timeout_s = 5;      // --shutdown-timeout: SIGTERM drain before aborting
  int preprocess_threads = 4;         // --preprocess-threads: concurrent render + tokenize
  int max_stored_responses = 256;     // --max-stored-responses: /v1/responses kept for GET / follow-ups
  bool webui = true;                  // --no-webui: GET / answers 404 instead of the web page
  int64_t test_fault_after_steps = -1;  // tests only: the engine fails after N steps
  int test_step_delay_ms = 0;           // tests only: each engine step takes at least this
};

// Throws nanovllm::Error naming the flag for an out-of-range value.
void validate(const ServerOptions& opt);

// Installs SIGINT/SIGTERM handlers that ask the server to shut down (a signal during model
// loading is kept and acted on once the server runs), and ignores SIGPIPE. run_server() calls it
// too; call it early to cover the model loading.
void install_shutdown_handlers();

// Serves until SIGINT/SIGTERM, then drains: no new connections, in-flight requests may finish
// for up to shutdown_timeout_s, the rest are aborted (streams end with finish_reason "abort"),
// and it returns 0. A second signal exits the process at once (status 128 + signal).
// Prints "nanovllm: listening on http://HOST:PORT" (flushed) once it accepts connections.
// Throws nanovllm::Error when the address cannot be bound.
int run_server(LLM& llm, const ServerOptions& opt);

}  // namespace nanovllm::server
