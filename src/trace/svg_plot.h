// Small SVG plotting pieces for `trace-view`: a time scale, pixel-column downsampling, and an
// SVG text builder with axes. Colours and strokes come from CSS classes defined by the page.
//
// Downsampling: a series (steps, counter samples) is reduced to at most one value per pixel
// column, the maximum of everything overlapping the column, so a chart never has more elements
// than pixels across however many steps the trace holds, and short spikes stay visible.
#pragma once
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace nanovllm::trace {

struct TimeScale {
  double t0 = 0, t1 = 1;     // microseconds
  double x0 = 0, width = 1;  // pixels
  double x(double t) const { return x0 + (t - t0) / (t1 - t0) * width; }
};

// Max per pixel column of values held over time intervals; NaN where nothing overlaps.
class ColumnMax {
 public:
  ColumnMax(const TimeScale& scale, int columns);
  void add(double t_begin, double t_end, double value);
  int columns() const { return int(values_.size()); }
  double value(int c) const { return values_[size_t(c)]; }
  double max() const;  // over all columns; 0 when empty
  double column_x(int c) const { return scale_.x0 + scale_.width * c / double(columns()); }
  double column_width() const { return scale_.width / double(columns()); }
  double column_time(int c) const;  // start of column c, microseconds

 private:
  TimeScale scale_;
  std::vector<double> values_;
};

std::string html_escape(std::string_view s);
std::string fixed(double v, int decimals);
// "12.3 ms" / "4.56 s" for a duration in milliseconds.
std::string format_ms(double ms);

class SvgBuilder {
 public:
  SvgBuilder(int width, int height, std::string_view chart_name);
  int width() const { return width_; }
  int height() const { return height_; }

  // `tip`: shown by the page's tooltip on hover (data-tip); empty for none.
  void rect(double x, double y, double w, double h, std::string_view cls,
            std::string_view tip = {});
  void line(double x1, double y1, double x2, double y2, std::string_view cls);
  void text(double x, double y, std::string_view s, std::string_view cls = "lbl",
            std::string_view anchor = "start");
  void polyline(const std::vector<std::pair<double, double>>& points, std::string_view cls);
  // Ticks and labels along y = `y` for the visible time range (unit: ms or s, by range).
  void time_axis(const TimeScale& scale, double y, double grid_top);
  // A band's frame: left label, max value, baseline.
  void band_frame(const TimeScale& scale, double top, double height, double vmax,
                  std::string_view label);
  // Bars from column maxima (adjacent equal columns merged into one rect) in a band.
  void bars(const ColumnMax& cols, double top, double height, double vmax, std::string_view cls,
            std::string_view what);
  // A step line through column maxima (empty columns keep the previous value).
  void step_line(const ColumnMax& cols, double top, double height, double vmax,
                 std::string_view cls);
  // Legend entries (class, label) in a row starting at (x, y).
  void legend(double x, double y, const std::vector<std::pair<std::string, std::string>>& items);
  std::string finish();

 private:
  int width_, height_;
  std::string out_;
};

}  // namespace nanovllm::trace
