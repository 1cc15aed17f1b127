#include "svg_chart.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace topoaware::cli {
namespace {

constexpr double kWidth = 960, kHeight = 540;
constexpr double kLeft = 80, kRight = 200, kTop = 50, kBottom = 60;  // margins: legend right
constexpr std::size_t kMaxPoints = 800;
const char* const kColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                "#9467bd", "#8c564b", "#e377c2", "#17becf"};
// Dashes as well as colours: series that coincide (placers that chose alike) stay visible.
const char* const kDashes[] = {"", "9 5", "3 4", "14 4 3 4"};

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string num(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", x);
  return buf;
}

// A tick label: short, without trailing zeros.
std::string label(double x) {
  char buf[32];
  if (x == std::round(x) && std::fabs(x) < 1e6) {
    std::snprintf(buf, sizeof buf, "%.0f", x);
  } else if (std::fabs(x) >= 1e5 || std::fabs(x) < 1e-2) {
    std::snprintf(buf, sizeof buf, "%.0e", x);
  } else {
    std::snprintf(buf, sizeof buf, "%.3g", x);
  }
  return buf;
}

// About five round ticks covering [lo, hi].
std::vector<double> linear_ticks(double lo, double hi) {
  const double span = hi - lo;
  if (!(span > 0)) return {lo};
  const double raw = span / 5;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (raw <= m * mag) {
      step = m * mag;
      break;
    }
  }
  std::vector<double> out;
  for (double t = std::ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) {
    out.push_back(std::fabs(t) < step * 1e-9 ? 0 : t);
  }
  return out;
}

std::vector<std::pair<double, double>> thinned(const std::vector<std::pair<double, double>>& p) {
  if (p.size() <= kMaxPoints) return p;
  std::vector<std::pair<double, double>> out;
  out.reserve(kMaxPoints);
  for (std::size_t k = 0; k + 1 < kMaxPoints; ++k) {
    out.push_back(p[k * (p.size() - 1) / (kMaxPoints - 1)]);
  }
  out.push_back(p.back());
  return out;
}

}  // namespace

std::vector<std::pair<double, double>> cdf_points(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  std::vector<std::pair<double, double>> out;
  const double n = static_cast<double>(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i + 1 < values.size() && values[i + 1] == values[i]) continue;
    out.emplace_back(values[i], static_cast<double>(i + 1) / n);
  }
  return out;
}

