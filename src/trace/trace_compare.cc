#include "trace/trace_compare.h"

#include <filesystem>

#include "util/check.h"

namespace nanovllm::trace {

CompareRun load_compare_run(const std::string& path, bool include_warmup) {
  const std::string text = read_trace_file(path);
  CompareRun r;
  r.source = std::filesystem::path(path).filename().string();
  try {
    bool truncated = false;
    const nlohmann::json events = parse_trace_events(text, truncated);
    r.data = trace_from_events(events, truncated, include_warmup);
    r.log = request_log_from_events(events, truncated);
  } catch (const Error& e) {
    NV_THROW("trace file '", path, "': ", e.what());
  }
  r.summary = summarize(r.data);
  return r;
}

Comparison compare_traces(const std::string& path_a, const std::string& path_b,
                          bool include_warmup) {
  Comparison c;
  c.a = load_compare_run(path_a, include_warmup);
  c.b = load_compare_run(path_b, include_warmup);
  c.outputs = compare_outputs(c.a.log, c.b.log);
  return c;
}

nlohmann::json to_json(const Comparison& c) {
  return {{"a", to_json(c.a.summary)},
          {"b", to_json(c.b.summary)},
          {"source_a", c.a.source},
          {"source_b", c.b.source},
          {"config_a", c.a.data.config},
          {"config_b", c.b.data.config},
          {"truncated_a", c.a.data.truncated},
          {"truncated_b", c.b.data.truncated},
          {"outputs", to_json(c.outputs)}};
}

}  // namespace nanovllm::trace
