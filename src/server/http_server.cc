// Server setup: routes, authentication, request framing and body limits, error bodies, the
// listening socket, and the SIGTERM drain.
#include "server/http_server.h"

#include <sys/resource.h>
#include <sys/socket.h>

#include <cstdio>
#include <ctime>
#include <thread>

#include "nanovllm/llm.h"
#include "server/guarded_server.h"
#include "server/handlers.h"
#include "server/http_framing.h"
#include "server/signals.h"
#include "util/check.h"

namespace nanovllm::server {

using nlohmann::json;
using namespace std::chrono_literals;

void install_shutdown_handlers() { install_signal_pipe(); }

void validate(const ServerOptions& o) {
  NV_CHECK(o.port >= 0 && o.port <= 65535, "--port must be in [0, 65535], got ", o.port);
  NV_CHECK(o.max_waiting >= 0, "--max-waiting must be >= 0 (0: unbounded), got ", o.max_waiting);
  NV_CHECK(o.max_connections >= 1, "--max-connections must be >= 1, got ", o.max_connections);
  NV_CHECK(o.max_body_bytes >= 1, "--max-body-bytes must be >= 1");
  NV_CHECK(o.max_json_depth >= 2 && o.max_json_depth <= 10000, "--max-json-depth must be in [2, 10000], got ",
           o.max_json_depth);
  for (auto [v, name] : {std::pair{o.header_timeout_s, "--header-timeout"}, {o.request_timeout_s, "--request-timeout"},
                         {o.keep_alive_timeout_s, "--keep-alive-timeout"}})
    NV_CHECK(v > 0 && v <= 86400, name, " must be in (0, 86400] seconds, got ", v);
  NV_CHECK(o.shutdown_timeout_s >= 0 && o.shutdown_timeout_s <= 86400,
           "--shutdown-timeout must be in [0, 86400] seconds, got ", o.shutdown_timeout_s);
  NV_CHECK(o.preprocess_threads >= 1, "--preprocess-threads must be >= 1, got ", o.preprocess_threads);
}

namespace {

std::chrono::milliseconds to_ms(double seconds) { return std::chrono::milliseconds(int64_t(seconds * 1000)); }

const char* status_message(int status) {
  switch (status) {
    case 400: return "bad request";
    case 401: return "unauthorized";
    case 404: return "not found";
    case 405: return "method not allowed";
    case 408: return "request timeout";
    case 413: return "request body too large";
    case 414: return "request URI too long";
    case 431: return "request header fields too large";
    case 501: return "not implemented";
    default: return "error";
  }
}

bool is_generate_route(const httplib::Request& req) {
  return req.method == "POST" && (req.path == "/v1/completions" || req.path == "/v1/chat/completions");
}

void close_after_response() {
  if (Connection* c = GuardedServer::current_connection()) c->set_close();
}

// Reads the body of a generation request within --max-body-bytes, whatever its framing
// (Content-Length, chunked, gzip/deflate/br Content-Encoding: the limit counts decoded bytes).
bool read_body(ServerContext& ctx, const httplib::Request& req, const httplib::ContentReader& reader,
               std::string& body, httplib::Response& res) {
  try {
    const BodyFraming f = body_framing(req.headers, ctx.max_body_bytes);
    if (!f.has_body()) return true;  // neither Content-Length nor chunked: no body (RFC 9112 6.3)
    if (f.kind == BodyFraming::Kind::kLength) body.reserve(size_t(f.length));
  } catch (const ApiError& e) {
    close_after_response();
    set_error(res, e);
    return false;
  }
  bool too_large = false;
  const bool ok = reader([&](const char* data, size_t n) {
    if (body.size() + n > ctx.max_body_bytes) {
      too_large = true;
      return false;
    }
    body.append(data, n);
    return true;
  });
  if (ok) return true;
  close_after_response();  // the rest of the body is unread: the connection cannot carry more
  Connection* c = GuardedServer::current_connection();
  const ReadFailure why = c ? c->failure() : ReadFailure::kNone;
  if (too_large || why == ReadFailure::kBodyTooLarge)
    set_error(res, ApiError(413, "request body over the limit of " + std::to_string(ctx.max_body_bytes) +
                                     " bytes (--max-body-bytes)", "invalid_request_error", "", "payload_too_large"));
  else if (why == ReadFailure::kRequestTimeout)
    set_error(res, ApiError(408, "request body not received in time (--request-timeout)", "invalid_request_error", "",
                            "request_timeout"));
  else
    set_error(res, bad_request("could not read the request body (malformed chunked encoding, unsupported "
                               "Content-Encoding, or the connection closed)", "", "bad_body"));
  return false;
}

void install_routes(GuardedServer& svr, ServerContext& ctx, const ServerOptions& opt) {
  for (bool chat : {false, true}) {
    svr.Post(chat ? "/v1/chat/completions" : "/v1/completions",
             [&ctx, chat](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader) {
               std::string body;
               if (read_body(ctx, req, reader, body, res)) handle_generate(ctx, body, res, chat);
             });
  }
  svr.Get("/v1/models", [&ctx](const httplib::Request&, httplib::Response& res) {
    json model{{"id", ctx.model_name}, {"object", "model"}, {"created", int64_t(std::time(nullptr))},
               {"owned_by", "nanovllm"}, {"root", ctx.model_path}, {"max_model_len", ctx.max_model_len}};
    res.set_content(dump_json(json{{"object", "list"}, {"data", json::array({model})}}), "application/json");
  });
  svr.Get("/health", [&ctx](const httplib::Request&, httplib::Response& res) {
    if (ctx.loop->dead()) {
      set_error(res, ApiError(503, "the engine failed; restart the server", "service_unavailable", "", "engine_dead"));
      return;
    }
    if (ctx.stopping) {
      set_error(res, ApiError(503, "the server is shutting down", "service_unavailable"));
      return;
    }
    res.set_content("{\"status\":\"ok\"}", "application/json");
  });
  svr.Get("/metrics", [&ctx, &svr](const httplib::Request&, httplib::Response& res) {
    FrontendSnapshot f;
    f.connections = svr.registry().size();
    f.connections_evicted = svr.registry().evicted();
    f.connections_refused = svr.registry().refused();
    f.engine_dead = ctx.loop->dead();
    res.set_content(ctx.metrics->render(ctx.loop->snapshot(), f), "text/plain; version=0.0.4; charset=utf-8");
  });

  // Before routing (and before httplib reads any body): the body's framing, then the API key
  // on the OpenAI routes (vLLM does the same: /health and /metrics stay open).
  const std::string api_key = opt.api_key;
  svr.set_pre_routing_handler([&ctx, api_key](const httplib::Request& req, httplib::Response& res) {
    try {
      const BodyFraming f = body_framing(req.headers, ctx.max_body_bytes);
      if (f.has_body() && !is_generate_route(req)) {
        close_after_response();  // its body stays unread
        if (req.method == "POST") throw ApiError(404, "no route for POST " + req.path, "not_found_error", "", "not_found");
        throw bad_request("a " + req.method + " request must not carry a body", "", "unexpected_body");
      }
    } catch (const ApiError& e) {
      close_after_response();
      set_error(res, e);
      return httplib::Server::HandlerResponse::Handled;
    }
    if (api_key.empty() || req.path.rfind("/v1/", 0) != 0) return httplib::Server::HandlerResponse::Unhandled;
    if (req.get_header_value("Authorization") == "Bearer " + api_key)
      return httplib::Server::HandlerResponse::Unhandled;
    if (body_framing(req.headers, ctx.max_body_bytes).has_body()) close_after_response();
    res.set_header("WWW-Authenticate", "Bearer");
    set_error(res, ApiError(401, "invalid or missing API key (send 'Authorization: Bearer <key>')",
                            "authentication_error", "", "invalid_api_key"));
    return httplib::Server::HandlerResponse::Handled;
  });
  // Expect: 100-continue: refuse a body we would refuse anyway before the client sends it.
  svr.set_expect_100_continue_handler([&ctx](const httplib::Request& req, httplib::Response& res) {
    try {
      (void)body_framing(req.headers, ctx.max_body_bytes);
    } catch (const ApiError& e) {
      close_after_response();
      set_error(res, e);
      return e.status;
    }
    return 100;
  });
  // httplib's own failures (unreadable request line or headers, unknown route, read limits)
  // have no body: give them an OpenAI error object, the status our connection knows the reason
  // for (408 deadline, 431 headers too large, 413 body too large), and close the connection.
  svr.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    std::string msg = status_message(res.status);
    if (Connection* c = GuardedServer::current_connection()) {
      c->set_close();
      switch (c->failure()) {
        case ReadFailure::kHeaderTimeout:
          res.status = 408;
          msg = "request headers not received in time (--header-timeout)";
          break;
        case ReadFailure::kRequestTimeout:
          res.status = 408;
          msg = "request not received in time (--request-timeout)";
          break;
        case ReadFailure::kHeaderTooLarge:
          res.status = 431;
          msg = "request line and headers over the limit of 64 KiB";
          break;
        case ReadFailure::kBodyTooLarge: res.status = 413; break;
        default: break;
      }
    }
    if (res.status == 404) msg = "no route for " + req.method + " " + req.path;
    if (res.status == 499) return httplib::Server::HandlerResponse::Handled;  // nobody to tell
    const std::string code = res.status == 404 ? "not_found" : res.status == 413 ? "payload_too_large" : "";
    res.set_content(dump_json(error_json(res.status, msg, error_type_for_status(res.status), "", code)),
                    "application/json");
    return httplib::Server::HandlerResponse::Handled;
  }));
  // Last word on the response headers: "Connection: close" whenever this connection ends here.
  svr.set_post_routing_handler([&svr](const httplib::Request&, httplib::Response& res) {
    Connection* c = GuardedServer::current_connection();
    if ((c && c->close_requested()) || svr.draining()) {
      res.headers.erase("Keep-Alive");
      res.headers.erase("Connection");
      res.set_header("Connection", "close");
    }
  });
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
  svr.set_logger([&ctx](const httplib::Request&, const httplib::Response& res) { ctx.metrics->count_http(res.status); });
}