std::string svg_chart(const Chart& c) {
  // Ranges: given, or from the points (on a log axis, from the positive x only).
  double xlo = c.x_lo, xhi = c.x_hi, ylo = c.y_lo, yhi = c.y_hi;
  if (!(xlo < xhi) || !(ylo < yhi)) {
    bool any_x = false, any_y = false;
    double ax = 0, bx = 0, ay = 0, by = 0;
    for (const ChartSeries& s : c.series) {
      for (const auto& [x, y] : s.points) {
        if (!c.log_x || x > 0) {
          ax = any_x ? std::min(ax, x) : x;
          bx = any_x ? std::max(bx, x) : x;
          any_x = true;
        }
        ay = any_y ? std::min(ay, y) : y;
        by = any_y ? std::max(by, y) : y;
        any_y = true;
      }
    }
    if (!(xlo < xhi)) {
      xlo = any_x ? ax : (c.log_x ? 1 : 0);
      xhi = any_x ? bx : xlo + 1;
      if (!(xlo < xhi)) xhi = c.log_x ? xlo * 10 : xlo + 1;
    }
    if (!(ylo < yhi)) {
      ylo = any_y ? std::min(0.0, ay) : 0;
      yhi = any_y ? by : 1;
      if (!(ylo < yhi)) yhi = ylo + 1;
    }
  }
  if (c.log_x) {
    xlo = std::pow(10.0, std::floor(std::log10(xlo)));
    xhi = std::pow(10.0, std::ceil(std::log10(xhi)));
    if (!(xlo < xhi)) xhi = xlo * 10;
  }
  const double pw = kWidth - kLeft - kRight, ph = kHeight - kTop - kBottom;
  const double llo = c.log_x ? std::log10(xlo) : 0, lhi = c.log_x ? std::log10(xhi) : 1;
  auto fx = [&](double x) {
    const double lx = x > 0 ? std::log10(x) : llo;
    const double u = c.log_x ? (lx - llo) / (lhi - llo) : (x - xlo) / (xhi - xlo);
    return kLeft + std::clamp(u, 0.0, 1.0) * pw;
  };
  auto fy = [&](double y) {
    return kTop + (1 - std::clamp((y - ylo) / (yhi - ylo), 0.0, 1.0)) * ph;
  };

  std::ostringstream out;
  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\"" << kHeight
      << "\" viewBox=\"0 0 " << kWidth << ' ' << kHeight
      << "\" font-family=\"sans-serif\" font-size=\"13\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << "<text x=\"" << num(kWidth / 2) << "\" y=\"28\" text-anchor=\"middle\" font-size=\"16\">"
      << escape(c.title) << "</text>\n";
  // Grid and ticks.
  std::vector<double> xt;
  if (c.log_x) {
    for (double t = xlo; t <= xhi * 1.0001; t *= 10) xt.push_back(t);
  } else {
    xt = linear_ticks(xlo, xhi);
  }
  for (double t : xt) {
    out << "<line x1=\"" << num(fx(t)) << "\" y1=\"" << num(kTop) << "\" x2=\"" << num(fx(t))
        << "\" y2=\"" << num(kTop + ph) << "\" stroke=\"#e0e0e0\"/>\n"
        << "<text x=\"" << num(fx(t)) << "\" y=\"" << num(kTop + ph + 18)
        << "\" text-anchor=\"middle\">" << escape(label(t)) << "</text>\n";
  }
  for (double t : linear_ticks(ylo, yhi)) {
    out << "<line x1=\"" << num(kLeft) << "\" y1=\"" << num(fy(t)) << "\" x2=\"" << num(kLeft + pw)
        << "\" y2=\"" << num(fy(t)) << "\" stroke=\"#e0e0e0\"/>\n"
        << "<text x=\"" << num(kLeft - 8) << "\" y=\"" << num(fy(t) + 4)
        << "\" text-anchor=\"end\">" << escape(label(t)) << "</text>\n";
  }
  out << "<rect x=\"" << num(kLeft) << "\" y=\"" << num(kTop) << "\" width=\"" << num(pw)
      << "\" height=\"" << num(ph) << "\" fill=\"none\" stroke=\"black\"/>\n"
      << "<text x=\"" << num(kLeft + pw / 2) << "\" y=\"" << num(kHeight - 15)
      << "\" text-anchor=\"middle\">" << escape(c.x_label) << "</text>\n"
      << "<text transform=\"translate(20," << num(kTop + ph / 2)
      << ") rotate(-90)\" text-anchor=\"middle\">" << escape(c.y_label) << "</text>\n";
  // Series and legend.
  for (std::size_t i = 0; i < c.series.size(); ++i) {
    const ChartSeries& s = c.series[i];
    const char* colour = kColours[i % (sizeof kColours / sizeof kColours[0])];
    const std::string dash = kDashes[i % (sizeof kDashes / sizeof kDashes[0])];
    const std::string dash_attr = dash.empty() ? "" : " stroke-dasharray=\"" + dash + "\"";
    out << "<polyline class=\"series\" data-name=\"" << escape(s.name)
        << "\" fill=\"none\" stroke=\"" << colour << "\" stroke-width=\"2\"" << dash_attr
        << " points=\"";
    const auto pts = thinned(s.points);
    for (std::size_t k = 0; k < pts.size(); ++k) {
      if (c.steps && k > 0) {
        out << num(fx(pts[k].first)) << ',' << num(fy(pts[k - 1].second)) << ' ';
      }
      out << num(fx(pts[k].first)) << ',' << num(fy(pts[k].second)) << ' ';
    }
    out << "\"/>\n";
    const double ly = kTop + 10 + 22 * static_cast<double>(i);
    out << "<line x1=\"" << num(kLeft + pw + 15) << "\" y1=\"" << num(ly) << "\" x2=\""
        << num(kLeft + pw + 45) << "\" y2=\"" << num(ly) << "\" stroke=\"" << colour
        << "\" stroke-width=\"3\"" << dash_attr << "/>\n"
        << "<text x=\"" << num(kLeft + pw + 52) << "\" y=\"" << num(ly + 4) << "\">"
        << escape(s.name) << "</text>\n";
  }
  out << "</svg>\n";
  return out.str();
}

}  // namespace topoaware::cli
