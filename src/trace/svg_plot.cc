#include "trace/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace nanovllm::trace {

ColumnMax::ColumnMax(const TimeScale& scale, int columns)
    : scale_(scale),
      values_(size_t(std::max(columns, 1)), std::numeric_limits<double>::quiet_NaN()) {}

void ColumnMax::add(double t_begin, double t_end, double value) {
  const double span = scale_.t1 - scale_.t0;
  if (span <= 0) return;
  const int n = columns();
  int c0 = int(std::floor((t_begin - scale_.t0) / span * n));
  int c1 = int(std::floor((std::max(t_end, t_begin) - scale_.t0) / span * n));
  if (t_end > t_begin && c1 > c0 && (t_end - scale_.t0) / span * n == double(c1)) --c1;  // [b, e)
  c0 = std::clamp(c0, 0, n - 1);
  c1 = std::clamp(c1, 0, n - 1);
  for (int c = c0; c <= c1; ++c) {
    double& v = values_[size_t(c)];
    if (std::isnan(v) || value > v) v = value;
  }
}

double ColumnMax::max() const {
  double m = 0;
  for (double v : values_)
    if (!std::isnan(v)) m = std::max(m, v);
  return m;
}

double ColumnMax::column_time(int c) const {
  return scale_.t0 + (scale_.t1 - scale_.t0) * c / double(columns());
}

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

