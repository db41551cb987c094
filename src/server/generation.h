// The steps every generation route shares (generate_handler.cc): in-flight counting, prompt
// preparation on the handler thread, submission, the wait for the first delta, and client
// disconnects. The OpenAI routes (generate_handler.cc) and the routes of other API shapes
// (api_generate.cc: Responses, Anthropic Messages) are built from these.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "server/handlers.h"
#include "server/openai_request.h"

namespace nanovllm::server {

// The client went away while its request waited: there is nobody to answer (499, as nginx
// logs it), and the connection is closed.
struct ClientGone {};

// Whether the client of the request on this thread has disconnected (no connection: a test).
bool client_gone();

// Answers a ClientGone: 499 (logged, never delivered) and the connection shut.
void drop_client(httplib::Response& res);

// Counts a generation request as in flight until destroyed (or handed to a stream's releaser).
struct InFlight {
  explicit InFlight(ServerContext& c) : ctx(&c) { ctx->active_requests++; }
  InFlight(InFlight&& o) noexcept : ctx(o.ctx) { o.ctx = nullptr; }
  InFlight(const InFlight&) = delete;
  ~InFlight() {
    if (ctx) ctx->active_requests--;
  }
  ServerContext* ctx;
};

// 503 while shutting down or after an engine failure.
void check_serving(const ServerContext& ctx);

// What preparation found out besides the submitted request.
struct Submitted {
  std::shared_ptr<Channel> ch;
  std::vector<int> prompt_ids;  // the rendered prompt's token ids
  bool prompt_opened = false;   // the prompt ends inside <think> (reasoning starts at once)
};

// Renders and tokenizes `g`'s prompt and compiles its output constraint on this thread (a
// PrepGate slot), then submits it. Throws ApiError (400 bad prompt or constraint, 503) or
// ClientGone.
Submitted prepare_and_submit(ServerContext& ctx, const GenerationRequest& g, Clock::time_point arrival);

// An engine "error" finish: 400 before any token (the client's fault), 500 after.
ApiError engine_error(const StreamDelta& d, const std::string& prompt_param);

// Waits for the first delta (or failure) so that errors become a proper status code even for
// streaming requests; returns the deltas received so far. Throws ApiError or ClientGone.
std::vector<StreamDelta> wait_first(Channel& ch, const std::string& prompt_param);

// Whether the rendered chat prompt ends inside an open <think>.
bool prompt_opens_think(const std::vector<int>& ids, const Tokenizer* tok);

}  // namespace nanovllm::server
