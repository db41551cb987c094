// The three SVG charts of the trace page, each a function of the trace and the shared time
// scale (so the charts line up vertically). Each returns one <svg data-chart="NAME"> element.
#pragma once
#include <string>

#include "trace/svg_plot.h"
#include "trace/trace_data.h"

namespace nanovllm::trace {

// Chart geometry shared by the page: width, left margin (labels) and right margin.
struct ChartLayout {
  int width = 1180, left = 78, right = 16;
  TimeScale scale(const TraceData& d) const;
  int columns() const { return (width - left - right) / 2; }  // 2 pixels per column
};

// Bands over time: batch size, prefill tokens, decode tokens and duration of the steps.
std::string steps_chart(const TraceData& d, const ChartLayout& L);
// KV blocks used (bars), cached (line), total (dashed), preemptions (red ticks); queues below.
std::string kv_chart(const TraceData& d, const ChartLayout& L);
// One row per request (at most max_rows, evenly spaced by id): queued / prefill / decode /
// preempted spans. `note` receives "showing N of M requests" when rows were dropped.
std::string gantt_chart(const TraceData& d, const ChartLayout& L, int max_rows, std::string& note);

}  // namespace nanovllm::trace
