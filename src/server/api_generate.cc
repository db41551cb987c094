// The routes of other API shapes over the same chat generation: OpenAI's /v1/responses (+ GET,
// cancel, DELETE of stored responses) and Anthropic's /v1/messages (+ count_tokens). Requests
// are translated to chat requests (responses_request, anthropic_request); output goes through
// ChoiceOutput (reasoning and tool-call parsing) into an ApiWriter (responses_writer,
// anthropic_writer), streamed or whole.
#include <algorithm>
#include <chrono>
#include <ctime>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include "server/anthropic_request.h"
#include "server/anthropic_writer.h"
#include "server/choice_output.h"
#include "server/generation.h"
#include "server/response_store.h"
#include "server/responses_request.h"
#include "server/responses_writer.h"
#include "tokenizer/tokenizer.h"

namespace nanovllm::server {

using nlohmann::json;
using namespace std::chrono_literals;

namespace {

std::string random_hex(size_t n) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char* kHex = "0123456789abcdef";
  std::string s(n, '0');
  for (auto& c : s) c = kHex[rng() & 15];
  return s;
}

// One completion (n = 1) from chat deltas to an API writer.
class WriterRun {
 public:
  WriterRun(std::shared_ptr<ApiWriter> w, const ChoiceOptions& opt, const Tokenizer* tok)
      : w_(std::move(w)), co_(opt), tok_(tok) {}

  // SSE text for these deltas (the writer also accumulates the whole result).
  std::string feed(const StreamDelta& d) {
    if (finished_) return "";
    std::string out;
    if (!began_) {
      out += w_->begin();
      began_ = true;
    }
    for (const json& cd : co_.push(d.text)) out += push(cd);
    if (!d.finished) return out;
    finished_ = true;
    if (d.finish_reason == "error") {
      error_ = engine_error(d, "input");  // after output (the loop's final delta counts it): 500
      return out + w_->stream_error(*error_);
    }
    for (const json& cd : co_.finish()) out += push(cd);
    FinishInfo f;
    f.finish_reason = co_.finish_reason(d.finish_reason);
    f.stop_reason = d.stop_reason;
    f.prompt_tokens = d.num_prompt_tokens;
    f.completion_tokens = d.num_generated_tokens;
    f.cached_tokens = d.num_cached_tokens;
    // Reasoning tokens re-counted from the text (the engine does not split its count).
    if (tok_ && !reasoning_.empty()) f.reasoning_tokens = int(tok_->encode(reasoning_, false).size());
    return out + w_->finish(f);
  }
  bool finished() const { return finished_; }
  const std::optional<ApiError>& error() const { return error_; }
  ApiWriter& writer() { return *w_; }

