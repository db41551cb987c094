#include "trace/trace_summary.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace nanovllm::trace {

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr const char* kSplitNames[] = {"schedule", "prepare", "forward", "sample", "postprocess"};

nlohmann::json finite_or_null(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json();
}
}  // namespace

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return kNaN;
  std::sort(v.begin(), v.end());
  const double pos = q / 100.0 * double(v.size() - 1);
  const size_t lo = size_t(std::floor(pos)), hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - double(lo));
}

Distribution Distribution::of(const std::vector<double>& v) {
  Distribution d;
  d.count = int64_t(v.size());
  if (v.empty()) {
    d.mean = d.p50 = d.p90 = d.p99 = d.max = kNaN;
    return d;
  }
  d.mean = std::accumulate(v.begin(), v.end(), 0.0) / double(v.size());
  d.p50 = percentile(v, 50);
  d.p90 = percentile(v, 90);
  d.p99 = percentile(v, 99);
  d.max = *std::max_element(v.begin(), v.end());
  return d;
}

LatencySamples latency_samples(const TraceData& d) {
  LatencySamples l;
  for (const RequestRecord& r : d.requests) {
    if (r.arrival < 0) continue;
    if (!r.token_times.empty()) {
      l.ttft.push_back((r.token_times.front() - r.arrival) * 1e-3);
    } else if (d.steps.empty() && r.end_args.is_object()) {  // a client-side trace
      auto t = r.end_args.find("ttft_ms");
      if (t != r.end_args.end() && t->is_number()) l.ttft.push_back(t->get<double>());
    }
    for (size_t i = 1; i < r.token_times.size(); ++i)
      l.itl.push_back((r.token_times[i] - r.token_times[i - 1]) * 1e-3);
    if (r.end >= 0 && r.finish_reason != "unfinished") l.e2e.push_back((r.end - r.arrival) * 1e-3);
    double waited = 0;
    for (const PhaseSpan& p : r.spans)
      if ((p.name == "queued" || p.name == "preempted") && p.end >= 0) waited += p.end - p.begin;
    if (!d.steps.empty() || !r.spans.empty()) l.queue.push_back(waited * 1e-3);  // not client-side
  }
  return l;
}

TraceSummary summarize(const TraceData& d) {
  TraceSummary s;
  s.warmup_steps = d.warmup_steps;
  s.warmup_requests = d.warmup_requests;
  int64_t seq_sum = 0;
  for (const StepRecord& st : d.steps) {
    s.steps++;
    (st.phase == "prefill"  ? s.prefill_steps
     : st.phase == "decode" ? s.decode_steps
                            : s.mixed_steps)++;
    s.prefill_tokens += st.prefill_tokens;
    s.decode_tokens += st.decode_tokens;
    s.busy_seconds += st.dur * 1e-6;
    seq_sum += st.num_seqs;
    s.max_batch_size = std::max(s.max_batch_size, st.num_seqs);
    for (int i = 0; i < 5; ++i) s.split_share[i] += st.split_us[size_t(i)] * 1e-6;
    s.preemptions += st.num_preempted;
  }
  if (s.busy_seconds > 0)
    for (double& x : s.split_share) x /= s.busy_seconds;
  if (!d.steps.empty()) {
    double last = 0;
    for (const StepRecord& st : d.steps) last = std::max(last, st.end());
    s.span_seconds = (last - d.steps.front().ts) * 1e-6;
    s.mean_batch_size = double(seq_sum) / double(s.steps);
  }

  for (const RequestRecord& r : d.requests) {
    s.requests++;
    s.prompt_tokens += r.prompt_tokens;
    s.output_tokens += int64_t(r.token_times.size());
    if (r.finish_reason.empty() || r.finish_reason == "unfinished")
      s.unfinished_requests++;
    else
      s.finish_reasons[r.finish_reason]++;
  }
  const LatencySamples lat = latency_samples(d);
  s.ttft_ms = Distribution::of(lat.ttft);
  s.itl_ms = Distribution::of(lat.itl);
  s.e2e_ms = Distribution::of(lat.e2e);
  s.queue_ms = Distribution::of(lat.queue);
  if (s.span_seconds > 0) {
    s.output_tokens_per_s = double(s.output_tokens) / s.span_seconds;
    s.total_tokens_per_s = double(s.prefill_tokens + s.decode_tokens) / s.span_seconds;
  }
  s.prefix_hit_tokens = d.prefix_hit_tokens;
  s.prefix_query_tokens = d.prefix_query_tokens;
  s.prefix_hit_rate =
      d.prefix_query_tokens > 0 ? double(d.prefix_hit_tokens) / double(d.prefix_query_tokens) : 0;
  for (const KvSample& k : d.kv) s.peak_kv_blocks = std::max(s.peak_kv_blocks, k.used);
  if (d.config.is_object()) s.num_kv_blocks = d.config.value("num_kvcache_blocks", 0);
  if (d.final_stats.is_object()) {
    const double step_us = d.final_stats.value("step_time_us", 0.0);
    if (step_us > 0)
      s.tracer_overhead_pct = 100.0 * d.final_stats.value("tracer_overhead_us", 0.0) / step_us;
  }
  return s;
}

nlohmann::json to_json(const TraceSummary& s) {
  auto dist = [](const Distribution& x) {
    return nlohmann::json{{"count", x.count},
                          {"mean", finite_or_null(x.mean)},
                          {"p50", finite_or_null(x.p50)},
                          {"p90", finite_or_null(x.p90)},
                          {"p99", finite_or_null(x.p99)},
                          {"max", finite_or_null(x.max)}};
  };
  nlohmann::json split;
  for (int i = 0; i < 5; ++i) split[kSplitNames[i]] = s.split_share[i];
  return {{"warmup_steps_left_out", s.warmup_steps},
          {"warmup_requests_left_out", s.warmup_requests},
          {"requests", s.requests},
          {"unfinished_requests", s.unfinished_requests},
          {"finish_reasons", s.finish_reasons},
          {"steps", s.steps},
          {"prefill_steps", s.prefill_steps},
          {"decode_steps", s.decode_steps},
          {"mixed_steps", s.mixed_steps},
          {"prompt_tokens", s.prompt_tokens},
          {"prefill_tokens", s.prefill_tokens},
          {"decode_tokens", s.decode_tokens},
          {"output_tokens", s.output_tokens},
          {"busy_seconds", s.busy_seconds},
          {"span_seconds", s.span_seconds},
          {"output_tokens_per_s", s.output_tokens_per_s},
          {"total_tokens_per_s", s.total_tokens_per_s},
          {"mean_batch_size", s.mean_batch_size},
          {"max_batch_size", s.max_batch_size},
          {"ttft_ms", dist(s.ttft_ms)},
          {"itl_ms", dist(s.itl_ms)},
          {"e2e_ms", dist(s.e2e_ms)},
          {"queue_ms", dist(s.queue_ms)},
          {"preemptions", s.preemptions},
          {"prefix_hit_tokens", s.prefix_hit_tokens},
          {"prefix_query_tokens", s.prefix_query_tokens},
          {"prefix_hit_rate", s.prefix_hit_rate},
          {"peak_kv_blocks", s.peak_kv_blocks},
          {"num_kv_blocks", s.num_kv_blocks},
          {"step_time_split", split},
          {"tracer_overhead_pct",
           s.tracer_overhead_pct >= 0 ? nlohmann::json(s.tracer_overhead_pct) : nlohmann::json()}};
}

}  // namespace nanovllm::trace
