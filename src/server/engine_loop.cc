#include "server/engine_loop.h"

#include <cstdio>

#include "tokenizer/tokenizer.h"
#include "util/check.h"

namespace nanovllm::server {

std::string client_message(const std::string& what) {
  const size_t p = what.rfind(" [");
  if (p != std::string::npos && !what.empty() && what.back() == ']') return what.substr(0, p);
  return what;
}

// --- Channel ---

Channel::Batch Channel::wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait_for(lk, timeout, [&] { return !q_.empty() || done_; });
  Batch b;
  b.deltas.assign(std::make_move_iterator(q_.begin()), std::make_move_iterator(q_.end()));
  q_.clear();
  b.error = error_;
  b.done = done_;
  return b;
}

bool Channel::done() const {
  std::lock_guard<std::mutex> lk(mu_);
  return done_;
}

void Channel::push(StreamDelta d) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (done_) return;
    if (d.finished) done_ = true;
    q_.push_back(std::move(d));
  }
  cv_.notify_all();
}

void Channel::fail(ApiError e) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (done_) return;
    error_ = std::move(e);
    done_ = true;
  }
  cv_.notify_all();
}

// --- EngineLoop ---

EngineLoop::EngineLoop(LLM& llm, ServerMetrics& metrics, int max_waiting)
    : llm_(llm), metrics_(metrics), max_waiting_(max_waiting), max_model_len_(llm.config().max_model_len) {
  snap_.stats = llm_.stats();
}

EngineLoop::~EngineLoop() { stop(); }

void EngineLoop::start() {
  NV_CHECK(!thread_.joinable(), "engine loop already started");
  thread_ = std::thread([this] { run(); });
}

void EngineLoop::stop() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<Channel> EngineLoop::submit(GenerationRequest req, Clock::time_point arrival) {
  auto ch = std::make_shared<Channel>();
  ch->req_ = std::move(req);
  ch->arrival_ = arrival;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stopping_) throw ApiError(503, "the server is shutting down", "service_unavailable", "", "shutting_down");
    const int waiting = int(pending_.size()) + engine_waiting_.load();
    if (max_waiting_ > 0 && waiting >= max_waiting_)
      throw ApiError(503, "too many waiting requests (" + std::to_string(waiting) + " >= --max-waiting " +
                              std::to_string(max_waiting_) + "); retry later",
                     "service_unavailable", "", "server_overloaded");
    pending_.push_back(ch);
  }
  cv_.notify_one();
  return ch;
}

void EngineLoop::abort(const std::shared_ptr<Channel>& ch) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stopping_) return;  // stop() aborts everything anyway
    aborts_.push_back(ch);
  }
  cv_.notify_one();
}

EngineSnapshot EngineLoop::snapshot() const {
  std::lock_guard<std::mutex> lk(snap_mu_);
  return snap_;
}

void EngineLoop::publish() {
  EngineSnapshot s;
  s.stats = llm_.stats();
  s.last_batch_size = llm_.last_step_stats().num_seqs;
  {
    std::lock_guard<std::mutex> lk(mu_);
    s.queued = int(pending_.size());
  }
  engine_waiting_.store(s.stats.num_waiting);
  std::lock_guard<std::mutex> lk(snap_mu_);
  snap_ = s;
}

// Engine thread: prompt -> token ids (chat template, tokenizer), then into the engine.
void EngineLoop::admit(const std::shared_ptr<Channel>& ch) {
  GenerationRequest& r = ch->req_;
  const Tokenizer* tok = llm_.tokenizer();
  try {
    std::vector<int> ids;
    if (r.chat) {
      if (!tok) throw bad_request("this model has no tokenizer.json: use /v1/completions with token ids", "messages");
      std::string rendered;
      try {
        rendered = llm_.apply_chat_template(r.messages.dump(), r.add_generation_prompt, r.template_kwargs.dump());
      } catch (const Error& e) {
        throw bad_request("chat template: " + client_message(e.what()), "messages");
      }
      ids = tok->encode(rendered, /*add_special_tokens=*/false);  // the template has them
    } else if (auto* text = std::get_if<std::string>(&r.prompt)) {
      if (!tok) throw bad_request("this model has no tokenizer.json: send the prompt as token ids", "prompt");
      ids = tok->encode(*text, /*add_special_tokens=*/true);
    } else {
      ids = std::get<std::vector<int>>(r.prompt);
    }
    if (!r.max_tokens_set) {
      r.params.max_tokens = std::max(1, max_model_len_ - int(ids.size()));
      r.params.min_tokens = std::min(r.params.min_tokens, r.params.max_tokens);
    }
    Prompt p(std::move(ids));
    p.add_special_tokens = false;
    ch->request_id_ = llm_.add_request_streaming(p, r.params);
    ch->in_engine_ = true;
    live_[ch->request_id_] = ch;
  } catch (const ApiError& e) {
    ch->fail(e);
  } catch (const Error& e) {
    ch->fail(bad_request(client_message(e.what()), r.chat ? "messages" : "prompt"));
  } catch (const std::exception& e) {
    ch->fail(ApiError(500, std::string("internal error: ") + e.what(), "server_error"));
  }
}