 private:
  std::string push(const json& cd) {
    if (auto r = cd.find("reasoning_content"); r != cd.end() && r->is_string()) reasoning_ += r->get<std::string>();
    return w_->delta(cd);
  }
  std::shared_ptr<ApiWriter> w_;
  ChoiceOutput co_;
  const Tokenizer* tok_;
  std::string reasoning_;
  bool began_ = false, finished_ = false;
  std::optional<ApiError> error_;
};

using ErrorBody = json (*)(const ApiError&);

void set_api_error(httplib::Response& res, const ApiError& e, ErrorBody body) {
  if (!body) return set_error(res, e);
  res.status = e.status;
  if (e.status == 503) res.set_header("Retry-After", "1");
  res.set_content(dump_json(body(e)), "application/json");
}

// Whole answer: drain the channel into the run; 200 with the writer's result.
void respond_whole(ServerContext& ctx, Channel& ch, std::vector<StreamDelta> first, WriterRun& run,
                   httplib::Response& res, ErrorBody err) {
  (void)ctx;
  std::vector<StreamDelta> batch = std::move(first);
  auto next_check = Clock::now() + 100ms;
  for (;;) {
    for (const auto& d : batch) (void)run.feed(d);
    if (run.finished()) break;
    Channel::Batch b = ch.wait(100ms);
    if (b.error) throw *b.error;
    if (b.done && b.deltas.empty()) throw ApiError(500, "request ended without output", "server_error");
    batch = std::move(b.deltas);
    if (Clock::now() >= next_check) {
      if (client_gone()) throw ClientGone{};
      next_check = Clock::now() + 100ms;
    }
  }
  if (run.error()) return set_api_error(res, *run.error(), err);
  res.status = 200;
  res.set_content(dump_json(run.writer().result()), "application/json");
}

struct ApiStream {
  ServerContext* ctx = nullptr;
  std::optional<InFlight> in_flight;
  std::shared_ptr<Channel> ch;
  std::shared_ptr<WriterRun> run;
  std::vector<StreamDelta> buffered;
  bool ended = false;
};

void respond_sse(ServerContext& ctx, std::shared_ptr<Channel> ch, std::vector<StreamDelta> first,
                 std::shared_ptr<WriterRun> run, InFlight in_flight, httplib::Response& res) {
  auto st = std::make_shared<ApiStream>();
  st->ctx = &ctx;
  st->ch = std::move(ch);
  st->run = std::move(run);
  st->buffered = std::move(first);
  st->in_flight.emplace(std::move(in_flight));
  res.status = 200;
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      "text/event-stream",
      [st](size_t, httplib::DataSink& sink) -> bool {
        if (st->ended) {
          sink.done();
          return true;
        }
        if (st->buffered.empty()) {
          Channel::Batch b = st->ch->wait(100ms);
          st->buffered = std::move(b.deltas);
          if (st->buffered.empty()) {
            if (b.done) {  // ended without a final delta (should not happen): an error event
              std::string out = st->run->writer().stream_error(ApiError(500, "request ended without output", "server_error"));
              st->ended = true;
              return sink.write(out.data(), out.size());
            }
            return sink.is_writable();
          }
        }
        std::string out;
        for (const auto& d : st->buffered) out += st->run->feed(d);
        st->buffered.clear();
        if (st->run->finished()) {
          out += st->run->writer().done_marker();
          st->ended = true;
        }
        if (!out.empty() && !sink.write(out.data(), out.size())) return false;
        return true;
      },
      [st](bool) {
        if (!st->ch->done()) st->ctx->loop->abort(st->ch);
        st->in_flight.reset();
      });
}

ChoiceOptions choice_options(const ServerContext& ctx, const GenerationRequest& g, const Submitted& sub,
                             const std::string& id) {
  ChoiceOptions o;
  o.reasoning = ctx.reasoning;
  o.prompt_opened = sub.prompt_opened;
  o.tools = g.parse_tool_calls;
  o.format = ctx.tool_format;
  o.call_id_prefix = "call_" + id.substr(id.size() - 12) + "_";
  return o;
}

// Shared by both routes: submit, wait for the first delta, answer whole or streamed.
template <class MakeWriter>
void generate_with_writer(ServerContext& ctx, const GenerationRequest& g, Clock::time_point arrival,
                          InFlight in_flight, const std::string& id, MakeWriter make_writer,
                          httplib::Response& res, ErrorBody err, std::shared_ptr<Channel>& ch) {
  Submitted sub = prepare_and_submit(ctx, g, arrival);
  ch = sub.ch;
  auto run = std::make_shared<WriterRun>(make_writer(sub), choice_options(ctx, g, sub, id), ctx.tokenizer);
  std::vector<StreamDelta> first = wait_first(*ch, "input");
  if (g.stream) respond_sse(ctx, ch, std::move(first), std::move(run), std::move(in_flight), res);
  else respond_whole(ctx, *ch, std::move(first), *run, res, err);
}

}  // namespace

