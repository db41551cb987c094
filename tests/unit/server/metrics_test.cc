// Prometheus text: histogram buckets are cumulative, gauges come from the engine snapshot.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include "server/metrics.h"

namespace nanovllm::server {
namespace {

// "name{labels} value" lines -> map (comments skipped); also checks every sample has a TYPE.
std::map<std::string, double> samples(const std::string& text) {
  std::map<std::string, double> out;
  std::set<std::string> typed;
  std::istringstream is(text);
  std::string line;
  while (std::getline(is, line)) {
    if (line.rfind("# TYPE ", 0) == 0) {
      std::istringstream ls(line.substr(7));
      std::string name;
      ls >> name;
      typed.insert(name);
      continue;
    }
    if (line.empty() || line[0] == '#') continue;
    const size_t sp = line.rfind(' ');
    EXPECT_NE(sp, std::string::npos) << line;
    const std::string key = line.substr(0, sp);
    const std::string v = line.substr(sp + 1);
    out[key] = v == "+Inf" ? INFINITY : std::stod(v);
    std::string base = key.substr(0, key.find('{'));
    for (const char* suf : {"_bucket", "_sum", "_count"}) {
      const std::string s(suf);
      if (base.size() > s.size() && base.compare(base.size() - s.size(), s.size(), s) == 0 &&
          typed.count(base.substr(0, base.size() - s.size())))
        base = base.substr(0, base.size() - s.size());
    }
    EXPECT_TRUE(typed.count(base)) << "no # TYPE for " << base;
  }
  return out;
}

TEST(Histogram, CumulativeBuckets) {
  Histogram h({1, 2, 4});
  for (double v : {0.5, 1.0, 1.5, 3.0, 9.0}) h.observe(v);
  std::string out;
  h.render(out, "x", "help");
  auto s = samples(out);
  EXPECT_EQ(s["x_bucket{le=\"1\"}"], 2);  // 0.5 and 1.0 (le is inclusive)
  EXPECT_EQ(s["x_bucket{le=\"2\"}"], 3);
  EXPECT_EQ(s["x_bucket{le=\"4\"}"], 4);
  EXPECT_EQ(s["x_bucket{le=\"+Inf\"}"], 5);
  EXPECT_EQ(s["x_count"], 5);
  EXPECT_DOUBLE_EQ(s["x_sum"], 15.0);
  EXPECT_EQ(h.count(), 5u);
}

TEST(ServerMetrics, RenderFromSnapshotAndCounters) {
  ServerMetrics m;
  m.count_http(200);
  m.count_http(200);
  m.count_http(400);
  m.count_finished("stop");
  m.count_finished("length");
  m.count_finished("length");
  m.add_prompt_tokens(11);
  m.add_generation_tokens(5);
  m.batch_size.observe(3);
  m.ttft.observe(0.02);
  m.itl.observe(0.01);
  EngineSnapshot snap;
  snap.stats.num_running = 3;
  snap.stats.num_waiting = 2;
  snap.queued = 1;
  snap.stats.num_blocks_total = 8;
  snap.stats.num_blocks_used = 2;
  snap.stats.prefix_cache_hit_tokens = 1;
  snap.stats.prefix_cache_query_tokens = 4;
  snap.stats.preemptions = 6;
  snap.stats.max_batch_size = 3;
  snap.last_batch_size = 2;
  snap.stats.spec_draft_tokens = 40;
  snap.stats.spec_accepted_tokens = 30;
  snap.stats.spec_verifications = 10;
  auto s = samples(m.render(snap));
  EXPECT_EQ(s["nanovllm_spec_decode_num_draft_tokens_total"], 40);
  EXPECT_EQ(s["nanovllm_spec_decode_num_accepted_tokens_total"], 30);
  EXPECT_EQ(s["nanovllm_spec_decode_num_drafts_total"], 10);
  EXPECT_DOUBLE_EQ(s["nanovllm_spec_decode_acceptance_rate"], 0.75);
  EXPECT_DOUBLE_EQ(s["nanovllm_spec_decode_mean_accepted_length"], 4.0);
  EXPECT_EQ(s["nanovllm_http_requests_total{status=\"200\"}"], 2);
  EXPECT_EQ(s["nanovllm_http_requests_total{status=\"400\"}"], 1);
  EXPECT_EQ(s["nanovllm_request_success_total{finished_reason=\"length\"}"], 2);
  EXPECT_EQ(s["nanovllm_request_success_total{finished_reason=\"stop\"}"], 1);
  EXPECT_EQ(s["nanovllm_prompt_tokens_total"], 11);
  EXPECT_EQ(s["nanovllm_generation_tokens_total"], 5);
  EXPECT_EQ(s["nanovllm_num_requests_running"], 3);
  EXPECT_EQ(s["nanovllm_num_requests_waiting"], 3);  // engine 2 + queued 1
  EXPECT_DOUBLE_EQ(s["nanovllm_kv_cache_usage_perc"], 0.25);
  EXPECT_DOUBLE_EQ(s["nanovllm_prefix_cache_hit_rate"], 0.25);
  EXPECT_EQ(s["nanovllm_num_preemptions_total"], 6);
  EXPECT_EQ(s["nanovllm_batch_size_max"], 3);
  EXPECT_EQ(s["nanovllm_batch_size_current"], 2);
  EXPECT_EQ(s["nanovllm_batch_size_count"], 1);
  EXPECT_EQ(s["nanovllm_time_to_first_token_seconds_count"], 1);
  EXPECT_EQ(s["nanovllm_inter_token_latency_seconds_count"], 1);
  EXPECT_EQ(s["nanovllm_time_to_first_token_seconds_bucket{le=\"0.025\"}"], 1);
  EXPECT_EQ(s["nanovllm_time_to_first_token_seconds_bucket{le=\"0.01\"}"], 0);
}

TEST(ServerMetrics, EmptyCacheIsZeroNotNaN) {
  ServerMetrics m;
  auto s = samples(m.render(EngineSnapshot{}));
  EXPECT_EQ(s["nanovllm_kv_cache_usage_perc"], 0);
  EXPECT_EQ(s["nanovllm_prefix_cache_hit_rate"], 0);
  EXPECT_EQ(s["nanovllm_spec_decode_acceptance_rate"], 0);
  EXPECT_EQ(s["nanovllm_spec_decode_mean_accepted_length"], 0);
}

TEST(PromNumber, Formats) {
  EXPECT_EQ(prom_number(3), "3");
  EXPECT_EQ(prom_number(0.25), "0.25");
  EXPECT_EQ(prom_number(INFINITY), "+Inf");
}

// The dashboard's percentiles: nearest rank over the samples of the window, the oldest dropped
// by age and by the cap.
TEST(RecentSamples, PercentilesWindowAndCap) {
  using namespace std::chrono_literals;
  const auto t0 = RecentSamples::Clock::now();
  RecentSamples r(60s, 1000);
  EXPECT_EQ(r.summary(t0).n, 0u);
  for (int i = 1; i <= 100; ++i) r.observe(double(i), t0);
  RecentSamples::Summary s = r.summary(t0);
  EXPECT_EQ(s.n, 100u);
  EXPECT_EQ(s.p50, 50.0);
  EXPECT_EQ(s.p90, 90.0);
  EXPECT_EQ(s.p99, 99.0);
  r.observe(1000.0, t0 + 30s);
  EXPECT_EQ(r.summary(t0 + 61s).n, 1u);  // the first hundred are older than the window
  EXPECT_EQ(r.summary(t0 + 61s).p50, 1000.0);
  RecentSamples capped(60s, 10);
  for (int i = 1; i <= 25; ++i) capped.observe(double(i), t0);
  s = capped.summary(t0);
  EXPECT_EQ(s.n, 10u);  // the newest ten: 16..25
  EXPECT_EQ(s.p50, 20.0);
}

}  // namespace
}  // namespace nanovllm::server
