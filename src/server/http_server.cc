// Server setup: routes, authentication, error bodies, worker pool, listening socket, signals.
#include "server/http_server.h"

#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <ctime>
#include <thread>

#include "nanovllm/llm.h"
#include "server/handlers.h"
#include "util/check.h"

namespace nanovllm::server {

using nlohmann::json;

namespace {
// Self-pipe: the handler only write()s (async-signal-safe); the shutdown thread read()s. A handler
// (not sigwait) because libraries start threads before main (e.g. OpenBLAS), and a signal
// delivered to one of those would otherwise take the default action and kill the process.
int g_signal_pipe[2] = {-1, -1};

extern "C" void on_shutdown_signal(int sig) {
  const unsigned char b = static_cast<unsigned char>(sig);
  if (g_signal_pipe[1] >= 0) (void)!::write(g_signal_pipe[1], &b, 1);
}
}  // namespace

void install_shutdown_handlers() {
  if (g_signal_pipe[0] < 0) NV_CHECK(::pipe(g_signal_pipe) == 0, "pipe() failed");
  struct sigaction sa {};
  sa.sa_handler = on_shutdown_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  // A client that disconnects must not kill the process when we write to its socket.
  signal(SIGPIPE, SIG_IGN);
}

namespace {

const char* status_message(int status) {
  switch (status) {
    case 400: return "bad request";
    case 401: return "unauthorized";
    case 404: return "not found";
    case 405: return "method not allowed";
    case 413: return "request body too large";
    case 414: return "request URI too long";
    default: return "error";
  }
}

void install_routes(httplib::Server& svr, ServerContext& ctx, const ServerOptions& opt) {
  svr.Post("/v1/completions", [&ctx](const httplib::Request& req, httplib::Response& res) {
    handle_generate(ctx, req, res, false);
  });
  svr.Post("/v1/chat/completions", [&ctx](const httplib::Request& req, httplib::Response& res) {
    handle_generate(ctx, req, res, true);
  });
  svr.Get("/v1/models", [&ctx](const httplib::Request&, httplib::Response& res) {
    json model{{"id", ctx.model_name}, {"object", "model"}, {"created", int64_t(std::time(nullptr))},
               {"owned_by", "nanovllm"}, {"root", ctx.model_path}};
    res.set_content(dump_json(json{{"object", "list"}, {"data", json::array({model})}}), "application/json");
  });
  svr.Get("/health", [&ctx](const httplib::Request&, httplib::Response& res) {
    if (ctx.stopping) {
      set_error(res, ApiError(503, "the server is shutting down", "service_unavailable"));
      return;
    }
    res.set_content("{\"status\":\"ok\"}", "application/json");
  });
  svr.Get("/metrics", [&ctx](const httplib::Request&, httplib::Response& res) {
    res.set_content(ctx.metrics->render(ctx.loop->snapshot()), "text/plain; version=0.0.4; charset=utf-8");
  });

  // Authentication for the OpenAI routes (vLLM does the same: /health and /metrics stay open).
  const std::string api_key = opt.api_key;
  svr.set_pre_routing_handler([api_key](const httplib::Request& req, httplib::Response& res) {
    if (api_key.empty() || req.path.rfind("/v1/", 0) != 0) return httplib::Server::HandlerResponse::Unhandled;
    if (req.get_header_value("Authorization") == "Bearer " + api_key)
      return httplib::Server::HandlerResponse::Unhandled;
    res.set_header("WWW-Authenticate", "Bearer");
    set_error(res, ApiError(401, "invalid or missing API key (send 'Authorization: Bearer <key>')",
                            "authentication_error", "", "invalid_api_key"));
    return httplib::Server::HandlerResponse::Handled;
  });
  // httplib's own failures (unknown route, body too large, unreadable request) have no body:
  // give them an OpenAI error object.
  svr.set_error_handler(httplib::Server::HandlerWithResponse(
      [](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    std::string msg = status_message(res.status);
    if (res.status == 404) msg = "no route for " + req.method + " " + req.path;
    std::string code = res.status == 404 ? "not_found" : res.status == 413 ? "payload_too_large" : "";
    res.set_content(dump_json(error_json(res.status, msg, error_type_for_status(res.status), "", code)),
                    "application/json");
    return httplib::Server::HandlerResponse::Handled;
  }));
  svr.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown exception";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    set_error(res, ApiError(500, "internal error: " + what, "server_error"));
  });
  svr.set_logger([&ctx](const httplib::Request&, const httplib::Response& res) {
    ctx.metrics->count_http(res.status);
  });
}

}  // namespace

int run_server(LLM& llm, const ServerOptions& opt) {
  install_shutdown_handlers();
  ServerMetrics metrics;
  EngineLoop loop(llm, metrics, opt.max_waiting);
  ServerContext ctx;
  ctx.loop = &loop;
  ctx.metrics = &metrics;
  ctx.tokenizer = llm.tokenizer();
  ctx.model_path = llm.config().model;
  ctx.model_name = opt.served_model_name.empty() ? ctx.model_path : opt.served_model_name;

  httplib::Server svr;
  const int threads = std::max(opt.http_threads, 256);
  svr.new_task_queue = [threads] { return new httplib::ThreadPool(size_t(threads)); };
  svr.set_payload_max_length(opt.max_body_bytes);
  svr.set_keep_alive_timeout(5);
  svr.set_read_timeout(30);
  svr.set_write_timeout(30);
  int listen_fd = -1;
  // SO_REUSEADDR only (httplib's default SO_REUSEPORT would let two servers share a port).
  svr.set_socket_options([&listen_fd](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    listen_fd = sock;
  });
  install_routes(svr, ctx, opt);

  int port = opt.port;
  if (opt.port == 0) {
    port = svr.bind_to_any_port(opt.host);
    NV_CHECK(port > 0, "cannot listen on ", opt.host, " (any port)");
  } else {
    NV_CHECK(svr.bind_to_port(opt.host, opt.port), "cannot listen on ", opt.host, ":", opt.port,
             " (address in use or not available)");
  }
  // httplib listens with a backlog of 5; hundreds of clients connecting at once need more.
  if (listen_fd >= 0) ::listen(listen_fd, 4096);

  loop.start();
  // Shutdown: the first SIGINT/SIGTERM stops accepting, aborts in-flight requests (streams get a
  // final chunk and [DONE]), and ends listen_after_bind().
  std::thread signals([&] {
    unsigned char sig = 0;
    while (::read(g_signal_pipe[0], &sig, 1) < 0 && errno == EINTR) {
    }
    if (sig == 0) return;  // woken by run_server itself: nothing to stop
    std::fprintf(stderr, "nanovllm: signal %d: shutting down\n", int(sig));
    ctx.stopping = true;
    loop.stop();
    // Let streams write their last chunks before the sockets close (bounded wait).
    for (int i = 0; i < 200 && ctx.active_streams.load() > 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    svr.stop();
  });

  std::printf("nanovllm: listening on http://%s:%d\n", opt.host.c_str(), port);
  std::fflush(stdout);
  const bool ok = svr.listen_after_bind();
  const bool by_signal = ctx.stopping;
  if (!by_signal) {  // listen failed on its own: wake the signal thread so it can end
    ctx.stopping = true;
    const unsigned char zero = 0;
    (void)!::write(g_signal_pipe[1], &zero, 1);
  }
  signals.join();
  loop.stop();
  std::fprintf(stderr, "nanovllm: server stopped\n");
  if (!by_signal) std::fprintf(stderr, "nanovllm: the listening socket failed (%s)\n", ok ? "closed" : "error");
  return by_signal ? 0 : 1;
}

}  // namespace nanovllm::server
