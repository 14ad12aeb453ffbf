#include "svg_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace sim {
namespace {

constexpr double kWidth = 900, kHeight = 620;
constexpr double kLeft = 70, kRight = 20, kTop = 50;
constexpr double kPanel = 220, kGap = 70;
const char *const kColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"};

std::string esc(const std::string &s) {
  std::string o;
  for (char c : s) {
    if (c == '<') o += "&lt;";
    else if (c == '>') o += "&gt;";
    else if (c == '&') o += "&amp;";
    else if (c == '"') o += "&quot;";
    else o += c;
  }
  return o;
}

std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", v);
  return b;
}

std::string tick_label(double t, double step) {
  char b[32];
  std::snprintf(b, sizeof b, step >= 1 ? "%.0f" : "%.2g", t);
  return b;
}

// A "nice" tick step (1, 2 or 5 times a power of ten) for about n ticks.
double tick_step(double range, int n) {
  const double raw = range / n;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0})
    if (m * p >= raw) return m * p;
  return 10 * p;
}

struct Panel {
  double top;
  std::string y_label;
  double x_max;
  double x(double t) const { return kLeft + (kWidth - kLeft - kRight) * t / x_max; }
  double y(double share) const { return top + kPanel * (1.0 - share); }
};

void axes(std::ostringstream &o, const Panel &p) {
  const double x0 = kLeft, x1 = kWidth - kRight;
  o << "<rect x='" << x0 << "' y='" << p.top << "' width='" << x1 - x0 << "' height='" << kPanel
    << "' fill='none' stroke='#444'/>\n";
  for (int k = 0; k <= 4; ++k) {
    const double share = k / 4.0;
    const double y = p.y(share);
    o << "<line x1='" << x0 << "' y1='" << num(y) << "' x2='" << x1 << "' y2='" << num(y)
      << "' stroke='#ddd'/>\n";
    o << "<text x='" << x0 - 6 << "' y='" << num(y + 4) << "' text-anchor='end'>"
      << static_cast<int>(share * 100) << "%</text>\n";
  }
  const double step = tick_step(p.x_max, 8);
  for (double t = 0; t <= p.x_max * 1.0001; t += step) {
    const double x = p.x(t);
    o << "<line x1='" << num(x) << "' y1='" << p.top + kPanel << "' x2='" << num(x) << "' y2='"
      << p.top + kPanel + 5 << "' stroke='#444'/>\n";
    o << "<text x='" << num(x) << "' y='" << p.top + kPanel + 18 << "' text-anchor='middle'>"
      << tick_label(t, step) << "</text>\n";
  }
  o << "<text x='" << (x0 + x1) / 2 << "' y='" << p.top + kPanel + 36
    << "' text-anchor='middle'>simulated time (s)</text>\n";
  o << "<text x='" << x0 << "' y='" << p.top - 8 << "' font-weight='bold'>" << esc(p.y_label)
    << "</text>\n";
}

// A polyline through the points; NaN values split it.
void line(std::ostringstream &o, const Panel &p, const std::vector<Sample> &s,
          double Sample::*field, bool add_cached, const char *colour, const char *dash) {
  std::string pts;
  auto flush = [&]() {
    if (!pts.empty())
      o << "<polyline fill='none' stroke='" << colour << "' stroke-width='1.6'"
        << (dash[0] ? std::string(" stroke-dasharray='") + dash + "'" : std::string())
        << " points='" << pts << "'/>\n";
    pts.clear();
  };
  for (const Sample &x : s) {
    double v = x.*field + (add_cached ? x.cached : 0.0);
    if (std::isnan(v)) {
      flush();
      continue;
    }
    pts += num(p.x(x.time_s)) + "," + num(p.y(std::clamp(v, 0.0, 1.0))) + " ";
  }
  flush();
}

}  // namespace

bool write_svg_plot(const std::string &path, const std::string &title,
                    const std::vector<RunResult> &runs, std::string &error) {
  double x_max = 1;
  for (const RunResult &r : runs)
    for (const Sample &s : r.timeline) x_max = std::max(x_max, s.time_s);
  std::ostringstream o;
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << kWidth << "' height='" << kHeight
    << "' font-family='sans-serif' font-size='12'>\n"
    << "<rect width='100%' height='100%' fill='white'/>\n"
    << "<text x='" << kLeft << "' y='22' font-size='15' font-weight='bold'>" << esc(title)
    << "</text>\n";
  const Panel hit{kTop + 20, "prompt tokens reused (hit rate of the prompts admitted in each interval)",
                  x_max};
  const Panel occ{kTop + 20 + kPanel + kGap,
                  "cache occupancy: in use (solid), in use + cached (dashed), share of blocks",
                  x_max};
  axes(o, hit);
  axes(o, occ);
  for (size_t i = 0; i < runs.size(); ++i) {
    const char *colour = kColours[i % (sizeof kColours / sizeof kColours[0])];
    line(o, hit, runs[i].timeline, &Sample::hit_rate, false, colour, "");
    line(o, occ, runs[i].timeline, &Sample::in_use, false, colour, "");
    line(o, occ, runs[i].timeline, &Sample::in_use, true, colour, "5,3");
    // Legend: one entry per run, above the top panel on the right.
    const double lx = kWidth - kRight - 150.0 * static_cast<double>(runs.size() - i);
    o << "<rect x='" << lx << "' y='" << kTop - 12 << "' width='12' height='12' fill='" << colour
      << "'/>\n<text x='" << lx + 16 << "' y='" << kTop - 2 << "'>" << esc(runs[i].policy)
      << "</text>\n";
  }
  o << "</svg>\n";
  std::ofstream f(path);
  if (!(f << o.str())) {
    error = "cannot write " + path;
    return false;
  }
  return true;
}

}  // namespace sim
