// Line charts as standalone SVG text, for the pictures `topo-aware simulate --svg` writes: one
// polyline per series, axes with ticks, a legend. No I/O; the caller writes the text.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace topoaware::cli {

struct ChartSeries {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y), in drawing order
};

struct Chart {
  std::string title;
  std::string x_label, y_label;
  bool log_x = false;  // x on a log10 scale; points with x <= 0 are drawn at the axis' left end
  bool steps = false;  // draw each series as a step function (y holds until the next x)
  // Axis ranges; where lo == hi the range is taken from the points.
  double x_lo = 0, x_hi = 0, y_lo = 0, y_hi = 0;
  std::vector<ChartSeries> series;
};

// The chart as an SVG document (960 x 540). A series of more than 800 points (more than the
// plot is pixels wide) is thinned to 800 evenly spaced ones, keeping its first and last point;
// names and labels are XML-escaped.
std::string svg_chart(const Chart& chart);

// The empirical CDF of `values`: (value, share of values <= it), sorted, one point per distinct
// value.
std::vector<std::pair<double, double>> cdf_points(std::vector<double> values);

}  // namespace topoaware::cli
