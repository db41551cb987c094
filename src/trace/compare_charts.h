// The SVG charts of `trace-view --compare`: two runs (A, B) drawn over each other, A in blue and
// B in orange. Time charts share one axis: time since each run's own start, so two runs of the
// same traffic line up even when they were recorded hours apart. Each returns one
// <svg data-chart="NAME"> element (sizes bounded as on the single-trace page: one value per
// 2-pixel column, CDFs at most one point per pixel).
#pragma once
#include <string>
#include <vector>

#include "trace/trace_charts.h"
#include "trace/trace_data.h"

namespace nanovllm::trace {

// Output tokens generated so far over time (its slope is the throughput).
std::string throughput_chart(const TraceData& a, const TraceData& b, const ChartLayout& L);
// Waiting and running sequences over time.
std::string queues_chart(const TraceData& a, const TraceData& b, const ChartLayout& L);
// KV blocks used over time, with each run's preemptions as ticks (A above the band, B below).
std::string kv_compare_chart(const TraceData& a, const TraceData& b, const ChartLayout& L);
// Empirical CDF of latency samples (ms) of both runs; `name` is the chart's data-chart name.
std::string cdf_chart(const std::string& name, const std::string& title, std::vector<double> a,
                      std::vector<double> b, int width);

}  // namespace nanovllm::trace
