// Generation endpoints: submit to the engine loop, then either collect the whole output (JSON)
// or stream it as server-sent events through a chunked content provider.
#include <chrono>
#include <ctime>
#include <optional>

#include "server/guarded_server.h"
#include "server/handlers.h"
#include "server/openai_response.h"
#include "tokenizer/tokenizer.h"

namespace nanovllm::server {

using nlohmann::json;
using namespace std::chrono_literals;

void set_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  if (e.status == 503) res.set_header("Retry-After", "1");
  res.set_content(dump_json(error_json(e)), "application/json");
}

namespace {

// The client went away while its request waited: there is nobody to answer (499, as nginx
// logs it), and the connection is closed.
struct ClientGone {};

// Whether the client of the request on this thread has disconnected (no connection: a test).
bool client_gone() {
  Connection* c = GuardedServer::current_connection();
  return c && c->peer_closed();
}

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

// Everything a response needs besides the engine output.
struct ResponsePlan {
  ResponseMeta meta;
  bool stream = false;
  bool include_usage = false;
  bool logprobs = false;
  std::string prompt_param;  // "prompt" or "messages": named by prompt errors
};

TokenText token_text(const Tokenizer* tok) {
  return [tok](int id) -> std::string {
    if (!tok) return std::to_string(id);
    return tok->decode({id}, /*skip_special_tokens=*/false);
  };
}

// An engine "error" finish before any token (e.g. a prompt longer than max_model_len) is the
// client's fault: 400. Later ones are the server's.
ApiError engine_error(const StreamDelta& d, const ResponsePlan& plan) {
  const std::string msg = client_message(d.error.empty() ? "request failed" : d.error);
  if (d.num_generated_tokens == 0) return bad_request(msg, plan.prompt_param);
  return ApiError(500, msg, "server_error");
}

// Waits for the first delta (or failure) so that errors become a proper status code even for
// streaming requests; returns the deltas received so far. Throws ClientGone if the client
// disconnects first (prefill of a long prompt, or a long queue).
std::vector<StreamDelta> wait_first(Channel& ch, const ResponsePlan& plan) {
  for (;;) {
    Channel::Batch b = ch.wait(100ms);
    if (b.error) throw *b.error;
    if (!b.deltas.empty()) {
      const StreamDelta& d = b.deltas.front();
      if (d.finished && d.finish_reason == "error") throw engine_error(d, plan);
      return std::move(b.deltas);
    }
    if (b.done) throw ApiError(500, "request ended without output", "server_error");
    if (client_gone()) throw ClientGone{};
  }
}

void respond_full(ServerContext& ctx, Channel& ch, std::vector<StreamDelta> first,
                  const ResponsePlan& plan, httplib::Response& res) {
  std::string text;
  std::vector<int> ids;
  std::vector<TokenLogprobs> lps;
  std::vector<StreamDelta> batch = std::move(first);
  const StreamDelta* last = nullptr;
  StreamDelta final_delta;
  auto next_check = Clock::now() + 100ms;
  for (;;) {
    for (auto& d : batch) {
      text += d.text;
      ids.insert(ids.end(), d.token_ids.begin(), d.token_ids.end());
      lps.insert(lps.end(), d.logprobs.begin(), d.logprobs.end());
      final_delta = d;
      last = &final_delta;
    }
    if (last && last->finished) break;
    Channel::Batch b = ch.wait(100ms);
    if (b.error) throw *b.error;
    if (b.done && b.deltas.empty()) break;
    batch = std::move(b.deltas);
    // Nobody waits for this answer any more: stop generating it (the caller aborts). Checked
    // every 100 ms however fast the tokens come.
    if (Clock::now() >= next_check) {
      if (client_gone()) throw ClientGone{};
      next_check = Clock::now() + 100ms;
    }
  }
  if (!last) throw ApiError(500, "request ended without output", "server_error");
  if (last->finish_reason == "error") throw engine_error(*last, plan);
  json usage = usage_json(last->num_prompt_tokens, last->num_generated_tokens);
  json lp = nullptr;
  if (plan.logprobs) {
    size_t offset = 0;
    lp = plan.meta.chat ? chat_logprobs(ids, lps, token_text(ctx.tokenizer))
                        : completion_logprobs(ids, lps, token_text(ctx.tokenizer), offset);
  }
  json body = plan.meta.chat ? chat_response(plan.meta, text, last->finish_reason, lp, usage)
                             : completion_response(plan.meta, text, last->finish_reason, lp, usage);
  res.status = 200;
  res.set_content(dump_json(body), "application/json");
}

// State of one SSE stream, shared by the content provider and its releaser.
struct StreamState {
  ServerContext* ctx = nullptr;
  std::optional<InFlight> in_flight;  // released when the stream ends
  std::shared_ptr<Channel> ch;
  ResponsePlan plan;
  std::vector<StreamDelta> buffered;
  bool sent_role = false;
  bool finished = false;
  size_t lp_offset = 0;

