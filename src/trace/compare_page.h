// The self-contained HTML page of `trace-view --compare A.json B.json`: both runs' engine
// configurations (differences marked), a side-by-side summary with B's change against A,
// overlaid charts (output tokens so far, queues, KV blocks and preemptions over time since each run's
// start; TTFT / inter-token / end-to-end latency CDFs) and the table of requests whose outputs
// differ. The trace page's CSS and tooltip script; nothing is fetched.
#pragma once
#include <string>

#include "trace/trace_compare.h"

namespace nanovllm::trace {

struct ComparePageOptions {
  std::string title = "nanovllm trace comparison";
  size_t max_rows = 200;  // rows of the differing-outputs table
};

std::string render_compare_page(const Comparison& c, const ComparePageOptions& opt);

}  // namespace nanovllm::trace
