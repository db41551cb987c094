#include "trace/trace_page.h"

#include "trace/svg_plot.h"
#include "trace/trace_charts.h"

namespace nanovllm::trace {

namespace {

constexpr const char* kCss = R"css(
body{font:13px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;margin:16px 20px;color:#222;background:#fff}
h1{font-size:20px;margin:0 0 4px}h2{font-size:15px;margin:18px 0 4px}
.meta{color:#555;margin:0 0 8px}.meta b{color:#222}
table.sum{border-collapse:collapse;margin:4px 0 8px}
table.sum td,table.sum th{padding:2px 10px;border-bottom:1px solid #e4e4e4;text-align:right}
table.sum th{text-align:left;font-weight:600;color:#333}table.sum td.k{text-align:left;color:#555}
.grid4{display:flex;gap:28px;flex-wrap:wrap;align-items:flex-start}
svg{display:block;background:#fcfcfc;border:1px solid #e6e6e6}
svg .lbl{font-size:11px;fill:#444}svg .small{font-size:9px}svg .band{font-size:11px;fill:#222;font-weight:600}
svg .note{font-size:11px;fill:#777}
svg .axis{stroke:#888;stroke-width:1}svg .grid{stroke:#eee;stroke-width:1}
.b-batch{fill:#5a9e57}.b-prefill,.g-prefill{fill:#e8803a}.b-decode,.g-decode{fill:#3b78d8}.b-dur{fill:#8a6bbf}
.b-used{fill:#9cc0ef}.g-queued{fill:#c9c9c9}.g-preempted,.k-preempt{fill:#d8342c}
.k-cached{fill:#e39b2d}.k-total{fill:#555}.k-waiting{fill:#b0408f}.k-running{fill:#2f9e6e}
.l-cached{fill:none;stroke:#e39b2d;stroke-width:1.5}.l-total{stroke:#555;stroke-dasharray:5 4;stroke-width:1}
.l-waiting{fill:none;stroke:#b0408f;stroke-width:1.5}.l-running{fill:none;stroke:#2f9e6e;stroke-width:1.5}
[data-tip]:hover{opacity:.75}
#tip{position:absolute;display:none;pointer-events:none;background:#222;color:#fff;padding:4px 7px;border-radius:3px;font-size:12px;max-width:520px}
)css";

// Hover tooltips from data-tip; the charts' page boxes in <body data-layout> (left, top, width,
// height in CSS pixels) so a screenshot can be checked chart by chart.
constexpr const char* kScript = R"js(
(function () {
  var tip = document.getElementById('tip');
  document.addEventListener('mousemove', function (e) {
    var t = e.target && e.target.closest ? e.target.closest('[data-tip]') : null;
    if (!t) { tip.style.display = 'none'; return; }
    tip.textContent = t.getAttribute('data-tip');
    tip.style.display = 'block';
    tip.style.left = (e.pageX + 12) + 'px';
    tip.style.top = (e.pageY + 12) + 'px';
  });
  var boxes = {};
  document.querySelectorAll('svg[data-chart]').forEach(function (s) {
    var r = s.getBoundingClientRect();
    boxes[s.getAttribute('data-chart')] = [r.left + window.scrollX, r.top + window.scrollY, r.width, r.height].map(Math.round);
  });
  document.body.setAttribute('data-layout', JSON.stringify(boxes));
})();
)js";

void row(std::string& h, const std::string& k, const std::string& v) {
  h += "<tr><td class=\"k\">" + html_escape(k) + "</td><td>" + html_escape(v) + "</td></tr>\n";
}

std::string count(int64_t v) { return std::to_string(v); }

std::string latency_table(const TraceSummary& s) {
  std::string h =
      "<table class=\"sum\"><tr><th>latency</th><th>n</th><th>mean</th><th>p50</th><th>p90</th>"
      "<th>p99</th><th>max</th></tr>\n";
  auto line = [&](const char* name, const Distribution& d) {
    h += std::string("<tr><td class=\"k\">") + name + "</td><td>" + count(d.count) + "</td>";
    for (double v : {d.mean, d.p50, d.p90, d.p99, d.max}) h += "<td>" + format_ms(v) + "</td>";
    h += "</tr>\n";
  };
  line("time to first token", s.ttft_ms);
  line("inter-token latency", s.itl_ms);
  line("end to end", s.e2e_ms);
  line("queue wait", s.queue_ms);
  return h + "</table>\n";
}

std::string summary_tables(const TraceSummary& s) {
  std::string h = "<div class=\"grid4\"><table class=\"sum\">\n";
  row(h, "requests",
      count(s.requests) +
          (s.unfinished_requests ? " (" + count(s.unfinished_requests) + " unfinished)" : ""));
  std::string reasons;
  for (const auto& [r, n] : s.finish_reasons)
    reasons += (reasons.empty() ? "" : ", ") + r + " " + count(n);
  row(h, "finish reasons", reasons.empty() ? "–" : reasons);
  row(h, "steps (prefill / decode / mixed)",
      count(s.steps) + " (" + count(s.prefill_steps) + " / " + count(s.decode_steps) + " / " +
          count(s.mixed_steps) + ")");
  row(h, "wall time of the steps",
      format_ms(s.span_seconds * 1e3) + " (busy " + format_ms(s.busy_seconds * 1e3) + ")");
  row(h, "batch size (mean / max)",
      fixed(s.mean_batch_size, 1) + " / " + std::to_string(s.max_batch_size));
  h += "</table><table class=\"sum\">\n";
  row(h, "output tokens",
      count(s.output_tokens) + " (" + fixed(s.output_tokens_per_s, 1) + " tok/s)");
  row(h, "prefill + decode tokens",
      count(s.prefill_tokens) + " + " + count(s.decode_tokens) + " (" +
          fixed(s.total_tokens_per_s, 1) + " tok/s)");
  row(h, "prompt tokens", count(s.prompt_tokens));
  row(h, "preemptions", count(s.preemptions));
  row(h, "prefix-cache hit rate",
      fixed(100 * s.prefix_hit_rate, 1) + "% (" + count(s.prefix_hit_tokens) + " of " +
          count(s.prefix_query_tokens) + " tokens)");
  row(h, "peak KV blocks",
      std::to_string(s.peak_kv_blocks) + " of " + std::to_string(s.num_kv_blocks));
  h += "</table><table class=\"sum\">\n";
  static constexpr const char* kSplit[] = {"schedule", "prepare", "forward", "sample",
                                           "postprocess"};
  for (int i = 0; i < 5; ++i) {
    const double pct = 100 * s.split_share[i];
    row(h, std::string("step time: ") + kSplit[i], fixed(pct, pct < 1 ? 2 : 1) + "%");
  }
  row(h, "tracer's own time",
      s.tracer_overhead_pct >= 0 ? fixed(s.tracer_overhead_pct, 2) + "% of step time" : "–");
  h += "</table></div>\n";
  return h + latency_table(s);
}

std::string meta_line(const TraceData& d, const PageOptions& opt) {
  std::string m = "<p class=\"meta\">";
  if (!opt.source.empty()) m += "<b>" + html_escape(opt.source) + "</b>";
  if (d.config.is_object()) {
    auto get = [&](const char* k) {
      auto it = d.config.find(k);
      if (it == d.config.end()) return std::string("?");
      return it->is_string() ? it->get<std::string>() : it->dump();
    };
    m += " · model " + html_escape(get("model")) + " · " + html_escape(get("device")) +
         " · policy " + html_escape(get("policy")) + " · " + get("num_kvcache_blocks") +
         " KV blocks of " + get("block_size") + " tokens · max_num_seqs " + get("max_num_seqs") +
         " · max_num_batched_tokens " + get("max_num_batched_tokens") + " · prefix caching " +
         get("enable_prefix_caching");
  }
  if (d.truncated) m += " · <b>the file was cut short (the process did not close it)</b>";
  return m + "</p>\n";
}

}  // namespace

std::string_view page_css() { return kCss; }
std::string_view page_script() { return kScript; }

std::string render_page(const TraceData& d, const TraceSummary& s, const PageOptions& opt) {
  ChartLayout L;
  std::string gantt_note;
  std::string h = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>" +
                  html_escape(opt.title) + "</title>\n<style>" + kCss + "</style></head>\n<body>\n";
  h += "<h1>" + html_escape(opt.title) + "</h1>\n" + meta_line(d, opt);
  h += "<h2>Summary</h2>\n" + summary_tables(s);
  h += "<h2>Steps</h2>\n" + steps_chart(d, L);
  h += "<h2>KV cache and queues</h2>\n" + kv_chart(d, L);
  const std::string gantt = gantt_chart(d, L, opt.max_gantt_rows, gantt_note);
  h += "<h2>Requests</h2>\n" + gantt;
  h += "<div id=\"tip\"></div>\n<script>" + std::string(kScript) + "</script>\n</body></html>\n";
  return h;
}

}  // namespace nanovllm::trace
