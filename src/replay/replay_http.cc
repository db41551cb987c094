#include "replay/replay_http.h"

#include "util/check.h"

#ifdef NANOVLLM_HAVE_HTTPLIB
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "engine/params_json.h"
#include "replay/http_response.h"
#include "server/httplib_include.h"
#include "trace/trace_writer.h"
#include "util/progress.h"
#endif

namespace nanovllm::replay {

#ifndef NANOVLLM_HAVE_HTTPLIB
HttpReplayStats replay_over_http(const TargetUrl&, const std::vector<ReplayRequest>&,
                                 const HttpReplayOptions&) {
  NV_THROW("this nanovllm was built without cpp-httplib: replay --url is not available "
           "(replay in-process instead)");
}
#else

namespace {

using Clock = std::chrono::steady_clock;

struct Exchange {
  int status = 0;  // 0: no response
  std::string error;
  double sent_us = 0, first_us = -1, end_us = 0;
  std::vector<ChoiceOutput> choices;
};

// The client-side trace: what the engine tracer writes for a request, as seen from the client.
// One mutex: the client threads write as their requests end.
class ClientTrace {
 public:
  ClientTrace(const std::string& path, const TargetUrl& url) {
    if (path.empty()) return;
    w_ = std::make_unique<trace::TraceWriter>(path);
    auto& e = w_->begin_event('i', "engine_config", "engine", 1, 0);
    e.field("s", "g").key("args").begin_object().field("replay_url", url.origin() + url.base_path);
    e.field("client_side", true).end_object();
    w_->end_event();
  }
  void request(const ReplayRequest& q, const Exchange& x) {
    if (!w_) return;
    std::lock_guard<std::mutex> lk(mu_);
    const std::string name = "request " + std::to_string(q.recorded_id);
    auto& b = w_->begin_event('b', name, "request", 2, x.sent_us);
    b.field("id", q.recorded_id).key("args").begin_object().field("request_id", q.recorded_id);
    b.field("prompt_tokens", int(q.prompt_token_ids.size())).end_object();
    w_->end_event();
    auto& r = w_->begin_event('i', "request_record", "replay", 3, x.sent_us);
    r.field("s", "t").key("args").begin_object().field("format", 1).field("request_id", q.recorded_id);
    r.field("step", q.step).field("route", std::string_view(q.origin.route));
    r.key("prompt_token_ids").begin_array();
    for (int t : q.prompt_token_ids) r.value(t);
    // A recorded body without a seed is sent as it was: the server draws its own, unknown here.
    const bool unknown_seed = !q.origin.route.empty() && !q.seed_given;
    SamplingParams sent = q.params;
    if (unknown_seed) sent.seed.reset();
    r.end_array().key("params").raw(params_to_json(sent).dump());
    r.field("seed_given", !unknown_seed);
    if (!q.origin.body.empty()) r.field("body", std::string_view(q.origin.body));
    r.end_object();
    w_->end_event();
    int tokens = 0;
    for (const ChoiceOutput& c : x.choices) {
      tokens += int(c.token_ids.size());
      auto& o = w_->begin_event('i', "request_output", "replay", 3, x.end_us);
      o.field("s", "t").key("args").begin_object().field("request_id", q.recorded_id);
      o.field("index", c.index).field("step", int64_t(-1));
      o.field("finish_reason", std::string_view(x.status / 100 == 2 ? c.finish_reason : "error"));
      if (c.has_token_ids) {
        o.key("token_ids").begin_array();
        for (int t : c.token_ids) o.value(t);
        o.end_array();
      }
      o.field("text", std::string_view(c.text)).end_object();
      w_->end_event();
    }
    auto& e = w_->begin_event('e', name, "request", 2, x.end_us);
    e.field("id", q.recorded_id).key("args").begin_object();
    const std::string reason = x.status / 100 != 2 ? "error"
                               : x.choices.empty() ? "" : x.choices.front().finish_reason;
    e.field("finish_reason", std::string_view(reason)).field("http_status", x.status);
    e.field("output_tokens", tokens).field("e2e_ms", (x.end_us - x.sent_us) / 1e3, 3);
    if (x.first_us >= 0) e.field("ttft_ms", (x.first_us - x.sent_us) / 1e3, 3);
    if (!x.error.empty()) e.field("error", std::string_view(x.error));
    e.end_object();
    w_->end_event();
  }
  void close() {
    if (w_) w_->close();
  }

