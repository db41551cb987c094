// `nanovllm serve`: the OpenAI-compatible HTTP server (src/server/).
#include <cstdio>

#include "command.h"
#include "engine_flags.h"
#include "nanovllm/llm.h"
#include "util/check.h"

#ifdef NANOVLLM_HAVE_HTTPLIB
#include "server/http_server.h"
#endif

namespace nanovllm::cli {
namespace {

int run_serve(int argc, char** argv) {
#ifndef NANOVLLM_HAVE_HTTPLIB
  (void)argc;
  (void)argv;
  NV_THROW("this nanovllm was built without the HTTP server: CMake must link nv_server with "
           "cpp-httplib and define NANOVLLM_HAVE_HTTPLIB (see src/server/README.md)");
#else
  CLI::App app{"OpenAI-compatible HTTP server (completions, chat, streaming, metrics)",
               "nanovllm serve"};
  Config cfg;
  server::ServerOptions opt;
  app.add_option("--model", cfg.model, "Hugging Face model directory")->required();
  app.add_option("--host", opt.host, "address to listen on")->capture_default_str();
  app.add_option("--port", opt.port, "TCP port (0: any free port)")->capture_default_str();
  app.add_option("--api-key", opt.api_key, "require 'Authorization: Bearer KEY' on /v1/*");
  app.add_option("--served-model-name", opt.served_model_name, "model name in the API (default: --model)");
  app.add_option("--max-waiting", opt.max_waiting, "waiting requests before 503 (0: unbounded)")
      ->capture_default_str();
  app.add_option("--http-threads", opt.http_threads, "HTTP worker threads (>= 256)")->capture_default_str();
  add_engine_flags(app, cfg);
  CLI11_PARSE(app, argc, argv);
  NV_CHECK(opt.port >= 0 && opt.port <= 65535, "--port must be in [0, 65535], got ", opt.port);
  NV_CHECK(opt.max_waiting >= 0, "--max-waiting must be >= 0, got ", opt.max_waiting);
  cfg.max_waiting = opt.max_waiting;

  // Before loading: a SIGTERM during a long load is acted on as soon as the server runs.
  server::install_shutdown_handlers();
  std::fprintf(stderr, "nanovllm: loading %s\n", cfg.model.c_str());
  LLM llm(cfg);
  return server::run_server(llm, opt);
#endif
}

}  // namespace
NANOVLLM_COMMAND("serve", "OpenAI-compatible HTTP server", run_serve);
}  // namespace nanovllm::cli
