#include "trace/compare_page.h"

#include <cmath>
#include <set>

#include "trace/compare_charts.h"
#include "trace/svg_plot.h"
#include "trace/trace_page.h"

namespace nanovllm::trace {

namespace {

// Run colours (A blue, B orange) on top of the trace page's stylesheet.
constexpr const char* kCompareCss = R"css(
.ca{fill:none;stroke:#3b78d8;stroke-width:1.8}.cb{fill:none;stroke:#e8803a;stroke-width:1.8}
.ca2{fill:none;stroke:#3b78d8;stroke-width:1.4;stroke-dasharray:5 3}.cb2{fill:none;stroke:#e8803a;stroke-width:1.4;stroke-dasharray:5 3}
.fa,.pa,.fa2{fill:#3b78d8}.fb,.pb,.fb2{fill:#e8803a}
.cdfs{display:flex;gap:14px;flex-wrap:wrap}
table.sum td.better{color:#1a7f37}table.sum td.worse{color:#b42318}table.sum tr.diff td{background:#fff4e0}
table.out td{text-align:left;max-width:360px;overflow:hidden;text-overflow:ellipsis;white-space:nowrap;font-family:ui-monospace,monospace;font-size:12px}
.runa{color:#3b78d8;font-weight:600}.runb{color:#e8803a;font-weight:600}
)css";

std::string cell(const std::string& v, const char* cls = nullptr) {
  return std::string("<td") + (cls ? std::string(" class=\"") + cls + "\"" : "") + ">" +
         html_escape(v) + "</td>";
}

std::string config_value(const nlohmann::json& cfg, const std::string& k) {
  if (!cfg.is_object() || !cfg.contains(k)) return "–";
  const auto& v = cfg[k];
  return v.is_string() ? v.get<std::string>() : v.dump();
}

std::string config_table(const Comparison& c) {
  std::set<std::string> keys;
  for (const auto* cfg : {&c.a.data.config, &c.b.data.config})
    if (cfg->is_object())
      for (const auto& [k, v] : cfg->items()) keys.insert(k);
  std::string h = "<table class=\"sum\"><tr><th>engine</th><th class=\"runa\">A</th>"
                  "<th class=\"runb\">B</th></tr>\n";
  for (const std::string& k : keys) {
    const std::string va = config_value(c.a.data.config, k), vb = config_value(c.b.data.config, k);
    h += std::string("<tr") + (va != vb ? " class=\"diff\"" : "") + "><td class=\"k\">" +
         html_escape(k) + "</td>" + cell(va) + cell(vb) + "</tr>\n";
  }
  return h + "</table>\n";
}

// One summary row: A, B and B's change (green when it is an improvement: `lower_better` says
// which way that is).
void metric(std::string& h, const std::string& name, double a, double b, int decimals,
            bool lower_better, bool is_ms = false) {
  auto show = [&](double v) { return is_ms ? format_ms(v) : fixed(v, decimals); };
  std::string change = "–";
  const char* cls = nullptr;
  if (std::isfinite(a) && std::isfinite(b) && a != 0) {
    const double pct = 100.0 * (b - a) / std::fabs(a);
    change = (pct >= 0 ? "+" : "") + fixed(pct, 1) + "%";
    if (std::fabs(pct) >= 0.5) cls = (pct < 0) == lower_better ? "better" : "worse";
  } else if (a == b) {
    change = "=";
  }
  h += "<tr><td class=\"k\">" + html_escape(name) + "</td>" + cell(show(a)) + cell(show(b)) +
       cell(change, cls) + "</tr>\n";
}

std::string summary_table(const TraceSummary& a, const TraceSummary& b) {
  std::string h = "<table class=\"sum\"><tr><th></th><th class=\"runa\">A</th>"
                  "<th class=\"runb\">B</th><th>B vs A</th></tr>\n";
  metric(h, "requests", double(a.requests), double(b.requests), 0, false);
  metric(h, "steps", double(a.steps), double(b.steps), 0, true);
  metric(h, "wall time of the steps (ms)", a.span_seconds * 1e3, b.span_seconds * 1e3, 0, true, true);
  metric(h, "output tokens", double(a.output_tokens), double(b.output_tokens), 0, false);
  metric(h, "output tokens/s", a.output_tokens_per_s, b.output_tokens_per_s, 1, false);
  metric(h, "prefill + decode tokens/s", a.total_tokens_per_s, b.total_tokens_per_s, 1, false);
  metric(h, "mean batch size", a.mean_batch_size, b.mean_batch_size, 2, false);
  metric(h, "preemptions", double(a.preemptions), double(b.preemptions), 0, true);
  metric(h, "prefix-cache hit rate (%)", 100 * a.prefix_hit_rate, 100 * b.prefix_hit_rate, 1, false);
  metric(h, "peak KV blocks", double(a.peak_kv_blocks), double(b.peak_kv_blocks), 0, true);
  const std::pair<const char*, const Distribution TraceSummary::*> dists[] = {
      {"TTFT", &TraceSummary::ttft_ms},
      {"inter-token latency", &TraceSummary::itl_ms},
      {"end to end", &TraceSummary::e2e_ms},
      {"queue wait", &TraceSummary::queue_ms}};
  for (const auto& [name, m] : dists) {
    const Distribution &da = a.*m, &db = b.*m;
    metric(h, std::string(name) + " p50", da.p50, db.p50, 2, true, true);
    metric(h, std::string(name) + " p90", da.p90, db.p90, 2, true, true);
    metric(h, std::string(name) + " p99", da.p99, db.p99, 2, true, true);
  }
  return h + "</table>\n";
}

std::string snippet(const std::string& s) {
  return s.size() > 120 ? s.substr(0, 120) + "…" : s;
}

std::string outputs_section(const OutputComparison& o, size_t max_rows) {
  if (!o.available)
    return "<p class=\"meta\">Outputs not compared: a trace holds no request records (record "
           "with <code>--trace FILE --trace-requests</code>).</p>\n";
  std::string h = "<p class=\"meta\"><b>" + std::to_string(o.equal) + "</b> equal, <b>" +
                  std::to_string(o.different) + "</b> different, " + std::to_string(o.not_compared) +
                  " not compared (sampled without a common seed, unfinished, or aborted at another point), " +
                  std::to_string(o.only_a) + " only in A, " + std::to_string(o.only_b) +
                  " only in B (completions; matched by route, prompt and parameters)</p>\n";
  h += "<table class=\"sum out\" data-table=\"outputs\"><tr><th>A id</th><th>B id</th><th>#</th>"
       "<th>status</th><th>why</th><th>tokens A / B</th><th>finish A / B</th><th>A text</th>"
       "<th>B text</th></tr>\n";
  size_t rows = 0;
  for (const OutputPair& p : o.pairs) {
    if (p.status == OutputStatus::kEqual) continue;
    if (rows++ == max_rows) {
      h += "<tr><td colspan=\"9\">… more rows: see <code>trace-view --compare --json</code></td></tr>\n";
      break;
    }
    const bool has_a = p.status != OutputStatus::kOnlyB, has_b = p.status != OutputStatus::kOnlyA;
    h += "<tr>" + cell(has_a ? std::to_string(p.a_id) : "–") + cell(has_b ? std::to_string(p.b_id) : "–") +
         cell(std::to_string(p.index)) + cell(std::string(status_name(p.status))) + cell(p.note) +
         cell(std::to_string(p.a_tokens) + " / " + std::to_string(p.b_tokens)) +
         cell(p.a_finish + " / " + p.b_finish) + cell(snippet(p.a_text)) + cell(snippet(p.b_text)) +
         "</tr>\n";
  }
  if (rows == 0) h += "<tr><td colspan=\"9\">every compared output is equal</td></tr>\n";
  return h + "</table>\n";
}

}  // namespace

std::string render_compare_page(const Comparison& c, const ComparePageOptions& opt) {
  ChartLayout L;
  const int cdf_w = (L.width - 2 * 14) / 3;
  std::string h = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>" +
                  html_escape(opt.title) + "</title>\n<style>" + std::string(page_css()) +
                  kCompareCss + "</style></head>\n<body>\n";
  h += "<h1>" + html_escape(opt.title) + "</h1>\n<p class=\"meta\"><span class=\"runa\">A</span> " +
       html_escape(c.a.source) + " · <span class=\"runb\">B</span> " + html_escape(c.b.source);
  for (const auto* r : {&c.a, &c.b})
    if (r->data.truncated)
      h += " · <b>" + html_escape(r->source) + " was cut short (the process did not close it)</b>";
  h += "</p>\n<h2>Runs</h2>\n<div class=\"grid4\">" + config_table(c) + summary_table(c.a.summary, c.b.summary) +
       "</div>\n";
  h += "<h2>Outputs</h2>\n" + outputs_section(c.outputs, opt.max_rows);
  h += "<h2>Latency distributions (CDF)</h2>\n<div class=\"cdfs\">";
  const LatencySamples la = latency_samples(c.a.data), lb = latency_samples(c.b.data);
  h += cdf_chart("ttft_cdf", "time to first token", la.ttft, lb.ttft, cdf_w);
  h += cdf_chart("itl_cdf", "inter-token latency", la.itl, lb.itl, cdf_w);
  h += cdf_chart("e2e_cdf", "end to end", la.e2e, lb.e2e, cdf_w);
  h += "</div>\n<h2>Throughput</h2>\n" + throughput_chart(c.a.data, c.b.data, L);
  h += "<h2>Queues</h2>\n" + queues_chart(c.a.data, c.b.data, L);
  h += "<h2>KV cache and preemptions</h2>\n" + kv_compare_chart(c.a.data, c.b.data, L);
  h += "<div id=\"tip\"></div>\n<script>" + std::string(page_script()) + "</script>\n</body></html>\n";
  return h;
}

}  // namespace nanovllm::trace
