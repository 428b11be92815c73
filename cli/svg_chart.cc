#include "cli/svg_chart.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace spintune {

std::string EscapeHtml(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
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
        out += c;
    }
  }
  return out;
}

namespace {

std::string Num(double v) { return absl::StrFormat("%.1f", v); }

std::string Text(double x, double y, const std::string& text, const std::string& extra = "") {
  return absl::StrCat("<text x=\"", Num(x), "\" y=\"", Num(y), "\" ", extra, ">",
                      EscapeHtml(text), "</text>");
}

// About five round values spanning [lo, hi].
std::vector<double> LinearTicks(double lo, double hi) {
  const double raw = (hi - lo) / 5;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (raw <= m * mag) {
      step = m * mag;
      break;
    }
  }
  std::vector<double> ticks;
  for (double t = std::ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) {
    ticks.push_back(std::abs(t) < step * 1e-9 ? 0 : t);
  }
  return ticks;
}

}  // namespace

void SvgChart::SetLogX(double min_x, double max_x) {
  min_x_ = min_x;
  max_x_ = std::max(max_x, min_x * 10);
}

void SvgChart::SetY(double min_y, double max_y) {
  min_y_ = min_y;
  max_y_ = max_y > min_y ? max_y : min_y + 1;
}

double SvgChart::MapX(double x, double left, double plot_w) const {
  const double lx = std::log10(std::clamp(x, min_x_, max_x_));
  return left + plot_w * (lx - std::log10(min_x_)) / (std::log10(max_x_) - std::log10(min_x_));
}

double SvgChart::MapY(double y, double top, double plot_h) const {
  return top + plot_h * (1 - (std::clamp(y, min_y_, max_y_) - min_y_) / (max_y_ - min_y_));
}

std::string SvgChart::RenderPanel(double x0, double y0, double width, double height) const {
  const double left = x0 + 70, right = x0 + width - 25;
  const double top = y0 + 40, bottom = y0 + height - 155;
  const double pw = right - left, ph = bottom - top;
  auto fx = x_format_ ? x_format_ : [](double v) { return absl::StrFormat("%g", v); };
  auto fy = y_format_ ? y_format_ : [](double v) { return absl::StrFormat("%g", v); };
  // The y range as data, so tests (and readers of the SVG) need not parse ticks.
  std::string s = absl::StrCat("<g class=\"panel\" data-y-min=\"", Num(min_y_),
                               "\" data-y-max=\"", Num(max_y_), "\">");
  absl::StrAppend(&s, Text(x0 + width / 2, y0 + 16, title_,
                           "text-anchor=\"middle\" font-weight=\"bold\""));
  if (!note_.empty()) {
    absl::StrAppend(&s, Text(x0 + width / 2, y0 + 31, note_,
                             "text-anchor=\"middle\" fill=\"#a00\" font-size=\"11\""));
  }
  absl::StrAppend(&s, "<rect x=\"", Num(left), "\" y=\"", Num(top), "\" width=\"", Num(pw),
                  "\" height=\"", Num(ph), "\" fill=\"#fff\" stroke=\"#888\"/>");
  // x ticks: every decade, grid lines at 2 and 5 too.
  for (double d = std::pow(10.0, std::floor(std::log10(min_x_))); d <= max_x_ * 1.0001; d *= 10) {
    for (double m : {1.0, 2.0, 5.0}) {
      const double v = d * m;
      if (v < min_x_ * 0.9999 || v > max_x_ * 1.0001) continue;
      const double x = MapX(v, left, pw);
      absl::StrAppend(&s, "<line x1=\"", Num(x), "\" y1=\"", Num(top), "\" x2=\"", Num(x),
                      "\" y2=\"", Num(bottom), "\" stroke=\"", m == 1 ? "#ddd" : "#f0f0f0",
                      "\"/>");
      if (m == 1) {
        absl::StrAppend(&s, Text(x, bottom + 14, fx(v), "text-anchor=\"middle\""));
      }
    }
  }
  for (double v : LinearTicks(min_y_, max_y_)) {
    const double y = MapY(v, top, ph);
    absl::StrAppend(&s, "<line x1=\"", Num(left), "\" y1=\"", Num(y), "\" x2=\"", Num(right),
                    "\" y2=\"", Num(y), "\" stroke=\"#eee\"/>");
    absl::StrAppend(&s, Text(left - 4, y + 4, fy(v), "text-anchor=\"end\""));
  }
  absl::StrAppend(&s, Text(left + pw / 2, bottom + 30, x_label_, "text-anchor=\"middle\""));
  absl::StrAppend(&s, Text(x0 + 12, top + ph / 2, y_label_,
                           absl::StrCat("text-anchor=\"middle\" transform=\"rotate(-90 ",
                                        Num(x0 + 12), " ", Num(top + ph / 2), ")\"")));
  for (const Series& se : series_) {
    if (se.points.empty()) continue;
    std::string pts;
    double last_y = 0;
    for (size_t i = 0; i < se.points.size(); ++i) {
      const double x = MapX(se.points[i].first, left, pw);
      const double y = MapY(se.points[i].second, top, ph);
      if (se.step && i > 0) absl::StrAppend(&pts, Num(x), ",", Num(last_y), " ");
      absl::StrAppend(&pts, Num(x), ",", Num(y), " ");
      last_y = y;
    }
    absl::StrAppend(&s, "<polyline fill=\"none\" stroke-width=\"2\" stroke=\"", se.color, "\"",
                    se.dashed ? " stroke-dasharray=\"6 4\"" : "", " points=\"", pts, "\"/>");
  }
  for (const Marker& m : markers_) {
    const double x = MapX(m.x, left, pw);
    absl::StrAppend(&s, "<line class=\"marker\" x1=\"", Num(x), "\" y1=\"", Num(top),
                    "\" x2=\"", Num(x), "\" y2=\"", Num(bottom), "\" stroke=\"", m.color,
                    "\" stroke-width=\"2\" stroke-dasharray=\"3 3\"/>");
  }
  for (const Dot& d : dots_) {
    absl::StrAppend(&s, "<circle cx=\"", Num(MapX(d.x, left, pw)), "\" cy=\"",
                    Num(MapY(d.y, top, ph)), "\" r=\"5\" fill=\"", d.color,
                    "\" stroke=\"#000\"/>");
  }
  // Legend under the axis label, one entry per line.
  double ly = bottom + 48;
  auto legend = [&](const std::string& color, const std::string& label, const std::string& kind) {
    const double lx = left;
    if (kind == "dot") {
      absl::StrAppend(&s, "<circle cx=\"", Num(lx + 9), "\" cy=\"", Num(ly - 4),
                      "\" r=\"4\" fill=\"", color, "\" stroke=\"#000\"/>");
    } else {
      absl::StrAppend(&s, "<line x1=\"", Num(lx), "\" y1=\"", Num(ly - 4), "\" x2=\"",
                      Num(lx + 18), "\" y2=\"", Num(ly - 4), "\" stroke=\"", color,
                      "\" stroke-width=\"2\"", kind == "dashed" ? " stroke-dasharray=\"4 3\"" : "",
                      "/>");
    }
    absl::StrAppend(&s, Text(lx + 24, ly, label));
    ly += 14;
  };
  for (const Series& se : series_) legend(se.color, se.label, se.dashed ? "dashed" : "line");
  for (const Marker& m : markers_) legend(m.color, m.label, "dashed");
  for (const Dot& d : dots_) legend(d.color, d.label, "dot");
  absl::StrAppend(&s, "</g>");
  return s;
}

}  // namespace spintune
