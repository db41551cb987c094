#include "trace/trace_charts.h"

#include <algorithm>
#include <cmath>

namespace nanovllm::trace {

namespace {

constexpr double kBandHeight = 62, kBandGap = 20, kTop = 40, kAxis = 28;

// Counter samples hold their value until the next sample (the last one until the trace ends).
template <class Sample, class Get>
void add_held(ColumnMax& cols, const std::vector<Sample>& samples, double t_end, Get get) {
  for (size_t i = 0; i < samples.size(); ++i) {
    const double b = samples[i].ts, e = i + 1 < samples.size() ? samples[i + 1].ts : t_end;
    cols.add(b, std::max(b, e), double(get(samples[i])));
  }
}

}  // namespace

TimeScale ChartLayout::scale(const TraceData& d) const {
  TimeScale s;
  s.t0 = d.t_begin;
  s.t1 = d.t_end > d.t_begin ? d.t_end : d.t_begin + 1;
  s.x0 = left;
  s.width = width - left - right;
  return s;
}

std::string steps_chart(const TraceData& d, const ChartLayout& L) {
  const TimeScale sc = L.scale(d);
  struct Band {
    const char* label;
    const char* cls;
    const char* what;
    double (*get)(const StepRecord&);
  };
  const Band bands[] = {
      {"batch size (sequences)", "b-batch", "sequences",
       [](const StepRecord& s) { return double(s.num_seqs); }},
      {"prefill tokens / step", "b-prefill", "prefill tokens",
       [](const StepRecord& s) { return double(s.prefill_tokens); }},
      {"decode tokens / step", "b-decode", "decode tokens",
       [](const StepRecord& s) { return double(s.decode_tokens); }},
      {"step time (ms)", "b-dur", "ms", [](const StepRecord& s) { return s.dur / 1e3; }},
  };
  const int n = int(std::size(bands));
  const int height = int(kTop + n * (kBandHeight + kBandGap) + kAxis);
  SvgBuilder svg(L.width, height, "steps");
  svg.legend(L.left, 16,
             {{"b-prefill", "prefill"},
              {"b-decode", "decode"},
              {"b-batch", "sequences"},
              {"b-dur", "step time"}});
  svg.text(L.width - L.right, 16,
           std::to_string(d.steps.size()) + " steps; bars: the largest value per 2-px column",
           "note", "end");
  for (int i = 0; i < n; ++i) {
    ColumnMax cols(sc, L.columns());
    for (const StepRecord& s : d.steps) cols.add(s.ts, s.end(), bands[i].get(s));
    const double top = kTop + i * (kBandHeight + kBandGap), vmax = std::max(cols.max(), 1.0);
    svg.bars(cols, top, kBandHeight, vmax, bands[i].cls, bands[i].what);
    svg.band_frame(sc, top, kBandHeight, vmax, bands[i].label);
  }
  svg.time_axis(sc, height - kAxis + 2, kTop);
  return svg.finish();
}

std::string kv_chart(const TraceData& d, const ChartLayout& L) {
  const TimeScale sc = L.scale(d);
  const double kv_h = 2 * kBandHeight, q_top = kTop + kv_h + kBandGap + 8;
  const int height = int(q_top + kBandHeight + kAxis);
  SvgBuilder svg(L.width, height, "kv");
  svg.legend(L.left, 16,
             {{"b-used", "KV blocks used"},
              {"k-cached", "prefix-cached blocks"},
              {"k-total", "total blocks"},
              {"k-preempt", "preemption"},
              {"k-waiting", "waiting"},
              {"k-running", "running"}});
  const int total = d.config.is_object() ? d.config.value("num_kvcache_blocks", 0) : 0;

  ColumnMax used(sc, L.columns()), cached(sc, L.columns());
  add_held(used, d.kv, sc.t1, [](const KvSample& k) { return k.used; });
  add_held(cached, d.kv, sc.t1, [](const KvSample& k) { return k.cached; });
  // Scale to the cache size unless the run used little of it (then the total is only named).
  const double peak = std::max({used.max(), cached.max(), 1.0});
  const bool total_on_scale = total > 0 && total <= 4 * peak;
  const double vmax = total_on_scale ? double(total) : std::ceil(peak * 1.1);
  svg.bars(used, kTop, kv_h, vmax, "b-used", "KV blocks used");
  svg.step_line(cached, kTop, kv_h, vmax, "l-cached");
  if (total_on_scale) {
    svg.line(sc.x0, kTop, sc.x0 + sc.width, kTop, "l-total");
  } else if (total > 0) {
    svg.text(L.width - L.right, kTop - 5,
             "total " + std::to_string(total) + " blocks (above the scale)", "note", "end");
  }
  for (double t : d.preemption_times) {
    const double x = sc.x(t);
    svg.rect(x - 0.75, kTop, 1.5, 10, "k-preempt", "preemption at " + format_ms(t / 1e3));
  }
  svg.band_frame(sc, kTop, kv_h, vmax, "KV blocks");

  ColumnMax waiting(sc, L.columns()), running(sc, L.columns());
  add_held(waiting, d.queues, sc.t1, [](const QueueSample& q) { return q.waiting; });
  add_held(running, d.queues, sc.t1, [](const QueueSample& q) { return q.running; });
  const double qmax = std::max({waiting.max(), running.max(), 1.0});
  svg.step_line(waiting, q_top, kBandHeight, qmax, "l-waiting");
  svg.step_line(running, q_top, kBandHeight, qmax, "l-running");
  svg.band_frame(sc, q_top, kBandHeight, qmax, "queue lengths (sequences)");
  svg.time_axis(sc, height - kAxis + 2, kTop);
  return svg.finish();
}

std::string gantt_chart(const TraceData& d, const ChartLayout& L, int max_rows, std::string& note) {
  const TimeScale sc = L.scale(d);
  const size_t total = d.requests.size();
  std::vector<const RequestRecord*> rows;
  if (total <= size_t(max_rows)) {
    for (const RequestRecord& r : d.requests) rows.push_back(&r);
  } else {  // evenly spaced by id order, first and last included
    for (int i = 0; i < max_rows; ++i)
      rows.push_back(
          &d.requests[size_t(std::llround(double(i) * double(total - 1) / double(max_rows - 1)))]);
    note = "showing " + std::to_string(max_rows) + " of " + std::to_string(total) +
           " requests (evenly spaced by id)";
  }
  const double row_h =
      std::clamp(std::floor(560.0 / double(std::max<size_t>(rows.size(), 1))), 2.0, 14.0);
  const int height = int(kTop + row_h * double(rows.size()) + 8 + kAxis);
  SvgBuilder svg(L.width, height, "requests");
  svg.legend(L.left, 16,
             {{"g-queued", "queued"},
              {"g-prefill", "prefill"},
              {"g-decode", "decode"},
              {"g-preempted", "preempted (waiting again)"}});
  if (!note.empty()) svg.text(L.width - L.right, 16, note, "note", "end");
  for (size_t i = 0; i < rows.size(); ++i) {
    const RequestRecord& r = *rows[i];
    const double y = kTop + row_h * double(i), h = std::max(row_h - (row_h >= 6 ? 2 : 0.5), 1.0);
    if (row_h >= 9)
      svg.text(L.left - 6, y + row_h - 3, "#" + std::to_string(r.id), "lbl small", "end");
    std::string about = "request " + std::to_string(r.id) + ": " + std::to_string(r.prompt_tokens) +
                        " prompt tokens, " + std::to_string(r.token_times.size()) + " generated";
    if (r.arrival >= 0 && !r.token_times.empty())
      about += ", TTFT " + format_ms((r.token_times.front() - r.arrival) / 1e3);
    if (!r.finish_reason.empty()) about += ", " + r.finish_reason;
    for (const PhaseSpan& p : r.spans) {
      const double e = p.end >= 0 ? p.end : sc.t1;
      const double x0 = sc.x(p.begin), x1 = sc.x(e);
      svg.rect(x0, y, x1 - x0, h, "g-" + p.name,
               about + " | " + p.name + " " + format_ms((e - p.begin) / 1e3));
    }
  }
  svg.time_axis(sc, height - kAxis + 2, kTop);
  return svg.finish();
}

}  // namespace nanovllm::trace