void handle_messages(ServerContext& ctx, const std::string& body, httplib::Response& res) {
  const auto arrival = Clock::now();
  InFlight in_flight(ctx);
  std::shared_ptr<Channel> ch;
  try {
    check_serving(ctx);
    MessagesRequest m = parse_messages_request(body, ctx.max_json_depth);
    if (ctx.trace_requests) m.g.origin = {"/v1/messages", body};
    const std::string id = "msg_" + random_hex(24);
    generate_with_writer(
        ctx, m.g, arrival, std::move(in_flight), id,
        [&](const Submitted& sub) {
          return std::make_shared<AnthropicWriter>(id, ctx.model_name, int(sub.prompt_ids.size()));
        },
        res, anthropic_error_json, ch);
    return;
  } catch (const ClientGone&) {
    drop_client(res);
  } catch (const ApiError& e) {
    set_api_error(res, e, anthropic_error_json);
  } catch (const std::exception& e) {
    set_api_error(res, ApiError(500, std::string("internal error: ") + e.what(), "server_error"), anthropic_error_json);
  }
  if (ch && !ch->done()) ctx.loop->abort(ch);
}

void handle_count_tokens(ServerContext& ctx, const std::string& body, httplib::Response& res) {
  try {
    MessagesRequest m = parse_count_tokens_request(body, ctx.max_json_depth);
    if (!m.g.model.empty() && m.g.model != ctx.model_name && m.g.model != ctx.model_path)
      throw ApiError(404, "The model '" + m.g.model + "' does not exist; this server serves '" + ctx.model_name + "'",
                     "not_found_error", "model");
    std::vector<int> ids;
    {
      PrepGate::Slot slot = ctx.prep->acquire(Clock::now() + ctx.prep_timeout, client_gone);
      if (!slot.held()) throw ClientGone{};
      ids = render_prompt_ids(m.g, ctx.tokenizer);
    }
    res.set_content(dump_json(json{{"input_tokens", ids.size()}}), "application/json");
  } catch (const ClientGone&) {
    drop_client(res);
  } catch (const ApiError& e) {
    set_api_error(res, e, anthropic_error_json);
  } catch (const std::exception& e) {
    set_api_error(res, ApiError(500, std::string("internal error: ") + e.what(), "server_error"), anthropic_error_json);
  }
}

namespace {

json response_base(const ServerContext& ctx, const std::string& id, const ResponsesRequest& r) {
  json resp{{"id", id}, {"object", "response"}, {"created_at", int64_t(std::time(nullptr))}, {"model", ctx.model_name}};
  for (const auto& [k, v] : r.echo.items()) resp[k] = v;
  return resp;
}

// The hook that stores a finished response with its conversation (the input + the answer).
void store_on_finish(std::shared_ptr<ResponseStore> store, ResponsesWriter& w, const std::string& id, json conversation) {
  w.on_finish = [store, id, conv = std::move(conversation)](const json& response, const json& message) mutable {
    if (response["status"] != "completed" && response["status"] != "incomplete") return;
    conv.push_back(message);
    store->put(id, response, std::move(conv));
  };
}

// A background response: the request runs on; GET polls its channel (without waiting) into the
// writer. Cancel aborts it; the engine's final "abort" delta then ends it as cancelled.
struct BackgroundRun {
  std::mutex mu;
  std::shared_ptr<Channel> ch;
  std::shared_ptr<WriterRun> run;
  std::shared_ptr<ResponsesWriter> writer;
  EngineLoop* loop = nullptr;

  json poll() {
    std::lock_guard<std::mutex> lock(mu);
    while (!run->finished()) {
      Channel::Batch b = ch->wait(0ms);
      for (const auto& d : b.deltas) (void)run->feed(d);
      if (b.deltas.empty()) {
        if (b.done && !run->finished()) {  // ended without a final delta: as aborted
          StreamDelta end;
          end.finished = true;
          end.finish_reason = "abort";
          (void)run->feed(end);
        }
        break;
      }
    }
    return writer->result();
  }
};

}  // namespace

