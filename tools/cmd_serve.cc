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
  app.add_option("--max-waiting", opt.max_waiting,
                 "queued requests (engine + tokenizer queues) before 503 + Retry-After (0: unbounded)")
      ->capture_default_str();
  app.add_option("--max-connections", opt.max_connections,
                 "open connections; beyond, idle or slow-header ones are closed, else 503")
      ->capture_default_str();
  app.add_option("--max-body-bytes", opt.max_body_bytes, "request body limit, any transfer encoding (413)")
      ->capture_default_str();
  app.add_option("--max-json-depth", opt.max_json_depth, "nesting limit of request JSON (400)")->capture_default_str();
  app.add_option("--max-stored-responses", opt.max_stored_responses,
                 "/v1/responses kept in memory for GET, previous_response_id and background runs "
                 "(oldest dropped first; 0: none)")
      ->capture_default_str();
  app.add_option("--header-timeout", opt.header_timeout_s, "seconds for the request line and headers (408)")
      ->capture_default_str();
  app.add_option("--request-timeout", opt.request_timeout_s, "seconds for the whole request: headers + body (408)")
      ->capture_default_str();
  app.add_option("--keep-alive-timeout", opt.keep_alive_timeout_s, "seconds an idle connection stays open")
      ->capture_default_str();
  app.add_option("--shutdown-timeout", opt.shutdown_timeout_s,
                 "SIGTERM: seconds in-flight requests may finish before they are aborted")
      ->capture_default_str();
  app.add_option("--preprocess-threads", opt.preprocess_threads,
                 "requests rendered / tokenized at once (off the engine thread)")
      ->capture_default_str();
  app.add_flag("!--no-webui", opt.webui, "do not serve the web page (chat, completions, dashboard) on GET /");
  // Tests only (hidden): the engine fails after N steps / each step takes at least MS, so that
  // failure and disconnect paths can be exercised deterministically.
  app.add_option("--test-engine-fault-after-steps", opt.test_fault_after_steps)->group("");
  app.add_option("--test-engine-step-delay-ms", opt.test_step_delay_ms)->group("");
  app.add_option("--task", cfg.task,
                 "auto | generate | embed: an embedding model serves /v1/embeddings (auto: embed when "
                 "the model folder has sentence-transformers pooling files)")
      ->check(CLI::IsMember({"auto", "generate", "embed"}))
      ->capture_default_str();
  app.add_option("--scheduling-policy", cfg.scheduling_policy,
                 "fcfs | priority: requests' 'priority' field orders admission (lower first) and "
                 "preemption (highest value first)")
      ->check(CLI::IsMember({"fcfs", "priority"}))
      ->capture_default_str();
  add_engine_flags(app, cfg);
  CLI11_PARSE(app, argc, argv);
  server::validate(opt);
  cfg.max_waiting = opt.max_waiting;
  cfg.validate();

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
