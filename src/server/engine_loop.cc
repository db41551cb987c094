#include "server/engine_loop.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "util/check.h"

namespace nanovllm::server {

namespace {
ApiError engine_dead_error() {
  return ApiError(503, "the engine failed and no longer serves requests; restart the server", "service_unavailable",
                  "", "engine_dead");
}
}  // namespace

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
    if (d.finished && ++finished_ >= n_) done_ = true;
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

void Channel::end_remaining(const std::string& reason, const std::string& error) {
  for (int i = 0; i < n_; ++i) {
    if (engine_done_[size_t(i)]) continue;
    engine_done_[size_t(i)] = 1;
    StreamDelta d;
    d.request_id = request_id_;
    d.index = i;
    d.finished = true;
    d.finish_reason = reason;
    d.error = error;
    // What the request got before it was cut: an error after output is the server's, and usage
    // counts the tokens generated.
    d.num_prompt_tokens = seen_prompt_;
    d.num_generated_tokens = i < int(seen_generated_.size()) ? seen_generated_[size_t(i)] : 0;
    push(std::move(d));
  }
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

std::shared_ptr<Channel> EngineLoop::submit(EngineRequest req, Clock::time_point arrival) {
  auto ch = std::make_shared<Channel>();
  ch->metrics_ = &metrics_;
  ch->n_ = std::max(1, req.params.n);
  ch->engine_done_.assign(size_t(ch->n_), 0);
  ch->seen_generated_.assign(size_t(ch->n_), 0);
  ch->req_ = std::move(req);
  ch->arrival_ = arrival;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (dead_) throw engine_dead_error();
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
    if (stopping_ || dead_) return;  // stop() aborts everything anyway; a dead loop has nothing
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

// Engine thread: the prepared request joins the running batch at the next step.
void EngineLoop::admit(const std::shared_ptr<Channel>& ch) {
  try {
    Prompt p(std::move(ch->req_.prompt_ids));
    p.add_special_tokens = false;
    ch->in_engine_ = true;
    const RequestOrigin* origin = ch->req_.origin.route.empty() ? nullptr : &ch->req_.origin;
    ch->request_id_ = llm_.add_request(p, ch->req_.params, ch, /*stream=*/true, origin);
    if (!ch->engine_finished_) live_.push_back(ch);  // (a rejection already ended it)
  } catch (const Error& e) {  // e.g. a token id outside the vocabulary
    ch->in_engine_ = false;
    ch->fail(bad_request(client_message(e.what()), "prompt"));
  } catch (const std::exception& e) {
    ch->in_engine_ = false;
    ch->fail(ApiError(500, std::string("internal error: ") + e.what(), "server_error"));
  }
}

// Engine thread, inside the engine's add_request / step / abort.
void Channel::on_event(CompletionEvent&& e) {
  if (detached_) return;
  StreamDelta& d = e.delta;
  const auto now = Clock::now();
  delivered_ = true;
  if (d.index >= 0 && d.index < n_) {  // the counts a final delta made here (end_remaining) repeats
    seen_generated_[size_t(d.index)] = d.num_generated_tokens;
    seen_prompt_ = d.num_prompt_tokens;
  }
  const size_t n = d.token_ids.size();
  if (n > 0) {
    if (!got_first_) {
      const double ttft = std::chrono::duration<double>(now - arrival_).count();
      metrics_->ttft.observe(ttft);
      metrics_->ttft_recent.observe(ttft, now);
      got_first_ = true;
      for (size_t i = 1; i < n; ++i) {  // tokens after the first of this delta
        metrics_->itl.observe(0.0);
        metrics_->itl_recent.observe(0.0, now);
      }
    } else {
      const double per = std::chrono::duration<double>(now - last_token_).count() / double(n);
      for (size_t i = 0; i < n; ++i) {
        metrics_->itl.observe(per);
        metrics_->itl_recent.observe(per, now);
      }
    }
    last_token_ = now;
    metrics_->add_generation_tokens(int64_t(n));
  }
  if (d.finished) {
    metrics_->count_finished(d.finish_reason);
    if (d.index >= 0 && d.index < n_) engine_done_[size_t(d.index)] = 1;
    if (e.request_finished) {
      engine_finished_ = true;
      metrics_->add_prompt_tokens(d.num_prompt_tokens);
      if (got_first_) metrics_->e2e.observe(std::chrono::duration<double>(now - arrival_).count());
    }
  }
  push(std::move(d));
}

void EngineLoop::prune_live() {
  live_.erase(std::remove_if(live_.begin(), live_.end(), [](const auto& ch) { return ch->engine_finished_; }),
              live_.end());
}

// After an engine exception the batch state is unknown and the engine is never stepped again:
// end every live request with an error (a final "error" delta for streams that have output, a
// 500 for the others).
void EngineLoop::fail_all_live(const std::string& message) {
  prune_live();
  for (auto& ch : live_) {
    metrics_.count_finished("error");
    // The engine may outlive this loop (tests share one LLM): take the request out of it, with
    // the channel detached so the abort's events do not reach it.
    ch->detached_ = true;
    try {
      llm_.abort(ch->request_id_);
    } catch (...) {
    }
    ch->engine_finished_ = true;
    if (!ch->delivered_) {
      ch->fail(ApiError(500, message, "server_error", "", "engine_error"));
      continue;
    }
    ch->end_remaining("error", message);
  }
  live_.clear();
}

void EngineLoop::fail_queued(const ApiError& e) {
  std::deque<std::shared_ptr<Channel>> queued;
  {
    std::lock_guard<std::mutex> lk(mu_);
    queued.swap(pending_);
    aborts_.clear();
  }
  for (auto& ch : queued) ch->fail(e);
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
        llm_.abort_all();  // each live request's channel gets its final "abort" events
        prune_live();
        for (auto& ch : live_) ch->end_remaining("abort", "");  // defensive: what the engine did not end
        live_.clear();
        publish();
        return;
      }
      for (auto& ch : fresh) admit(ch);
      for (auto& ch : aborts)
        if (ch->in_engine_ && !ch->engine_finished_) llm_.abort(ch->request_id_);
      if (!llm_.is_finished()) {
        if (fault_after_steps_ >= 0 && steps_ >= fault_after_steps_)
          throw Error("injected engine fault after " + std::to_string(steps_) + " steps (test hook)");
        (void)llm_.step();  // every request has a sink (its channel): step() returns nothing here
        ++steps_;
        if (step_delay_.count() > 0) std::this_thread::sleep_for(step_delay_);
        const int bs = llm_.last_step_stats().num_seqs;
        if (bs > 0) metrics_.batch_size.observe(bs);
      }
      prune_live();
    } catch (const std::exception& e) {
      // The operator's log keeps where it was raised (the client gets the message only).
      const auto* err = dynamic_cast<const Error*>(&e);
      std::fprintf(stderr, "nanovllm: engine error, the engine is dead: %s%s%s%s\n", e.what(),
                   err && !err->where().empty() ? " (raised by " : "", err ? err->where().c_str() : "",
                   err && !err->where().empty() ? ")" : "");
      dead_ = true;
      fail_all_live(std::string("engine error: ") + client_message(e.what()));
      fail_queued(engine_dead_error());
      publish();
      return;  // dead: stop() only joins
    }
    busy = !llm_.is_finished();
    publish();
  }
}

}  // namespace nanovllm::server