std::string fixed(double v, int decimals) {
  if (!std::isfinite(v)) return "–";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string format_ms(double ms) {
  if (!std::isfinite(ms)) return "–";
  if (std::fabs(ms) >= 1000) return fixed(ms / 1000, 2) + " s";
  return fixed(ms, std::fabs(ms) >= 100 ? 0 : std::fabs(ms) >= 10 ? 1 : 2) + " ms";
}

SvgBuilder::SvgBuilder(int width, int height, std::string_view chart_name)
    : width_(width), height_(height) {
  out_ = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(width) +
         "\" height=\"" + std::to_string(height) + "\" viewBox=\"0 0 " + std::to_string(width) +
         " " + std::to_string(height) + "\" data-chart=\"" + html_escape(chart_name) + "\">\n";
}

void SvgBuilder::rect(double x, double y, double w, double h, std::string_view cls,
                      std::string_view tip) {
  out_ += "<rect x=\"" + fixed(x, 2) + "\" y=\"" + fixed(y, 2) + "\" width=\"" +
          fixed(std::max(w, 0.5), 2) + "\" height=\"" + fixed(std::max(h, 0.0), 2) + "\" class=\"" +
          std::string(cls) + "\"";
  if (!tip.empty()) out_ += " data-tip=\"" + html_escape(tip) + "\"";
  out_ += "/>\n";
}

void SvgBuilder::line(double x1, double y1, double x2, double y2, std::string_view cls) {
  out_ += "<line x1=\"" + fixed(x1, 2) + "\" y1=\"" + fixed(y1, 2) + "\" x2=\"" + fixed(x2, 2) +
          "\" y2=\"" + fixed(y2, 2) + "\" class=\"" + std::string(cls) + "\"/>\n";
}

void SvgBuilder::text(double x, double y, std::string_view s, std::string_view cls,
                      std::string_view anchor) {
  out_ += "<text x=\"" + fixed(x, 1) + "\" y=\"" + fixed(y, 1) + "\" class=\"" + std::string(cls) +
          "\" text-anchor=\"" + std::string(anchor) + "\">" + html_escape(s) + "</text>\n";
}

void SvgBuilder::polyline(const std::vector<std::pair<double, double>>& pts, std::string_view cls) {
  if (pts.empty()) return;
  out_ += "<polyline class=\"" + std::string(cls) + "\" points=\"";
  for (const auto& [x, y] : pts) out_ += fixed(x, 1) + "," + fixed(y, 1) + " ";
  out_ += "\"/>\n";
}

void SvgBuilder::time_axis(const TimeScale& sc, double y, double grid_top) {
  const double range_us = sc.t1 - sc.t0;
  if (range_us <= 0) return;
  const bool seconds = range_us >= 2e6;
  const double unit = seconds ? 1e6 : 1e3;
  const double range = range_us / unit;
  // A "nice" tick step (1, 2 or 5 x 10^k) giving about 8 ticks.
  const double raw = range / 8, mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double step = raw / mag < 1.5   ? mag
                      : raw / mag < 3.5 ? 2 * mag
                      : raw / mag < 7.5 ? 5 * mag
                                        : 10 * mag;
  const int decimals = step >= 1 ? 0 : int(std::ceil(-std::log10(step)));
  line(sc.x0, y, sc.x0 + sc.width, y, "axis");
  for (double v = std::ceil(sc.t0 / unit / step) * step; v <= sc.t1 / unit + 1e-9; v += step) {
    const double x = sc.x(v * unit);
    line(x, grid_top, x, y, "grid");
    line(x, y, x, y + 4, "axis");
    text(x, y + 16, fixed(v, decimals) + (seconds ? " s" : " ms"), "lbl", "middle");
  }
}

void SvgBuilder::band_frame(const TimeScale& sc, double top, double height, double vmax,
                            std::string_view label) {
  line(sc.x0, top + height, sc.x0 + sc.width, top + height, "axis");
  line(sc.x0, top, sc.x0, top + height, "axis");
  text(sc.x0 - 6, top + 10, fixed(vmax, 0), "lbl", "end");
  text(sc.x0 - 6, top + height, "0", "lbl", "end");
  text(sc.x0 + 2, top - 5, label, "band");  // above the band: never hidden by its bars
}

void SvgBuilder::bars(const ColumnMax& cols, double top, double height, double vmax,
                      std::string_view cls, std::string_view what) {
  if (vmax <= 0) return;
  const int n = cols.columns();
  for (int c = 0; c < n;) {
    const double v = cols.value(c);
    int e = c + 1;
    while (e < n && (cols.value(e) == v || (std::isnan(v) && std::isnan(cols.value(e))))) ++e;
    if (!std::isnan(v) && v > 0) {
      const double h = v / vmax * height;
      const std::string tip = std::string(what) + " " + fixed(v, 0) + " at " +
                              format_ms(cols.column_time(c) / 1e3) + "–" +
                              format_ms(cols.column_time(e) / 1e3);
      rect(cols.column_x(c), top + height - h, cols.column_width() * (e - c), h, cls, tip);
    }
    c = e;
  }
}

void SvgBuilder::step_line(const ColumnMax& cols, double top, double height, double vmax,
                           std::string_view cls) {
  if (vmax <= 0) return;
  std::vector<std::pair<double, double>> pts;
  double prev = std::numeric_limits<double>::quiet_NaN();
  for (int c = 0; c < cols.columns(); ++c) {
    double v = cols.value(c);
    if (std::isnan(v)) v = prev;
    if (std::isnan(v)) continue;
    const double y = top + height - v / vmax * height;
    if (!pts.empty() && pts.back().second != y)
      pts.emplace_back(cols.column_x(c), pts.back().second);
    if (pts.empty() || pts.back().second != y) pts.emplace_back(cols.column_x(c), y);
    prev = v;
  }
  if (!pts.empty())
    pts.emplace_back(cols.column_x(cols.columns() - 1) + cols.column_width(), pts.back().second);
  polyline(pts, cls);
}

void SvgBuilder::legend(double x, double y,
                        const std::vector<std::pair<std::string, std::string>>& items) {
  for (const auto& [cls, label] : items) {
    rect(x, y - 9, 12, 10, cls);
    text(x + 16, y, label);
    x += 28 + 7.0 * double(label.size());
  }
}

std::string SvgBuilder::finish() {
  out_ += "</svg>\n";
  return std::move(out_);
}

}  // namespace nanovllm::trace