void EngineLoop::dispatch(std::vector<StreamDelta> deltas) {
  const auto now = Clock::now();
  for (auto& d : deltas) {
    auto it = live_.find(d.request_id);
    if (it == live_.end()) continue;
    Channel& ch = *it->second;
    const size_t n = d.token_ids.size();
    if (n > 0) {
      size_t gaps = n;
      if (!ch.got_first_) {
        metrics_.ttft.observe(std::chrono::duration<double>(now - ch.arrival_).count());
        ch.got_first_ = true;
        gaps = n - 1;  // tokens after the first of this delta
        if (gaps > 0) for (size_t i = 0; i < gaps; ++i) metrics_.itl.observe(0.0);
      } else {
        const double per = std::chrono::duration<double>(now - ch.last_token_).count() / double(n);
        for (size_t i = 0; i < n; ++i) metrics_.itl.observe(per);
      }
      ch.last_token_ = now;
      metrics_.add_generation_tokens(int64_t(n));
    }
    if (d.finished) {
      metrics_.count_finished(d.finish_reason);
      metrics_.add_prompt_tokens(d.num_prompt_tokens);
      if (ch.got_first_) metrics_.e2e.observe(std::chrono::duration<double>(now - ch.arrival_).count());
      auto keep = it->second;
      live_.erase(it);
      keep->push(std::move(d));
    } else {
      ch.push(std::move(d));
    }
  }
}

// After an engine exception the batch state is unknown: end every live request with an error.
void EngineLoop::fail_all_live(const std::string& message) {
  for (auto& [id, ch] : live_) {
    try {
      llm_.abort(id);
    } catch (...) {
    }
    StreamDelta d;
    d.request_id = id;
    d.finished = true;
    d.finish_reason = "error";
    d.error = message;
    metrics_.count_finished("error");
    ch->push(std::move(d));
  }
  live_.clear();
  try {
    (void)llm_.take_stream_deltas();
  } catch (...) {
  }
}

void EngineLoop::run() {
  bool busy = false;
  for (;;) {
    std::deque<std::shared_ptr<Channel>> fresh;
    std::vector<std::shared_ptr<Channel>> aborts;
    bool stop = false;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return stopping_ || busy || !pending_.empty() || !aborts_.empty(); });
      fresh.swap(pending_);
      aborts.swap(aborts_);
      stop = stopping_;
    }
    try {
      if (stop) {
        for (auto& ch : fresh) ch->fail(ApiError(503, "the server is shutting down", "service_unavailable"));
        std::vector<uint64_t> ids;
        for (auto& [id, ch] : live_) ids.push_back(id);
        for (uint64_t id : ids) llm_.abort(id);
        dispatch(llm_.take_stream_deltas());
        for (auto& [id, ch] : live_) {  // anything the engine did not end itself
          StreamDelta d;
          d.request_id = id;
          d.finished = true;
          d.finish_reason = "abort";
          ch->push(std::move(d));
        }
        live_.clear();
        publish();
        return;
      }
      for (auto& ch : fresh) admit(ch);
      for (auto& ch : aborts)
        if (ch->in_engine_ && live_.count(ch->request_id_)) llm_.abort(ch->request_id_);
      if (!llm_.is_finished()) {
        (void)llm_.step();  // finished requests also arrive as final stream deltas
        const int bs = llm_.last_step_stats().num_seqs;
        if (bs > 0) metrics_.batch_size.observe(bs);
      }
      dispatch(llm_.take_stream_deltas());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "nanovllm: engine error: %s\n", e.what());
      fail_all_live(std::string("engine error: ") + client_message(e.what()));
    }
    busy = !llm_.is_finished();
    publish();
  }
}

}  // namespace nanovllm::server
