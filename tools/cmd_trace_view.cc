// `nanovllm trace-view FILE -o page.html [--json] [--max-requests N]`: one self-contained HTML
// page (no network) from a trace written by `--trace` (src/trace/README.md); --json prints the
// summary numbers. `--compare A.json B.json`: the comparison page of two runs instead (and its
// numbers with --json), e.g. a recording and its `nanovllm replay` under other flags.
#include <CLI/CLI.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "command.h"
#include "trace/compare_page.h"
#include "trace/trace_data.h"
#include "trace/trace_page.h"
#include "trace/trace_summary.h"
#include "util/check.h"

namespace nanovllm::cli {
namespace {

void write_page(const std::string& out, const std::string& page) {
  std::ofstream f(out, std::ios::binary);
  NV_CHECK(f.good(), "cannot write '", out, "'");
  f << page;
  f.close();
  NV_CHECK(!f.fail(), "writing '", out, "' failed");
}

int run_compare(const std::string& a, const std::string& b, const std::string& out, bool json,
                bool include_warmup) {
  const trace::Comparison c = trace::compare_traces(a, b, include_warmup);
  if (!out.empty()) {
    const std::string page = trace::render_compare_page(c, {});
    write_page(out, page);
    std::fprintf(stderr, "trace-view: A %zu steps, %zu requests; B %zu steps, %zu requests", c.a.data.steps.size(),
                 c.a.data.requests.size(), c.b.data.steps.size(), c.b.data.requests.size());
    if (c.outputs.available)
      std::fprintf(stderr, "; outputs: %lld equal, %lld different, %lld not compared",
                   static_cast<long long>(c.outputs.equal), static_cast<long long>(c.outputs.different),
                   static_cast<long long>(c.outputs.not_compared));
    std::fprintf(stderr, " -> %s (%zu bytes)\n", out.c_str(), page.size());
  }
  if (json) std::cout << trace::to_json(c).dump(1) << std::endl;
  return 0;
}

int run_trace_view(int argc, char** argv) {
  CLI::App app{"HTML page (steps, KV blocks, request Gantt chart, summary) of a --trace file",
               "nanovllm trace-view"};
  std::string in, out;
  bool json = false, include_warmup = false;
  trace::PageOptions opt;
  std::vector<std::string> compare;
  app.add_option("trace", in, "trace file written by --trace");
  app.add_option("--compare", compare,
                 "A.json B.json: compare two runs (summary, latency CDFs, queues, KV blocks, and "
                 "which requests' outputs differ when both were recorded with --trace-requests)")
      ->expected(2);
  app.add_option("-o,--out", out, "HTML page to write");
  app.add_flag("--json", json, "print the summary as JSON on stdout");
  app.add_flag("--include-warmup", include_warmup,
               "keep the steps and requests before the warmup_end marker (bench's warm-up)");
  app.add_option("--max-requests", opt.max_gantt_rows,
                 "requests shown in the Gantt chart (evenly spaced)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  NV_CHECK(!out.empty() || json, "give -o PAGE.html and/or --json");
  NV_CHECK(opt.max_gantt_rows >= 2, "--max-requests must be >= 2, got ", opt.max_gantt_rows);
  NV_CHECK(in.empty() != compare.empty(), "give one trace file, or --compare A.json B.json");
  if (!compare.empty()) return run_compare(compare[0], compare[1], out, json, include_warmup);

  const trace::TraceData data = trace::load_trace(in, include_warmup);
  const trace::TraceSummary summary = trace::summarize(data);
  if (!out.empty()) {
    opt.source = std::filesystem::path(in).filename().string();
    const std::string page = trace::render_page(data, summary, opt);
    write_page(out, page);
    std::fprintf(stderr, "trace-view: %zu steps, %zu requests -> %s (%zu bytes)", data.steps.size(),
                 data.requests.size(), out.c_str(), page.size());
    if (data.warmup_steps || data.warmup_requests)
      std::fprintf(stderr, "; warm-up left out: %lld steps, %lld requests (--include-warmup keeps them)",
                   static_cast<long long>(data.warmup_steps), static_cast<long long>(data.warmup_requests));
    std::fprintf(stderr, "\n");
  }
  if (json) std::cout << trace::to_json(summary).dump(1) << std::endl;
  return 0;
}

}  // namespace
NANOVLLM_COMMAND("trace-view", "HTML page of a --trace file (steps, KV blocks, requests, summary)",
                 run_trace_view);
}  // namespace nanovllm::cli
