// Generation endpoints: submit to the engine loop, then either collect the whole output (JSON)
// or stream it as server-sent events through a chunked content provider.
#include <algorithm>
#include <chrono>
#include <ctime>
#include <optional>

#include "server/generation.h"
#include "server/guarded_server.h"
#include "server/handlers.h"
#include "server/choice_output.h"
#include "server/openai_response.h"
#include "tokenizer/tokenizer.h"
#include "util/check.h"

namespace nanovllm::server {

using nlohmann::json;
using namespace std::chrono_literals;

void set_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  if (e.status == 503) res.set_header("Retry-After", "1");
  res.set_content(dump_json(error_json(e)), "application/json");
}

bool client_gone() {
  Connection* c = GuardedServer::current_connection();
  return c && c->peer_closed();
}

void drop_client(httplib::Response& res) {
  res.status = 499;  // logged, never delivered: the socket is shut so nothing is written
  if (Connection* c = GuardedServer::current_connection()) {
    c->set_close();
    c->shutdown_now();
  }
}

void check_serving(const ServerContext& ctx) {
  if (ctx.stopping) throw ApiError(503, "the server is shutting down", "service_unavailable");
  if (ctx.loop->dead())
    throw ApiError(503, "the engine failed and no longer serves requests; restart the server",
                   "service_unavailable", "", "engine_dead");
}

ApiError engine_error(const StreamDelta& d, const std::string& prompt_param) {
  const std::string msg = client_message(d.error.empty() ? "request failed" : d.error);
  if (d.num_generated_tokens == 0) return bad_request(msg, prompt_param);
  return ApiError(500, msg, "server_error");
}

std::vector<StreamDelta> wait_first(Channel& ch, const std::string& prompt_param) {
  for (;;) {
    Channel::Batch b = ch.wait(100ms);
    if (b.error) throw *b.error;
    if (!b.deltas.empty()) {
      const StreamDelta& d = b.deltas.front();
      if (d.finished && d.finish_reason == "error") throw engine_error(d, prompt_param);
      return std::move(b.deltas);
    }
    if (b.done) throw ApiError(500, "request ended without output", "server_error");
    if (client_gone()) throw ClientGone{};
  }
}

bool prompt_opens_think(const std::vector<int>& ids, const Tokenizer* tok) {
  if (!tok || ids.empty()) return false;
  const size_t k = std::min<size_t>(ids.size(), 4);
  std::string tail = tok->decode(std::vector<int>(ids.end() - long(k), ids.end()), false);
  while (!tail.empty() && (tail.back() == '\n' || tail.back() == ' ')) tail.pop_back();
  return tail.size() >= 7 && tail.compare(tail.size() - 7, 7, "<think>") == 0;
}

namespace {

// Everything a response needs besides the engine output.
struct ResponsePlan {
  ResponseMeta meta;
  bool stream = false;
  bool include_usage = false;
  bool continuous_usage = false;  // with include_usage: usage (so far) on every chunk
  bool logprobs = false;
  int n = 1;                 // choices returned
  int engine_n = 1;          // completions sampled (SamplingParams::n; best_of > n: more than n)
  ChoiceOptions choice;      // chat: reasoning / tool-call parsing
  std::string echo_text;     // completions with echo: the prompt text
  bool return_token_ids = false;     // completions: token_ids per choice, prompt_token_ids once
  std::vector<int> prompt_token_ids;  // (only kept when return_token_ids)
  std::string prompt_param;  // "prompt" or "messages": named by prompt errors

