// Routes, authentication, request framing and body limits, and error bodies.
#include <ctime>

#include "server/anthropic_request.h"
#include "server/guarded_server.h"
#include "server/handlers.h"
#include "server/http_framing.h"

namespace nanovllm::server {

using nlohmann::json;

namespace {

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
  if (req.method != "POST") return false;
  const std::string& p = req.path;
  if (p == "/v1/completions" || p == "/v1/chat/completions" || p == "/tokenize" || p == "/detokenize" ||
      p == "/v1/responses" || p == "/v1/messages" || p == "/v1/messages/count_tokens" || p == "/v1/embeddings")
    return true;
  // POST /v1/responses/{id}/cancel (SDKs may send an empty JSON body)
  return p.rfind("/v1/responses/", 0) == 0 && p.size() > 21 && p.compare(p.size() - 7, 7, "/cancel") == 0;
}

// Anthropic's routes answer errors in Anthropic's shape.
bool anthropic_route(const std::string& path) { return path.rfind("/v1/messages", 0) == 0; }

void set_route_error(const httplib::Request& req, httplib::Response& res, const ApiError& e) {
  if (!anthropic_route(req.path)) return set_error(res, e);
  res.status = e.status;
  if (e.status == 503) res.set_header("Retry-After", "1");
  res.set_content(dump_json(anthropic_error_json(e)), "application/json");
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
    set_route_error(req, res, e);
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
    set_route_error(req, res, ApiError(413, "request body over the limit of " + std::to_string(ctx.max_body_bytes) +
                                     " bytes (--max-body-bytes)", "invalid_request_error", "", "payload_too_large"));
  else if (why == ReadFailure::kRequestTimeout)
    set_route_error(req, res, ApiError(408, "request body not received in time (--request-timeout)", "invalid_request_error", "",
                            "request_timeout"));
  else
    set_route_error(req, res, bad_request("could not read the request body (malformed chunked encoding, unsupported "
                               "Content-Encoding, or the connection closed)", "", "bad_body"));
  return false;
}

}  // namespace

void install_routes(GuardedServer& svr, ServerContext& ctx, const std::string& api_key) {
  for (bool chat : {false, true}) {
    svr.Post(chat ? "/v1/chat/completions" : "/v1/completions",
             [&ctx, chat](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader) {
               std::string body;
               if (read_body(ctx, req, reader, body, res)) handle_generate(ctx, body, res, chat);
             });
  }
  svr.Post("/tokenize", [&ctx](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader) {
    std::string body;
    if (read_body(ctx, req, reader, body, res)) handle_tokenize(ctx, body, res);
  });
  svr.Post("/detokenize", [&ctx](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader) {
    std::string body;
    if (read_body(ctx, req, reader, body, res)) handle_detokenize(ctx, body, res);
  });
  auto post = [&svr, &ctx](const char* path, void (*handler)(ServerContext&, const std::string&, httplib::Response&)) {
    svr.Post(path, [&ctx, handler](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader) {
      std::string body;
      if (read_body(ctx, req, reader, body, res)) handler(ctx, body, res);
    });
  };
  post("/v1/responses", handle_responses);
  post("/v1/embeddings", handle_embeddings);
  post("/v1/messages", handle_messages);
  post("/v1/messages/count_tokens", handle_count_tokens);
  static const char* kResponseId = R"(/v1/responses/([A-Za-z0-9_\-]{1,128}))";
  svr.Get(kResponseId, [&ctx](const httplib::Request& req, httplib::Response& res) {
    handle_response_get(ctx, req.matches[1], res);
  });
  svr.Delete(kResponseId, [&ctx](const httplib::Request& req, httplib::Response& res) {
    handle_response_delete(ctx, req.matches[1], res);
  });
  svr.Post(R"(/v1/responses/([A-Za-z0-9_\-]{1,128})/cancel)",
           [&ctx](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader) {
             std::string body;  // read (bounded) and ignored
             if (read_body(ctx, req, reader, body, res)) handle_response_cancel(ctx, req.matches[1], res);
           });
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
    res.set_content(ctx.metrics->render(ctx.loop->snapshot(), frontend_snapshot(svr, ctx)),
                    "text/plain; version=0.0.4; charset=utf-8");
  });
  // Under /v1/: the API key applies (the page sends it like any client).
  svr.Get("/v1/stats/stream", [&ctx, &svr](const httplib::Request& req, httplib::Response& res) {
    handle_stats_stream(ctx, svr, req, res);
  });
  if (ctx.webui) {
    // The page itself is open (it holds no data) and asks for the API key when /v1/ answers 401.
    svr.Get("/", [](const httplib::Request&, httplib::Response& res) { handle_webui(res); });
  }

  // Before routing (and before httplib reads any body): the body's framing, then the API key
  // on the OpenAI routes (vLLM does the same: /health and /metrics stay open).
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
      set_route_error(req, res, e);
      return httplib::Server::HandlerResponse::Handled;
    }
    if (api_key.empty() || req.path.rfind("/v1/", 0) != 0) return httplib::Server::HandlerResponse::Unhandled;
    // OpenAI clients send "Authorization: Bearer KEY"; Anthropic's send "x-api-key: KEY".
    if (req.get_header_value("Authorization") == "Bearer " + api_key || req.get_header_value("x-api-key") == api_key)
      return httplib::Server::HandlerResponse::Unhandled;
    if (body_framing(req.headers, ctx.max_body_bytes).has_body()) close_after_response();
    res.set_header("WWW-Authenticate", "Bearer");
    set_route_error(req, res, ApiError(401, "invalid or missing API key (send 'Authorization: Bearer <key>' or 'x-api-key: <key>')",
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
        default:
          if (res.status == 400) msg = "malformed HTTP request (request line, headers or chunked body)";
          break;
      }
    }
    if (res.status == 404) msg = "no route for " + req.method + " " + req.path;
    if (res.status == 499) return httplib::Server::HandlerResponse::Handled;  // nobody to tell
    const std::string code = res.status == 404 ? "not_found" : res.status == 413 ? "payload_too_large" : "";
    const ApiError e(res.status, msg, error_type_for_status(res.status), "", code);
    res.set_content(dump_json(anthropic_route(req.path) ? anthropic_error_json(e) : error_json(e)), "application/json");
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

}  // namespace nanovllm::server