void handle_responses(ServerContext& ctx, const std::string& body, httplib::Response& res) {
  const auto arrival = Clock::now();
  InFlight in_flight(ctx);
  std::shared_ptr<Channel> ch;
  try {
    check_serving(ctx);
    ResponsesRequest r = parse_responses_request(body, ctx.max_json_depth, *ctx.responses);
    if (ctx.trace_requests) r.g.origin = {"/v1/responses", body};
    const std::string id = "resp_" + random_hex(24);
    auto writer = std::make_shared<ResponsesWriter>(response_base(ctx, id, r));
    if (r.store) store_on_finish(ctx.responses, *writer, id, r.conversation);
    if (r.background) {
      if (ctx.responses->capacity() == 0)
        throw bad_request("'background' needs the response store (serve --max-stored-responses > 0)", "background");
      if (r.g.stream) throw bad_request("'background' with 'stream' is not supported: poll GET /v1/responses/{id}", "stream");
      Submitted sub = prepare_and_submit(ctx, r.g, arrival);
      ch = sub.ch;
      auto bg = std::make_shared<BackgroundRun>();
      bg->ch = sub.ch;
      bg->writer = writer;
      bg->run = std::make_shared<WriterRun>(writer, choice_options(ctx, r.g, sub, id), ctx.tokenizer);
      bg->loop = ctx.loop;
      (void)writer->begin();
      ResponseStore::Live live;
      live.poll = [bg] { return bg->poll(); };
      live.cancel = [bg] {
        if (!bg->ch->done()) bg->loop->abort(bg->ch);
      };
      ctx.responses->put_live(id, std::move(live));
      json now = writer->result();
      now["status"] = "queued";
      res.status = 200;
      res.set_content(dump_json(now), "application/json");
      return;
    }
    generate_with_writer(
        ctx, r.g, arrival, std::move(in_flight), id, [&](const Submitted&) { return writer; }, res, nullptr, ch);
    return;
  } catch (const ClientGone&) {
    drop_client(res);
  } catch (const ApiError& e) {
    set_error(res, e);
  } catch (const std::exception& e) {
    set_error(res, ApiError(500, std::string("internal error: ") + e.what(), "server_error"));
  }
  if (ch && !ch->done()) ctx.loop->abort(ch);
}

void handle_response_get(ServerContext& ctx, const std::string& id, httplib::Response& res) {
  std::optional<json> r = ctx.responses->response(id);
  if (!r) return set_error(res, ApiError(404, "Response with id '" + id + "' not found", "invalid_request_error", "response_id", "not_found"));
  res.set_content(dump_json(*r), "application/json");
}

void handle_response_cancel(ServerContext& ctx, const std::string& id, httplib::Response& res) {
  bool was_live = false;
  if (!ctx.responses->cancel(id, &was_live))
    return set_error(res, ApiError(404, "Response with id '" + id + "' not found", "invalid_request_error", "response_id", "not_found"));
  if (!was_live) {
    std::optional<json> r = ctx.responses->response(id);
    return set_error(res, bad_request("Cannot cancel a response that is not running in the background (status " +
                                          (r ? r->value("status", "unknown") : std::string("unknown")) + ")",
                                      "response_id"));
  }
  // The abort reaches the engine on its next step; wait briefly for the cancelled state.
  json r;
  for (int i = 0; i < 50; ++i) {
    std::optional<json> cur = ctx.responses->response(id);
    if (!cur) break;
    r = *cur;
    if (r.value("status", "") != "in_progress") break;
    std::this_thread::sleep_for(20ms);
  }
  res.set_content(dump_json(r), "application/json");
}

void handle_response_delete(ServerContext& ctx, const std::string& id, httplib::Response& res) {
  if (!ctx.responses->erase(id))
    return set_error(res, ApiError(404, "Response with id '" + id + "' not found", "invalid_request_error", "response_id", "not_found"));
  res.set_content(dump_json(json{{"id", id}, {"object", "response"}, {"deleted", true}}), "application/json");
}

}  // namespace nanovllm::server
