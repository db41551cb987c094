// The self-contained HTML page of `nanovllm trace-view`: a summary table and three SVG charts
// generated here (steps timeline, KV-block occupancy with queues and preemptions, request
// Gantt chart), inline CSS and a few lines of inline JavaScript (hover tooltips, and the charts'
// page coordinates in <body data-layout> for tools that screenshot it). No network access.
//
// Size is bounded whatever the trace: charts are reduced to one value per 2-pixel column
// (ColumnMax) and the Gantt chart shows at most `max_gantt_rows` requests (evenly spaced by id,
// with a note saying so).
#pragma once
#include <string>
#include <string_view>

#include "trace/trace_data.h"
#include "trace/trace_summary.h"

namespace nanovllm::trace {

struct PageOptions {
  std::string title = "nanovllm trace";
  std::string source;  // the trace file's name, shown in the header
  int max_gantt_rows = 200;
};

std::string render_page(const TraceData& data, const TraceSummary& summary, const PageOptions& opt);

// The page's stylesheet and script (tooltips, <body data-layout>), shared with the compare page.
std::string_view page_css();
std::string_view page_script();

}  // namespace nanovllm::trace
