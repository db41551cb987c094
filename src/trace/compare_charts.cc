#include "trace/compare_charts.h"

#include <algorithm>
#include <cmath>

#include "trace/svg_plot.h"

namespace nanovllm::trace {

namespace {

constexpr double kTop = 40, kBand = 150, kAxis = 28;

double duration(const TraceData& d) { return std::max(d.t_end - d.t_begin, 0.0); }

// Time since each run's start, over the longer of the two runs.
TimeScale relative_scale(const TraceData& a, const TraceData& b, const ChartLayout& L) {
  TimeScale s;
  s.t0 = 0;
  s.t1 = std::max({duration(a), duration(b), 1.0});
  s.x0 = L.left;
  s.width = L.width - L.left - L.right;
  return s;
}

// A counter held from each sample to the next (the last one to the run's end), shifted to the
// run's start.
template <class Sample, class Get>
ColumnMax held(const TraceData& d, const std::vector<Sample>& samples, const TimeScale& sc,
               int columns, Get get) {
  ColumnMax cols(sc, columns);
  for (size_t i = 0; i < samples.size(); ++i) {
    const double b = samples[i].ts - d.t_begin;
    const double e = (i + 1 < samples.size() ? samples[i + 1].ts : d.t_end) - d.t_begin;
    cols.add(b, std::max(b, e), double(get(samples[i])));
  }
  return cols;
}

// Output tokens generated so far: a step per sampled token, held to the run's end. Its slope
// is the throughput, without the noise of counting tokens per interval on a short run.
ColumnMax tokens_so_far(const TraceData& d, const TimeScale& sc, int columns) {
  ColumnMax cols(sc, columns);
  std::vector<double> t;
  for (const RequestRecord& r : d.requests) t.insert(t.end(), r.token_times.begin(), r.token_times.end());
  std::sort(t.begin(), t.end());
  for (size_t i = 0; i < t.size(); ++i) {
    const double b = t[i] - d.t_begin, e = (i + 1 < t.size() ? t[i + 1] : d.t_end) - d.t_begin;
    cols.add(b, std::max(b, e), double(i + 1));
  }
  return cols;
}

std::vector<std::pair<std::string, std::string>> run_legend(const char* a_what, const char* b_what) {
  return {{"fa", std::string("A ") + a_what}, {"fb", std::string("B ") + b_what}};
}

}  // namespace

std::string throughput_chart(const TraceData& a, const TraceData& b, const ChartLayout& L) {
  const TimeScale sc = relative_scale(a, b, L);
  const int height = int(kTop + kBand + kAxis);
  SvgBuilder svg(L.width, height, "throughput");
  svg.legend(L.left, 16, run_legend("output tokens", "output tokens"));
  const ColumnMax ra = tokens_so_far(a, sc, L.columns()), rb = tokens_so_far(b, sc, L.columns());
  const double vmax = std::max({ra.max(), rb.max(), 1.0}) * 1.05;
  svg.step_line(ra, kTop, kBand, vmax, "ca");
  svg.step_line(rb, kTop, kBand, vmax, "cb");
  if (ra.max() == 0 && rb.max() == 0)
    svg.text(L.width - L.right, 16, "no step events (client-side traces)", "note", "end");
  else
    svg.text(L.width - L.right, 16, "time since each run's start", "note", "end");
  svg.band_frame(sc, kTop, kBand, vmax, "output tokens so far (the slope is the throughput)");
  svg.time_axis(sc, height - kAxis + 2, kTop);
  return svg.finish();
}

std::string queues_chart(const TraceData& a, const TraceData& b, const ChartLayout& L) {
  const TimeScale sc = relative_scale(a, b, L);
  const int height = int(kTop + kBand + kAxis);
  SvgBuilder svg(L.width, height, "queues");
  svg.legend(L.left, 16,
             {{"fa", "A running"}, {"fa2", "A waiting (dashed)"}, {"fb", "B running"},
              {"fb2", "B waiting (dashed)"}});
  auto waiting = [](const QueueSample& q) { return q.waiting; };
  auto running = [](const QueueSample& q) { return q.running; };
  const ColumnMax wa = held(a, a.queues, sc, L.columns(), waiting);
  const ColumnMax ra = held(a, a.queues, sc, L.columns(), running);
  const ColumnMax wb = held(b, b.queues, sc, L.columns(), waiting);
  const ColumnMax rb = held(b, b.queues, sc, L.columns(), running);
  const double vmax = std::max({wa.max(), ra.max(), wb.max(), rb.max(), 1.0});
  svg.step_line(ra, kTop, kBand, vmax, "ca");
  svg.step_line(wa, kTop, kBand, vmax, "ca2");
  svg.step_line(rb, kTop, kBand, vmax, "cb");
  svg.step_line(wb, kTop, kBand, vmax, "cb2");
  svg.band_frame(sc, kTop, kBand, vmax, "sequences");
  svg.time_axis(sc, height - kAxis + 2, kTop);
  return svg.finish();
}

std::string kv_compare_chart(const TraceData& a, const TraceData& b, const ChartLayout& L) {
  const TimeScale sc = relative_scale(a, b, L);
  const int height = int(kTop + kBand + 14 + kAxis);
  SvgBuilder svg(L.width, height, "kv");
  svg.legend(L.left, 16,
             {{"fa", "A KV blocks used"}, {"fb", "B KV blocks used"}, {"pa", "A preemption"},
              {"pb", "B preemption"}});
  auto used = [](const KvSample& k) { return k.used; };
  const ColumnMax ua = held(a, a.kv, sc, L.columns(), used), ub = held(b, b.kv, sc, L.columns(), used);
  auto total = [](const TraceData& d) {
    return d.config.is_object() ? d.config.value("num_kvcache_blocks", 0) : 0;
  };
  const double vmax = std::max({ua.max(), ub.max(), 1.0}) * 1.1;
  svg.step_line(ua, kTop, kBand, vmax, "ca");
  svg.step_line(ub, kTop, kBand, vmax, "cb");
  svg.text(L.width - L.right, 16,
           "total blocks: A " + std::to_string(total(a)) + ", B " + std::to_string(total(b)), "note",
           "end");
  auto ticks = [&](const TraceData& d, double y, const char* cls, const char* run) {
    for (double t : d.preemption_times)
      svg.rect(sc.x(t - d.t_begin) - 0.75, y, 1.5, 10, cls,
               std::string(run) + " preemption at " + format_ms((t - d.t_begin) / 1e3));
  };
  ticks(a, kTop, "pa", "A");
  ticks(b, kTop + kBand + 2, "pb", "B");
  svg.band_frame(sc, kTop, kBand, vmax, "KV blocks used");
  svg.time_axis(sc, height - kAxis + 2, kTop);
  return svg.finish();
}

std::string cdf_chart(const std::string& name, const std::string& title, std::vector<double> a,
                      std::vector<double> b, int width) {
  const double left = 44, right = 12, top = 30, plot_h = 150, axis = 30;
  const int height = int(top + plot_h + axis);
  SvgBuilder svg(width, height, name);
  svg.text(left, 16, title, "band");
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  const double xmax = std::max({a.empty() ? 0.0 : a.back(), b.empty() ? 0.0 : b.back(), 1e-3});
  const double plot_w = width - left - right;
  auto x = [&](double v) { return left + v / xmax * plot_w; };
  auto y = [&](double q) { return top + plot_h - q * plot_h; };
  // A step function through (value, fraction <= value); at most one point per pixel column.
  auto curve = [&](const std::vector<double>& v, const char* cls) {
    if (v.empty()) return;
    std::vector<std::pair<double, double>> pts{{x(0), y(0)}};
    for (size_t i = 0; i < v.size(); ++i) {
      const double px = x(v[i]), py = y(double(i + 1) / double(v.size()));
      if (pts.size() >= 2 && std::fabs(pts.back().first - px) < 1.0) {
        pts.back().second = py;  // same pixel: the higher fraction wins
        continue;
      }
      pts.emplace_back(px, pts.back().second);
      pts.emplace_back(px, py);
    }
    svg.polyline(pts, cls);
  };
  for (double q : {0.0, 0.5, 0.9, 1.0}) {
    svg.line(left, y(q), left + plot_w, y(q), "grid");
    svg.text(left - 4, y(q) + 4, fixed(q, q == 0.9 ? 1 : q == 0.5 ? 1 : 0), "lbl", "end");
  }
  for (int i = 0; i <= 4; ++i) {
    const double v = xmax * i / 4;
    svg.line(x(v), top + plot_h, x(v), top + plot_h + 4, "axis");
    svg.text(x(v), top + plot_h + 16, format_ms(v), "lbl small", i == 0 ? "start" : i == 4 ? "end" : "middle");
  }
  svg.line(left, top + plot_h, left + plot_w, top + plot_h, "axis");
  svg.line(left, top, left, top + plot_h, "axis");
  curve(a, "ca");
  curve(b, "cb");
  if (a.empty() && b.empty()) svg.text(left + 8, top + 20, "no samples", "note");
  svg.text(width - right, 16, "n = " + std::to_string(a.size()) + " / " + std::to_string(b.size()),
           "note", "end");
  return svg.finish();
}

}  // namespace nanovllm::trace
