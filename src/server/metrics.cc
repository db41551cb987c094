#include "server/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace nanovllm::server {

std::string prom_number(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v)) return "NaN";
  char buf[64];
  if (v == std::floor(v) && std::fabs(v) < 1e15) std::snprintf(buf, sizeof buf, "%.0f", v);
  else std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
  std::lock_guard<std::mutex> lk(mu_);
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  counts_[i]++;
  sum_ += v;
  n_++;
}

uint64_t Histogram::count() const {
  std::lock_guard<std::mutex> lk(mu_);
  return n_;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& help) const {
  std::lock_guard<std::mutex> lk(mu_);
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " histogram\n";
  uint64_t cum = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cum += counts_[i];
    const std::string le = i < bounds_.size() ? prom_number(bounds_[i]) : "+Inf";
    out += name + "_bucket{le=\"" + le + "\"} " + std::to_string(cum) + "\n";
  }
  out += name + "_sum " + prom_number(sum_) + "\n";
  out += name + "_count " + std::to_string(n_) + "\n";
}

void RecentSamples::prune(Clock::time_point now) const {
  while (!q_.empty() && (q_.size() > cap_ || now - q_.front().first > window_)) q_.pop_front();
}

void RecentSamples::observe(double v, Clock::time_point now) {
  std::lock_guard<std::mutex> lk(mu_);
  q_.emplace_back(now, v);
  if (q_.size() > cap_) q_.pop_front();
}

RecentSamples::Summary RecentSamples::summary(Clock::time_point now) const {
  std::vector<double> v;
  {
    std::lock_guard<std::mutex> lk(mu_);
    prune(now);
    v.reserve(q_.size());
    for (auto& [t, x] : q_) v.push_back(x);
  }
  Summary s;
  s.n = v.size();
  if (v.empty()) return s;
  // Nearest rank: the smallest sample with at least p of them at or below it.
  auto pct = [&v](double p) {
    size_t k = size_t(std::ceil(p * double(v.size())));
    k = k == 0 ? 0 : k - 1;
    std::nth_element(v.begin(), v.begin() + long(k), v.end());
    return v[k];
  };
  s.p50 = pct(0.50);
  s.p90 = pct(0.90);
  s.p99 = pct(0.99);
  return s;
}

static std::vector<double> latency_buckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75,
          1.0,   2.5,    5.0,   7.5,  10.0,  20.0, 40.0,  80.0, 160.0};
}

ServerMetrics::ServerMetrics()
    : ttft(latency_buckets()),
      itl(latency_buckets()),
      e2e(latency_buckets()),
      batch_size({1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}),
      // Five minutes; ITL has a sample per token, so the cap bounds memory at high throughput
      // (then the window is the newest 65536 tokens).
      ttft_recent(std::chrono::seconds(300), 65536),
      itl_recent(std::chrono::seconds(300), 65536) {}

ServerMetrics::Counters ServerMetrics::counters() const {
  std::lock_guard<std::mutex> lk(mu_);
  return Counters{http_, finished_, prompt_tokens_, generation_tokens_};
}

void ServerMetrics::count_http(int status) {
  std::lock_guard<std::mutex> lk(mu_);
  http_[status]++;
}
void ServerMetrics::count_finished(const std::string& reason) {
  std::lock_guard<std::mutex> lk(mu_);
  finished_[reason]++;
}
void ServerMetrics::add_prompt_tokens(int64_t n) {
  std::lock_guard<std::mutex> lk(mu_);
  prompt_tokens_ += n;
}
void ServerMetrics::add_generation_tokens(int64_t n) {
  std::lock_guard<std::mutex> lk(mu_);
  generation_tokens_ += n;
}

namespace {
void header(std::string& out, const std::string& name, const char* type, const char* help) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}
void metric(std::string& out, const std::string& name, const char* type, const char* help, double v) {
  header(out, name, type, help);
  out += name + " " + prom_number(v) + "\n";
}
}  // namespace

