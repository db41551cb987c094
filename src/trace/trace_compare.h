// Two traces side by side (`trace-view --compare A.json B.json`): each run's series and summary,
// and which requests' outputs differ (output_diff.h). The page is compare_page.h.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "trace/output_diff.h"
#include "trace/request_log.h"
#include "trace/trace_data.h"
#include "trace/trace_summary.h"

namespace nanovllm::trace {

struct CompareRun {
  std::string source;  // the file's name, as the page shows it
  TraceData data;
  TraceSummary summary;
  RequestLog log;  // empty when the trace was recorded without --trace-requests
};

// Reads one trace (parsed once for both its series and its request records). Errors name the
// file; a truncated file loads up to its last complete event.
CompareRun load_compare_run(const std::string& path, bool include_warmup);

struct Comparison {
  CompareRun a, b;
  OutputComparison outputs;
};
Comparison compare_traces(const std::string& path_a, const std::string& path_b, bool include_warmup);

// {"a": summary, "b": summary, "config_a", "config_b", "outputs": counts + differing requests}.
nlohmann::json to_json(const Comparison& c);

}  // namespace nanovllm::trace