// One thread per connection needs one descriptor per connection: raise the soft limit.
void raise_fd_limit(int max_connections) {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
  const rlim_t want = rlim_t(max_connections) + 256;
  if (rl.rlim_cur < want) {
    rl.rlim_cur = std::min(want, rl.rlim_max);
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  if (rl.rlim_cur < want)
    std::fprintf(stderr, "nanovllm: warning: --max-connections %d needs %llu file descriptors, the limit is %llu\n",
                 max_connections, (unsigned long long)want, (unsigned long long)rl.rlim_cur);
}

}  // namespace

int run_server(LLM& llm, const ServerOptions& opt) {
  validate(opt);
  install_shutdown_handlers();
  raise_fd_limit(opt.max_connections);
  ServerMetrics metrics;
  EngineLoop loop(llm, metrics, opt.max_waiting);
  if (opt.test_fault_after_steps >= 0) loop.inject_fault_after_steps(opt.test_fault_after_steps);
  PrepGate prep(opt.preprocess_threads, opt.max_waiting);
  ServerContext ctx;
  ctx.loop = &loop;
  ctx.metrics = &metrics;
  ctx.prep = &prep;
  ctx.tokenizer = llm.tokenizer();
  ctx.model_path = llm.config().model;
  ctx.model_name = opt.served_model_name.empty() ? ctx.model_path : opt.served_model_name;
  ctx.max_model_len = llm.config().max_model_len;
  ctx.max_body_bytes = opt.max_body_bytes;
  ctx.max_json_depth = opt.max_json_depth;
  ctx.prep_timeout = to_ms(opt.request_timeout_s);

  ConnLimits limits;
  limits.header_timeout = to_ms(opt.header_timeout_s);
  limits.request_timeout = to_ms(opt.request_timeout_s);
  limits.keep_alive_timeout = to_ms(opt.keep_alive_timeout_s);
  // Chunk framing costs bytes too; a body needs at most about twice its size on the wire
  // unless it is sent in chunks of a few bytes.
  limits.max_body_wire_bytes = 2 * opt.max_body_bytes + (64 << 10);
  GuardedServer svr(limits, opt.max_connections);
  // A thread per connection; a few beyond the limit so that refusals (503) are answered at once.
  const size_t threads = size_t(opt.max_connections) + 32;
  svr.new_task_queue = [threads] { return new ConnectionThreads(threads); };
  svr.set_payload_max_length(opt.max_body_bytes);
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
  std::atomic<bool> listen_returned{false};
  // Shutdown: the first SIGINT/SIGTERM stops accepting and drains; a second one exits at once.
  std::thread signals([&] {
    auto exit_on_second = [](int sig) {
      if (sig <= 0) return;
      std::fprintf(stderr, "nanovllm: second signal %d: exiting now\n", sig);
      std::_Exit(128 + sig);
    };
    const int sig = wait_for_signal(-1);
    if (sig == 0) return;  // woken by run_server itself: nothing to stop
    std::fprintf(stderr, "nanovllm: signal %d: draining for up to %.1f s (a second signal exits at once)\n", sig,
                 opt.shutdown_timeout_s);
    ctx.stopping = true;
    // A signal that came during loading arrives before listen_after_bind() runs: wait for it.
    while (!svr.is_running() && !listen_returned.load()) exit_on_second(wait_for_signal(5));
    svr.stop();   // no new connections
    svr.drain();  // keep-alive ends, connections between requests close
    const auto deadline = Clock::now() + to_ms(opt.shutdown_timeout_s);
    while (ctx.active_requests.load() > 0 && Clock::now() < deadline) exit_on_second(wait_for_signal(20));
    if (ctx.active_requests.load() > 0)
      std::fprintf(stderr, "nanovllm: aborting %d request(s) still in flight\n", ctx.active_requests.load());
    loop.stop();  // aborts the rest: streams end with finish_reason "abort" and [DONE]
    const auto flush_deadline = Clock::now() + 2s;  // for those last chunks to be written
    while (ctx.active_requests.load() > 0 && Clock::now() < flush_deadline) exit_on_second(wait_for_signal(20));
    svr.close_all();
    while (!listen_returned.load()) exit_on_second(wait_for_signal(50));
  });

  std::printf("nanovllm: listening on http://%s:%d\n", opt.host.c_str(), port);
  std::fflush(stdout);
  const bool ok = svr.listen_after_bind();  // returns once every connection thread has ended
  listen_returned = true;
  const bool by_signal = ctx.stopping;
  if (!by_signal) wake_signal_waiter();  // listen failed on its own: let the signal thread end
  signals.join();
  loop.stop();
  std::fprintf(stderr, "nanovllm: server stopped\n");
  if (!by_signal) std::fprintf(stderr, "nanovllm: the listening socket failed (%s)\n", ok ? "closed" : "error");
  return by_signal ? 0 : 1;
}

}  // namespace nanovllm::server