  ChoiceOptions choice_options(int index) const {
    ChoiceOptions o = choice;
    o.call_id_prefix += std::to_string(index) + "_";
    return o;
  }
};

TokenText token_text(const Tokenizer* tok) {
  return [tok](int id) -> std::string {
    if (!tok) return std::to_string(id);
    return tok->decode({id}, /*skip_special_tokens=*/false);
  };
}

// One choice's output collected for a whole (non-streamed) response.
struct Collected {
  std::string text;
  std::vector<int> ids;
  std::vector<TokenLogprobs> lps;
  bool finished = false;
  StreamDelta last;  // its final delta (finish reason, counts)
};

int choice_index(const StreamDelta& d, int n) { return d.index >= 0 && d.index < n ? d.index : 0; }

void respond_full(ServerContext& ctx, Channel& ch, std::vector<StreamDelta> first,
                  const ResponsePlan& plan, httplib::Response& res) {
  std::vector<Collected> out(size_t(plan.engine_n));
  int finished = 0;
  std::vector<StreamDelta> batch = std::move(first);
  auto next_check = Clock::now() + 100ms;
  for (;;) {
    for (auto& d : batch) {
      Collected& c = out[size_t(choice_index(d, plan.engine_n))];
      c.text += d.text;
      c.ids.insert(c.ids.end(), d.token_ids.begin(), d.token_ids.end());
      c.lps.insert(c.lps.end(), d.logprobs.begin(), d.logprobs.end());
      if (d.finished && !c.finished) {
        c.finished = true;
        c.last = std::move(d);
        ++finished;
      }
    }
    if (finished >= plan.engine_n) break;
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
  int prompt_tokens = 0, completion_tokens = 0;
  for (const Collected& c : out) {
    if (!c.finished) throw ApiError(500, "request ended without output", "server_error");
    if (c.last.finish_reason == "error") throw engine_error(c.last, plan.prompt_param);
    prompt_tokens = c.last.num_prompt_tokens;
    completion_tokens += c.last.num_generated_tokens;  // every sampled completion was generated
  }
  if (plan.engine_n > plan.n) {
    // best_of: the n completions with the highest cumulative logprob of their sampled tokens,
    // best first (ties keep sampling order).
    auto score = [](const Collected& c) {
      double s = 0;
      for (const auto& lp : c.lps) s += double(lp.logprob);
      return s;
    };
    std::stable_sort(out.begin(), out.end(), [&](const Collected& a, const Collected& b) { return score(a) > score(b); });
    out.resize(size_t(plan.n));
  }
  // prompt_logprobs (vLLM's shape): null for the first prompt token, then per token
  // {"<id>": {"logprob", "rank", "decoded_token"}} for the prompt token and the top-N.
  json prompt_lps = nullptr;
  if (!out.empty() && !out[0].last.prompt_logprobs.empty()) {
    const TokenText text_of = token_text(ctx.tokenizer);
    prompt_lps = json::array({nullptr});
    const auto& ids = plan.prompt_token_ids;
    for (size_t p = 0; p < out[0].last.prompt_logprobs.size(); ++p) {
      const TokenLogprobs& lp = out[0].last.prompt_logprobs[p];
      json pos = json::object();
      for (size_t k = 0; k < lp.top.size(); ++k)
        pos[std::to_string(lp.top[k].token_id)] = {{"logprob", lp.top[k].logprob}, {"rank", k + 1},
                                                   {"decoded_token", text_of(lp.top[k].token_id)}};
      if (p + 1 < ids.size())
        pos[std::to_string(ids[p + 1])] = {{"logprob", lp.logprob}, {"rank", lp.rank},
                                           {"decoded_token", text_of(ids[p + 1])}};
      prompt_lps.push_back(std::move(pos));
    }
  }
  json choices = json::array();
  for (int i = 0; i < plan.n; ++i) {
    const Collected& c = out[size_t(i)];
    json lp = nullptr;
    if (plan.logprobs) {
      size_t offset = 0;
      lp = plan.meta.chat ? chat_logprobs(c.ids, c.lps, token_text(ctx.tokenizer))
                          : completion_logprobs(c.ids, c.lps, token_text(ctx.tokenizer), offset);
    }
    if (plan.meta.chat) {
      ChoiceOutput co(plan.choice_options(i));
      (void)co.push(c.text);
      (void)co.finish();
      choices.push_back(chat_choice(i, co.message(), co.finish_reason(c.last.finish_reason), lp));
    } else {
      choices.push_back(completion_choice(i, plan.echo_text + c.text, c.last.finish_reason, lp));
      if (plan.return_token_ids) {
        choices.back()["token_ids"] = c.ids;
        choices.back()["prompt_token_ids"] = plan.prompt_token_ids;
      }
      if (!prompt_lps.is_null()) choices.back()["prompt_logprobs"] = prompt_lps;
    }
  }
  json body = response_body(plan.meta, std::move(choices), usage_json(prompt_tokens, completion_tokens));
  if (plan.meta.chat && !prompt_lps.is_null()) body["prompt_logprobs"] = std::move(prompt_lps);  // vLLM: top level
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
  struct Choice {
    std::unique_ptr<ChoiceOutput> out;  // chat only
    bool started = false;               // role chunk (chat) / echo (completions) sent
    bool finished = false;
    size_t lp_offset = 0;
    bool sent_prompt_ids = false;  // return_token_ids: prompt_token_ids ride on the first chunk
    int generated = 0;             // this choice's tokens so far (continuous usage)
  };
  std::vector<Choice> choices;
  int num_finished = 0;
  int prompt_tokens = 0, completion_tokens = 0;
  bool finished = false;

  void init() {
    choices.resize(size_t(plan.n));
    if (plan.meta.chat)
      for (int i = 0; i < plan.n; ++i) choices[size_t(i)].out = std::make_unique<ChoiceOutput>(plan.choice_options(i));
  }

  // SSE text for `d`: its content chunks; on its final delta the choice's finish chunk, and after
  // the last choice's the usage chunk + [DONE].
  std::string render(const StreamDelta& d) {
    std::string out;
    const ResponseMeta& m = plan.meta;
    const int i = choice_index(d, plan.n);
    Choice& c = choices[size_t(i)];
    if (c.finished) return out;
    c.generated = d.num_generated_tokens;
    prompt_tokens = d.num_prompt_tokens;
    // A content or finish chunk; with continuous usage it carries the usage so far (all choices).
    auto sse_event = [&](json chunk) {
      if (plan.continuous_usage) {
        int gen = 0;
        for (const Choice& x : choices) gen += x.generated;
        chunk["usage"] = usage_json(prompt_tokens, gen);
      }
      return server::sse_event(chunk);
    };
    if (!c.started) {
      c.started = true;
      if (m.chat) out += sse_event(chat_chunk(m, json{{"role", "assistant"}, {"content", ""}}, "", nullptr, i));
      else if (!plan.echo_text.empty()) out += sse_event(completion_chunk(m, plan.echo_text, "", nullptr, i));
    }
    json lp = nullptr;
    if (plan.logprobs && !d.token_ids.empty()) {
      lp = m.chat ? chat_logprobs(d.token_ids, d.logprobs, token_text(ctx->tokenizer))
                  : completion_logprobs(d.token_ids, d.logprobs, token_text(ctx->tokenizer), c.lp_offset);
    }
    if (m.chat) {
      std::vector<json> deltas = c.out->push(d.text);
      if (d.finished) {
        std::vector<json> rest = c.out->finish();
        deltas.insert(deltas.end(), rest.begin(), rest.end());
      }
      if (deltas.empty() && !lp.is_null()) deltas.push_back(json{{"content", ""}});
      for (auto& delta : deltas) {
        out += sse_event(chat_chunk(m, delta, "", lp, i));
        lp = nullptr;  // the step's logprobs ride on its first chunk
      }
    } else if (!d.text.empty() || !lp.is_null() || (plan.return_token_ids && !d.token_ids.empty())) {
      json chunk = completion_chunk(m, d.text, "", lp, i);
      if (plan.return_token_ids) {
        chunk["choices"][0]["token_ids"] = d.token_ids;  // this chunk's tokens
        if (!c.sent_prompt_ids) chunk["choices"][0]["prompt_token_ids"] = plan.prompt_token_ids;
        c.sent_prompt_ids = true;
      }
      out += sse_event(chunk);
    }
    if (!d.finished) return out;
    c.finished = true;
    ++num_finished;
    prompt_tokens = d.num_prompt_tokens;
    completion_tokens += d.num_generated_tokens;
    if (d.finish_reason == "error") {
      out += server::sse_event(error_json(engine_error(d, plan.prompt_param)));
      finished = true;
      return out + sse_done();
    }
    out += sse_event(m.chat ? chat_chunk(m, json::object(), c.out->finish_reason(d.finish_reason), nullptr, i)
                            : completion_chunk(m, "", d.finish_reason, nullptr, i));
    if (num_finished < plan.n) return out;
    finished = true;
    if (plan.include_usage) out += server::sse_event(usage_chunk(m, usage_json(prompt_tokens, completion_tokens)));
    return out + sse_done();
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
  st->init();
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
        for (auto& d : st->buffered)
          if (!st->finished) out += st->render(d);
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

// The completion prompt as text (echo): the string sent, or the ids decoded.
std::string prompt_text(const GenerationRequest& g, const std::vector<int>& prompt_ids, const Tokenizer* tok) {
  if (auto* text = std::get_if<std::string>(&g.prompt)) return *text;
  if (!tok) throw bad_request("'echo' with token-id prompts needs the model's tokenizer.json", "echo");
  return tok->decode(prompt_ids, /*skip_special_tokens=*/false);
}

// Compiles the output constraint here (cached; never on the engine thread): unsupported schema
// features become a 400 naming the request field and the feature.
void prepare_constraint(ServerContext& ctx, const GenerationRequest& g) {
  if (g.params.structured_outputs.empty() || !ctx.llm) return;
  if (!ctx.tokenizer) throw bad_request("output constraints need the model's tokenizer.json", g.constraint_param);
  try {
    ctx.llm->prepare_constraint(g.params.structured_outputs);
  } catch (const Error& e) {
    throw bad_request(g.constraint_param + ": " + client_message(e.what()), g.constraint_param);
  }
}

}  // namespace

Submitted prepare_and_submit(ServerContext& ctx, const GenerationRequest& g, Clock::time_point arrival) {
  if (ctx.embed)
    throw bad_request("this server runs an embedding model (--task embed): use POST /v1/embeddings", "model",
                      "wrong_task");
  if (!g.model.empty() && g.model != ctx.model_name && g.model != ctx.model_path)
    throw ApiError(404, "The model '" + g.model + "' does not exist; this server serves '" +
                            ctx.model_name + "'", "not_found_error", "model", "model_not_found");
  Submitted s;
  EngineRequest prepared;
  {
    // Template rendering and tokenization here, on this handler thread, a bounded number at once.
    PrepGate::Slot slot = ctx.prep->acquire(arrival + ctx.prep_timeout, client_gone);
    if (!slot.held()) throw ClientGone{};
    prepared = prepare_prompt(g, ctx.tokenizer, ctx.max_model_len);
    if (g.soft_thinking_budget && !ctx.reasoning) prepared.params.thinking_budget = -1;
    if (g.chat && ctx.reasoning) s.prompt_opened = prompt_opens_think(prepared.prompt_ids, ctx.tokenizer);
    prepare_constraint(ctx, g);
  }
  s.prompt_ids = prepared.prompt_ids;
  prepared.origin = g.origin;
  s.ch = ctx.loop->submit(std::move(prepared), arrival);
  return s;
}

void handle_generate(ServerContext& ctx, const std::string& body, httplib::Response& res, bool chat) {
  const auto arrival = Clock::now();
  InFlight in_flight(ctx);
  std::shared_ptr<Channel> ch;
  try {
    check_serving(ctx);
    GenerationRequest g = chat ? parse_chat_request(body, ctx.max_json_depth)
                               : parse_completion_request(body, ctx.max_json_depth);
    if (ctx.trace_requests) g.origin = {chat ? "/v1/chat/completions" : "/v1/completions", body};
    ResponsePlan plan;
    plan.meta.id = new_response_id(chat);
    plan.meta.model = ctx.model_name;
    plan.meta.created = int64_t(std::time(nullptr));
    plan.meta.chat = chat;
    plan.stream = g.stream;
    plan.include_usage = g.include_usage;
    plan.continuous_usage = g.include_usage && g.continuous_usage;
    plan.logprobs = g.logprobs;
    plan.n = g.num_returned;
    plan.engine_n = g.params.n;
    plan.prompt_param = chat ? "messages" : "prompt";
    plan.choice.reasoning = chat && ctx.reasoning;
    plan.choice.tools = g.parse_tool_calls;
    plan.choice.format = ctx.tool_format;
    plan.choice.call_id_prefix = "call_" + plan.meta.id.substr(plan.meta.id.size() - 12) + "_";
    Submitted sub = prepare_and_submit(ctx, g, arrival);
    ch = sub.ch;
    plan.choice.prompt_opened = sub.prompt_opened;
    if (g.echo) plan.echo_text = prompt_text(g, sub.prompt_ids, ctx.tokenizer);
    if (g.return_token_ids) plan.return_token_ids = true;
    if (g.return_token_ids || g.params.prompt_logprobs >= 0) plan.prompt_token_ids = std::move(sub.prompt_ids);
    std::vector<StreamDelta> first = wait_first(*ch, plan.prompt_param);
    if (plan.stream) respond_stream(ctx, ch, std::move(first), plan, std::move(in_flight), res);
    else respond_full(ctx, *ch, std::move(first), plan, res);
    return;
  } catch (const ClientGone&) {
    drop_client(res);
  } catch (const ApiError& e) {
    set_error(res, e);
  } catch (const std::exception& e) {
    set_error(res, ApiError(500, std::string("internal error: ") + e.what(), "server_error"));
  }
  if (ch && !ch->done()) ctx.loop->abort(ch);  // failed or abandoned: free its KV blocks now
}

}  // namespace nanovllm::server