std::string ServerMetrics::render(const EngineSnapshot& s, const FrontendSnapshot& f) const {
  std::string out;
  const EngineStats& e = s.stats;
  {
    std::lock_guard<std::mutex> lk(mu_);
    header(out, "nanovllm_http_requests_total", "counter", "HTTP responses by status code.");
    for (auto& [code, n] : http_)
      out += "nanovllm_http_requests_total{status=\"" + std::to_string(code) + "\"} " + std::to_string(n) + "\n";
    header(out, "nanovllm_request_success_total", "counter", "Finished generation requests by finish reason.");
    for (auto& [reason, n] : finished_)
      out += "nanovllm_request_success_total{finished_reason=\"" + reason + "\"} " + std::to_string(n) + "\n";
    metric(out, "nanovllm_prompt_tokens_total", "counter", "Prompt tokens of served requests.", double(prompt_tokens_));
    metric(out, "nanovllm_generation_tokens_total", "counter", "Generated tokens.", double(generation_tokens_));
  }
  metric(out, "nanovllm_num_requests_running", "gauge", "Sequences in the running batch.", e.num_running);
  metric(out, "nanovllm_num_requests_waiting", "gauge", "Requests waiting (engine queue + HTTP submissions).",
         e.num_waiting + s.queued);
  const double usage = e.num_blocks_total > 0 ? double(e.num_blocks_used) / e.num_blocks_total : 0.0;
  metric(out, "nanovllm_kv_cache_usage_perc", "gauge", "Fraction of KV-cache blocks in use (0..1).", usage);
  metric(out, "nanovllm_kv_cache_blocks_used", "gauge", "KV-cache blocks in use.", e.num_blocks_used);
  metric(out, "nanovllm_kv_cache_blocks_total", "gauge", "KV-cache blocks.", e.num_blocks_total);
  const double hit = e.prefix_cache_query_tokens > 0
                         ? double(e.prefix_cache_hit_tokens) / double(e.prefix_cache_query_tokens)
                         : 0.0;
  metric(out, "nanovllm_prefix_cache_hit_rate", "gauge", "Prompt tokens served from the prefix cache / queried.", hit);
  metric(out, "nanovllm_prefix_cache_hits_total", "counter", "Prompt tokens found in the prefix cache.",
         double(e.prefix_cache_hit_tokens));
  metric(out, "nanovllm_prefix_cache_queries_total", "counter", "Prompt tokens looked up in the prefix cache.",
         double(e.prefix_cache_query_tokens));
  metric(out, "nanovllm_num_preemptions_total", "counter", "Sequences preempted for lack of KV blocks.",
         double(e.preemptions));
  metric(out, "nanovllm_engine_steps_total", "counter", "Engine steps.", double(e.steps));
  // Speculative decoding (vLLM's spec_decode metric names, our prefix).
  metric(out, "nanovllm_spec_decode_num_draft_tokens_total", "counter", "Drafted tokens verified.",
         double(e.spec_draft_tokens));
  metric(out, "nanovllm_spec_decode_num_accepted_tokens_total", "counter", "Drafted tokens accepted.",
         double(e.spec_accepted_tokens));
  metric(out, "nanovllm_spec_decode_num_drafts_total", "counter",
         "Verifications (a sequence checking >= 1 drafted token in a step).", double(e.spec_verifications));
  metric(out, "nanovllm_spec_decode_acceptance_rate", "gauge", "Accepted / drafted tokens (0 without drafts).",
         e.spec_acceptance_rate());
  metric(out, "nanovllm_spec_decode_mean_accepted_length", "gauge",
         "Tokens a verification produced: 1 + accepted / verifications (0 without drafts).",
         e.spec_mean_accepted_length());
  metric(out, "nanovllm_batch_size_current", "gauge", "Sequences in the latest engine step.", s.last_batch_size);
  metric(out, "nanovllm_batch_size_max", "gauge", "Largest number of sequences in one engine step.", e.max_batch_size);
  metric(out, "nanovllm_http_connections", "gauge", "Open HTTP connections.", f.connections);
  metric(out, "nanovllm_http_connections_evicted_total", "counter",
         "Connections without a complete request closed to admit a new one.", double(f.connections_evicted));
  metric(out, "nanovllm_http_connections_refused_total", "counter", "Connections refused with 503.",
         double(f.connections_refused));
  metric(out, "nanovllm_engine_dead", "gauge", "1 after an engine failure (nothing more is served).",
         f.engine_dead ? 1 : 0);
  batch_size.render(out, "nanovllm_batch_size", "Sequences per engine step.");
  ttft.render(out, "nanovllm_time_to_first_token_seconds", "Time from request arrival to the first token.");
  itl.render(out, "nanovllm_inter_token_latency_seconds", "Time between consecutive tokens of a request.");
  e2e.render(out, "nanovllm_e2e_request_latency_seconds", "Time from request arrival to the last token.");
  return out;
}

}  // namespace nanovllm::server
