// Server metrics in the Prometheus text exposition format (version 0.0.4). Counters and
// histograms are updated from HTTP handler threads and the engine thread (internally locked);
// engine gauges come from an EngineStats snapshot taken by the engine thread.
#pragma once
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "nanovllm/stats.h"

namespace nanovllm::server {

// Cumulative histogram with fixed upper bounds (le); +Inf is implicit.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double v);
  // Appends "# HELP/# TYPE" and the _bucket/_sum/_count lines for `name`.
  void render(std::string& out, const std::string& name, const std::string& help) const;
  uint64_t count() const;

 private:
  mutable std::mutex mu_;
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative); last = +Inf
  double sum_ = 0;
  uint64_t n_ = 0;
};

// The samples of the last `window` (at most `cap` of them, the newest kept): the dashboard's
// percentiles over recent minutes, which cumulative histograms cannot give.
class RecentSamples {
 public:
  using Clock = std::chrono::steady_clock;
  RecentSamples(std::chrono::seconds window, size_t cap) : window_(window), cap_(cap) {}
  void observe(double v, Clock::time_point now = Clock::now());
  struct Summary {
    uint64_t n = 0;  // samples in the window
    double p50 = 0, p90 = 0, p99 = 0;
  };
  Summary summary(Clock::time_point now = Clock::now()) const;
  std::chrono::seconds window() const { return window_; }

 private:
  void prune(Clock::time_point now) const;
  mutable std::mutex mu_;
  mutable std::deque<std::pair<Clock::time_point, double>> q_;
  std::chrono::seconds window_;
  size_t cap_;
};

// What the engine thread publishes after each step (copied under a lock).
struct EngineSnapshot {
  EngineStats stats;
  int last_batch_size = 0;  // sequences in the latest step
  int queued = 0;           // submitted over HTTP, not yet handed to the engine
};

// The HTTP front end's state (connection registry, engine liveness) at render time.
struct FrontendSnapshot {
  int connections = 0;               // open connections
  int64_t connections_evicted = 0;   // shut down to admit a new one (idle / slow headers)
  int64_t connections_refused = 0;   // refused with 503 (every connection busy, or draining)
  bool engine_dead = false;
};

class ServerMetrics {
 public:
  ServerMetrics();
  void count_http(int status);                       // every HTTP response, by status code
  void count_finished(const std::string& reason);    // finished generations, by finish_reason
  void add_prompt_tokens(int64_t n);
  void add_generation_tokens(int64_t n);

  Histogram ttft;        // seconds from HTTP arrival to the first generated token
  Histogram itl;         // seconds between consecutive generated tokens of a request
  Histogram e2e;         // seconds from HTTP arrival to the last token
  Histogram batch_size;  // sequences per engine step
  RecentSamples ttft_recent;  // the same samples as ttft / itl, last minutes only
  RecentSamples itl_recent;

  std::string render(const EngineSnapshot& s, const FrontendSnapshot& f = {}) const;

  // The counters behind render(), copied under the lock (the stats stream reads them).
  struct Counters {
    std::map<int, uint64_t> http;
    std::map<std::string, uint64_t> finished;
    int64_t prompt_tokens = 0;
    int64_t generation_tokens = 0;
  };
  Counters counters() const;

 private:
  mutable std::mutex mu_;
  std::map<int, uint64_t> http_;
  std::map<std::string, uint64_t> finished_;
  int64_t prompt_tokens_ = 0;
  int64_t generation_tokens_ = 0;
};

// Prometheus-style number: integers without a fraction, others with enough digits.
std::string prom_number(double v);

}  // namespace nanovllm::server