 private:
  std::mutex mu_;
  std::unique_ptr<trace::TraceWriter> w_;
};

Exchange send(const TargetUrl& url, const HttpRequest& h, const HttpReplayOptions& opt,
              Clock::time_point start) {
  auto us = [start] {
    return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
  };
  Exchange x;
  httplib::Client cli(url.origin());
  cli.set_follow_location(false);  // never anywhere but this server
  cli.set_connection_timeout(10);
  cli.set_read_timeout(time_t(opt.timeout_s));
  cli.set_write_timeout(time_t(opt.timeout_s));
  httplib::Request req;
  req.method = "POST";
  req.path = url.path(h.route);
  req.body = h.body;
  req.headers.emplace("Content-Type", "application/json");
  if (!opt.api_key.empty()) req.headers.emplace("Authorization", "Bearer " + opt.api_key);
  ResponseReader reader(h.route);
  std::string raw, line;
  bool sse = false;
  req.response_handler = [&](const httplib::Response& r) {
    sse = r.get_header_value("Content-Type").rfind("text/event-stream", 0) == 0;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    if (!sse) {
      raw.append(data, n);
      return true;
    }
    for (size_t i = 0; i < n; ++i) {  // lines as they arrive: the first content is the TTFT
      if (data[i] != '\n') {
        line.push_back(data[i]);
        continue;
      }
      if (reader.feed_sse_line(line) && x.first_us < 0) x.first_us = us();
      raw += line + "\n";
      line.clear();
    }
    return true;
  };
  x.sent_us = us();
  httplib::Result res = cli.send(req);
  x.end_us = us();
  if (!res) {
    x.error = "no response from " + url.origin() + ": " + httplib::to_string(res.error());
    return x;
  }
  x.status = res->status;
  if (x.status / 100 != 2) {
    x.error = "HTTP " + std::to_string(x.status) + ": " + raw.substr(0, 300);
    return x;
  }
  try {
    if (!sse) reader.read_whole(raw);
  } catch (const Error& e) {
    x.error = e.what();
  }
  x.choices = reader.choices();
  return x;
}

}  // namespace

HttpReplayStats replay_over_http(const TargetUrl& url, const std::vector<ReplayRequest>& plan,
                                 const HttpReplayOptions& opt) {
  NV_CHECK(opt.replay.timing == Timing::kWall,
           "--url replays by wall-clock time (--timing wall): a remote server's steps are not replay's");
  std::vector<HttpRequest> bodies;  // every body first: a request replay cannot send fails now
  for (const ReplayRequest& q : plan) bodies.push_back(http_request(q));
  HttpReplayStats st;
  ClientTrace out(opt.trace_path, url);
  const auto start = Clock::now();
  std::mutex mu;
  std::condition_variable cv;
  std::deque<size_t> due;
  bool dispatched_all = false;
  std::atomic<int64_t> done{0};
  auto worker = [&] {
    for (;;) {
      size_t i;
      {
        std::unique_lock<std::mutex> lk(mu);
        cv.wait(lk, [&] { return !due.empty() || dispatched_all; });
        if (due.empty()) return;
        i = due.front();
        due.pop_front();
      }
      const Exchange x = send(url, bodies[i], opt, start);
      out.request(plan[i], x);
      {
        std::lock_guard<std::mutex> lk(mu);
        if (x.status == 0) st.transport_errors++;
        else if (x.status / 100 != 2) st.http_errors++;
        if (!x.error.empty() && st.first_error.empty()) st.first_error = x.error;
        for (const ChoiceOutput& c : x.choices) st.replay.output_tokens += int64_t(c.token_ids.size());
      }
      done++;
    }
  };
  std::vector<std::thread> pool;
  const size_t threads = std::min(plan.size(), size_t(std::max(1, opt.max_concurrency)));
  for (size_t i = 0; i < threads; ++i) pool.emplace_back(worker);
  ProgressBar bar("replay", int64_t(plan.size()), opt.replay.progress);
  for (size_t i = 0; i < plan.size(); ++i) {
    const auto at = start + std::chrono::microseconds(int64_t(plan[i].offset_us / opt.replay.speed));
    while (Clock::now() < at) {
      bar.update(done.load());
      std::this_thread::sleep_until(std::min(at, Clock::now() + std::chrono::milliseconds(100)));
    }
    {
      std::lock_guard<std::mutex> lk(mu);
      due.push_back(i);
    }
    cv.notify_one();
  }
  {
    std::lock_guard<std::mutex> lk(mu);
    dispatched_all = true;
  }
  cv.notify_all();
  while (done.load() < int64_t(plan.size())) {
    bar.update(done.load());
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  for (std::thread& t : pool) t.join();
  bar.finish();
  out.close();
  st.replay.requests = int64_t(plan.size());
  st.replay.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  NV_CHECK(plan.empty() || st.transport_errors < int64_t(plan.size()), "no request reached ",
           url.origin() + url.base_path, " (", st.first_error, ")");
  return st;
}

#endif

}  // namespace nanovllm::replay
