// The numbers of a trace's summary table (and `trace-view --json`), derived from the events
// only: token times are the ends of the steps that sampled each request's tokens, so TTFT and
// inter-token latency here are recomputed independently of the tracer's own per-request args.
#pragma once
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "trace/trace_data.h"

namespace nanovllm::trace {

// Linear interpolation between closest ranks (numpy.percentile's default); q in [0, 100].
// NaN for an empty sample.
double percentile(std::vector<double> values, double q);

struct Distribution {
  int64_t count = 0;
  double mean = 0, p50 = 0, p90 = 0, p99 = 0, max = 0;  // NaN when count == 0
  static Distribution of(const std::vector<double>& values);
};

struct TraceSummary {
  int64_t requests = 0, unfinished_requests = 0;
  std::map<std::string, int64_t> finish_reasons;
  int64_t steps = 0, prefill_steps = 0, decode_steps = 0, mixed_steps = 0;
  int64_t prompt_tokens = 0, prefill_tokens = 0, decode_tokens = 0, output_tokens = 0;
  double busy_seconds = 0;                                 // sum of step durations
  double span_seconds = 0;                                 // first step start .. last step end
  double output_tokens_per_s = 0, total_tokens_per_s = 0;  // over span_seconds
  double mean_batch_size = 0;
  int max_batch_size = 0;
  Distribution ttft_ms, itl_ms, e2e_ms, queue_ms;
  int64_t preemptions = 0;
  int64_t prefix_hit_tokens = 0, prefix_query_tokens = 0;
  double prefix_hit_rate = 0;  // hit / query tokens
  int peak_kv_blocks = 0, num_kv_blocks = 0;
  double split_share[5] =
      {};  // fraction of busy time: schedule, prepare, forward, sample, postprocess
  double tracer_overhead_pct = -1;  // tracer's own time / step time; -1 if unknown (cut short)
  int64_t warmup_steps = 0, warmup_requests = 0;  // left out (before the warmup_end marker)
};

// Per-request latency samples in milliseconds (the summary's distributions, the compare page's
// CDFs). TTFT and ITL come from the step events' token times; a trace without steps (the client's
// view that `replay --url` writes) gives TTFT from the request's own end args.
struct LatencySamples {
  std::vector<double> ttft, itl, e2e, queue;
};
LatencySamples latency_samples(const TraceData& d);

TraceSummary summarize(const TraceData& d);
nlohmann::json to_json(const TraceSummary& s);

}  // namespace nanovllm::trace