  // SSE text for `d` (content chunk, then on the last delta the finish/usage chunks + [DONE]).
  std::string render(const StreamDelta& d) {
    std::string out;
    const ResponseMeta& m = plan.meta;
    if (m.chat && !sent_role) {
      out += sse_event(chat_chunk(m, json{{"role", "assistant"}, {"content", ""}}, "", nullptr));
      sent_role = true;
    }
    const bool has_lp = plan.logprobs && !d.token_ids.empty();
    if (!d.text.empty() || has_lp) {
      json lp = nullptr;
      if (has_lp) {
        lp = m.chat ? chat_logprobs(d.token_ids, d.logprobs, token_text(ctx->tokenizer))
                    : completion_logprobs(d.token_ids, d.logprobs, token_text(ctx->tokenizer), lp_offset);
      }
      out += sse_event(m.chat ? chat_chunk(m, json{{"content", d.text}}, "", lp)
                              : completion_chunk(m, d.text, "", lp));
    }
    if (d.finished) {
      finished = true;
      if (d.finish_reason == "error") {
        ApiError e = engine_error(d, plan);
        out += sse_event(error_json(e));
      } else {
        out += sse_event(m.chat ? chat_chunk(m, json::object(), d.finish_reason, nullptr)
                                : completion_chunk(m, "", d.finish_reason, nullptr));
        if (plan.include_usage)
          out += sse_event(usage_chunk(m, usage_json(d.num_prompt_tokens, d.num_generated_tokens)));
      }
      out += sse_done();
    }
    return out;
  }
};

void respond_stream(ServerContext& ctx, std::shared_ptr<Channel> ch, std::vector<StreamDelta> first,
                    const ResponsePlan& plan, InFlight in_flight, httplib::Response& res) {
  auto st = std::make_shared<StreamState>();
  st->ctx = &ctx;
  st->ch = std::move(ch);
  st->plan = plan;
  st->buffered = std::move(first);
  st->in_flight.emplace(std::move(in_flight));
  res.status = 200;
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      "text/event-stream",
      [st](size_t, httplib::DataSink& sink) -> bool {
        if (st->finished) {  // everything written: end the chunked body
          sink.done();
          return true;
        }
        if (st->buffered.empty()) {
          Channel::Batch b = st->ch->wait(100ms);
          st->buffered = std::move(b.deltas);
          if (st->buffered.empty()) {
            if (b.done) {  // ended without a final delta (should not happen): close cleanly
              std::string out = sse_done();
              st->finished = true;
              return sink.write(out.data(), out.size());
            }
            return sink.is_writable();  // nothing new: keep waiting unless the client left
          }
        }
        std::string out;
        for (auto& d : st->buffered) out += st->render(d);
        st->buffered.clear();
        // Never write an empty chunk: httplib treats a 0-byte write as the end of the data.
        if (!out.empty() && !sink.write(out.data(), out.size())) return false;
        return true;
      },
      [st](bool) {
        // The stream ended (completed, client gone, or server stopping): make sure the engine
        // stops generating for it and frees its KV blocks.
        if (!st->ch->done()) st->ctx->loop->abort(st->ch);
        st->in_flight.reset();
      });
}

}  // namespace

void handle_generate(ServerContext& ctx, const std::string& body, httplib::Response& res, bool chat) {
  const auto arrival = Clock::now();
  InFlight in_flight(ctx);
  std::shared_ptr<Channel> ch;
  try {
    if (ctx.stopping) throw ApiError(503, "the server is shutting down", "service_unavailable");
    if (ctx.loop->dead())
      throw ApiError(503, "the engine failed and no longer serves requests; restart the server",
                     "service_unavailable", "", "engine_dead");
    GenerationRequest g = chat ? parse_chat_request(body, ctx.max_json_depth)
                               : parse_completion_request(body, ctx.max_json_depth);
    if (!g.model.empty() && g.model != ctx.model_name && g.model != ctx.model_path)
      throw ApiError(404, "The model '" + g.model + "' does not exist; this server serves '" +
                              ctx.model_name + "'", "not_found_error", "model", "model_not_found");
    ResponsePlan plan;
    plan.meta.id = new_response_id(chat);
    plan.meta.model = ctx.model_name;
    plan.meta.created = int64_t(std::time(nullptr));
    plan.meta.chat = chat;
    plan.stream = g.stream;
    plan.include_usage = g.include_usage;
    plan.logprobs = g.logprobs;
    plan.prompt_param = chat ? "messages" : "prompt";
    // Template rendering and tokenization here, on this handler thread, a bounded number at once.
    EngineRequest prepared;
    {
      PrepGate::Slot slot = ctx.prep->acquire(arrival + ctx.prep_timeout, client_gone);
      if (!slot.held()) throw ClientGone{};
      prepared = prepare_prompt(g, ctx.tokenizer, ctx.max_model_len);
    }
    ch = ctx.loop->submit(std::move(prepared), arrival);
    std::vector<StreamDelta> first = wait_first(*ch, plan);
    if (plan.stream) respond_stream(ctx, ch, std::move(first), plan, std::move(in_flight), res);
    else respond_full(ctx, *ch, std::move(first), plan, res);
    return;
  } catch (const ClientGone&) {
    res.status = 499;  // logged, never delivered: the socket is shut so nothing is written
    if (Connection* c = GuardedServer::current_connection()) {
      c->set_close();
      c->shutdown_now();
    }
  } catch (const ApiError& e) {
    set_error(res, e);
  } catch (const std::exception& e) {
    set_error(res, ApiError(500, std::string("internal error: ") + e.what(), "server_error"));
  }
  if (ch && !ch->done()) ctx.loop->abort(ch);  // failed or abandoned: free its KV blocks now
}

}  // namespace nanovllm::server
