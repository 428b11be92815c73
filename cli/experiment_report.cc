#include "cli/experiment_report.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/svg_chart.h"

namespace spintune {
namespace {

constexpr char kGrey[] = "#777777";

std::string Num(double v) { return absl::StrFormat("%.1f", v); }
std::string Value(double v) { return absl::StrFormat("%.4g", v); }

std::string Text(double x, double y, const std::string& text, const std::string& attrs = "") {
  return absl::StrCat("<text x=\"", Num(x), "\" y=\"", Num(y), "\" ", attrs, ">",
                      EscapeHtml(text), "</text>");
}

// A "nice" upper bound for an axis from 0.
double AxisTop(double v) {
  if (v <= 0) return 1;
  const double p = std::pow(10.0, std::floor(std::log10(v)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    if (m * p >= v) return m * p;
  }
  return 10 * p;
}

// Ticks at fifths of [0, top] with their grid lines, along x or y.
std::string Grid(bool along_x, double top, double left, double plot_top, double w, double h) {
  std::string s;
  for (int i = 0; i <= 5; ++i) {
    const double v = top * i / 5;
    if (along_x) {
      const double x = left + w * i / 5;
      absl::StrAppend(&s, "<line x1=\"", Num(x), "\" y1=\"", Num(plot_top), "\" x2=\"", Num(x),
                      "\" y2=\"", Num(plot_top + h), "\" stroke=\"#eee\"/>",
                      Text(x, plot_top + h + 14, Value(v), "text-anchor=\"middle\""));
    } else {
      const double y = plot_top + h * (1 - static_cast<double>(i) / 5);
      absl::StrAppend(&s, "<line x1=\"", Num(left), "\" y1=\"", Num(y), "\" x2=\"",
                      Num(left + w), "\" y2=\"", Num(y), "\" stroke=\"#eee\"/>",
                      Text(left - 4, y + 4, Value(v), "text-anchor=\"end\""));
    }
  }
  return s;
}

std::string SettingsChart(const ExperimentRecord& r, const std::vector<SettingSummary>& rows) {
  const double row_h = 18, left = 190, width = 760, top = 34;
  const double plot_w = width - left - 20, plot_h = row_h * static_cast<double>(rows.size());
  const double height = top + plot_h + 44;
  double hi = 0;
  for (const auto& s : rows) hi = std::max(hi, s.measured ? s.metric.high : 0);
  const double axis = AxisTop(hi * 1.05);
  auto x = [&](double v) { return left + plot_w * std::clamp(v / axis, 0.0, 1.0); };
  std::string s = absl::StrCat(
      "<svg class=\"experiment-settings\" xmlns=\"http://www.w3.org/2000/svg\" width=\"",
      Num(width), "\" height=\"", Num(height), "\" viewBox=\"0 0 ", Num(width), " ",
      Num(height), "\" role=\"img\" aria-label=\"", EscapeHtml(r.metric), " per setting\">");
  absl::StrAppend(&s, Text(width / 2, 16,
                           absl::StrCat(r.metric, " per setting (geometric mean, 95% CI; ",
                                        r.lower_is_better ? "lower" : "higher", " is better)"),
                           "text-anchor=\"middle\" font-weight=\"bold\""));
  absl::StrAppend(&s, "<rect x=\"", Num(left), "\" y=\"", Num(top), "\" width=\"", Num(plot_w),
                  "\" height=\"", Num(plot_h), "\" fill=\"#fff\" stroke=\"#888\"/>",
                  Grid(true, axis, left, top, plot_w, plot_h));
  absl::StrAppend(&s, Text(left + plot_w / 2, top + plot_h + 34,
                           r.metric + (r.metric_unit.empty() ? "" : " (" + r.metric_unit + ")"),
                           "text-anchor=\"middle\""));
  for (size_t i = 0; i < rows.size(); ++i) {
    const SettingSummary& row = rows[i];
    const double y = top + row_h * (static_cast<double>(i) + 0.5);
    const char* color = row.is_applied || row.is_best ? kChartRed : row.is_start ? kGrey : kChartBlue;
    absl::StrAppend(&s, Text(left - 6, y + 4, row.label, "text-anchor=\"end\""));
    if (row.is_start && row.measured) {
      absl::StrAppend(&s, "<line class=\"start\" x1=\"", Num(x(row.metric.mean)), "\" y1=\"",
                      Num(top), "\" x2=\"", Num(x(row.metric.mean)), "\" y2=\"",
                      Num(top + plot_h), "\" stroke=\"", kGrey, "\" stroke-dasharray=\"4 3\"/>");
    }
    if (!row.measured) {
      absl::StrAppend(&s, Text(left + 4, y + 4, "failed", absl::StrCat("fill=\"", kChartRed, "\"")));
      continue;
    }
    absl::StrAppend(&s, "<line x1=\"", Num(x(row.metric.low)), "\" y1=\"", Num(y), "\" x2=\"",
                    Num(x(row.metric.high)), "\" y2=\"", Num(y), "\" stroke=\"", color,
                    "\" stroke-width=\"2\"/><circle class=\"setting\" cx=\"",
                    Num(x(row.metric.mean)), "\" cy=\"", Num(y), "\" r=\"4\" fill=\"", color,
                    "\"/>");
  }
  absl::StrAppend(&s, "</svg>");
  return s;
}

std::string TrialsChart(const ExperimentRecord& r, const std::vector<KnobTrialRecord>& trials) {
  const double left = 70, width = 760, top = 34, plot_h = 200;
  const double plot_w = width - left - 20, height = top + plot_h + 70;
  double hi = 0;
  for (const auto& t : trials) hi = std::max(hi, t.metric);
  const double axis = AxisTop(hi * 1.05);
  const double n = static_cast<double>(std::max<size_t>(trials.size(), 1));
  std::string s = absl::StrCat(
      "<svg class=\"experiment-trials\" xmlns=\"http://www.w3.org/2000/svg\" width=\"",
      Num(width), "\" height=\"", Num(height), "\" viewBox=\"0 0 ", Num(width), " ",
      Num(height), "\" role=\"img\" aria-label=\"trials in order\">");
  absl::StrAppend(&s, Text(width / 2, 16, "Every trial in the order it ran",
                           "text-anchor=\"middle\" font-weight=\"bold\""));
  absl::StrAppend(&s, "<rect x=\"", Num(left), "\" y=\"", Num(top), "\" width=\"", Num(plot_w),
                  "\" height=\"", Num(plot_h), "\" fill=\"#fff\" stroke=\"#888\"/>",
                  Grid(false, axis, left, top, plot_w, plot_h));
  for (size_t i = 0; i < trials.size(); ++i) {
    const KnobTrialRecord& t = trials[i];
    const double cx = left + plot_w * (static_cast<double>(i) + 0.5) / n;
    const bool ok = t.feasible && t.metric > 0;
    const double cy = top + plot_h * (1 - std::clamp(ok ? t.metric / axis : 0.0, 0.0, 1.0));
    const char* color = !ok ? kChartRed : t.phase == "confirm" ? kChartOrange : kChartBlue;
    absl::StrAppend(&s, "<circle class=\"trial\" cx=\"", Num(cx), "\" cy=\"", Num(cy),
                    "\" r=\"3\" fill=\"", color, "\"><title>",
                    EscapeHtml(absl::StrCat("trial ", t.trial, " (", t.phase, "): ",
                                            r.space.Format(t.setting), " -> ", Value(t.metric),
                                            ok ? "" : " failed")),
                    "</title></circle>");
  }
  absl::StrAppend(&s, Text(left + plot_w / 2, top + plot_h + 16,
                           absl::StrCat("trial 1 .. ", trials.size()), "text-anchor=\"middle\""));
  double lx = left;
  for (auto [color, label] : {std::pair<const char*, const char*>{kChartBlue, "search"},
                              {kChartOrange, "confirmation (start vs best, fresh trials)"},
                              {kChartRed, "failed or broke a constraint"}}) {
    absl::StrAppend(&s, "<circle cx=\"", Num(lx + 5), "\" cy=\"", Num(top + plot_h + 40),
                    "\" r=\"4\" fill=\"", color, "\"/>",
                    Text(lx + 14, top + plot_h + 44, label));
    lx += 80 + 6.0 * std::string(label).size();
  }
  absl::StrAppend(&s, Text(14, top + plot_h / 2, r.metric,
                           absl::StrCat("text-anchor=\"middle\" transform=\"rotate(-90 14 ",
                                        Num(top + plot_h / 2), ")\"")),
                  "</svg>");
  return s;
}

std::string Cell(const std::string& text) { return "<td>" + EscapeHtml(text) + "</td>"; }

}  // namespace

std::string RenderExperimentSection(const ExperimentEvidence& e, size_t max_settings) {
  const ExperimentRecord& r = e.record;
  std::vector<SettingSummary> all = SummarizeSettings(e);
  std::vector<SettingSummary> rows;
  for (const auto& s : all) {
    if (rows.size() < max_settings || s.is_start || s.is_best || s.is_applied) rows.push_back(s);
  }
  std::string h = absl::StrCat("<section class=\"experiment\" id=\"experiment-", r.id, "\"><h3>",
                               EscapeHtml(absl::StrCat("Experiment ", r.id, ": ", r.name, " (",
                                                       ExperimentStateText(r), ")")),
                               "</h3><p class=\"meta\">");
  if (r.state != "running") absl::StrAppend(&h, "<b>", EscapeHtml(r.statement), "</b><br>");
  std::string knobs;
  for (const auto& c : r.space.coordinates) {
    absl::StrAppend(&knobs, knobs.empty() ? "" : ", ", c.name, " (", c.values.size(), " values)");
  }
  absl::StrAppend(&h, "knobs ", EscapeHtml(knobs), ": ", r.space.Size(), " settings, ",
                  r.trials, " trials (at most ", r.max_trials, ")<br>workload: ",
                  EscapeHtml(r.workload), r.constraints.empty() ? "" : "; constraints: ",
                  EscapeHtml(r.constraints), "<br>start <code>",
                  EscapeHtml(r.space.Format(r.start)), "</code>");
  if (r.state != "running") {
    absl::StrAppend(&h, ", left on <code>", EscapeHtml(r.space.Format(r.applied)), "</code>");
  }
  absl::StrAppend(&h, "; started ", EscapeHtml(r.created_at),
                  r.finished_at.empty() ? "" : ", finished " + EscapeHtml(r.finished_at), "</p>");
  if (rows.size() < all.size()) {
    absl::StrAppend(&h, "<p class=\"meta\">The ", rows.size(), " best of ", all.size(),
                    " settings measured (and the start).</p>");
  }
  absl::StrAppend(&h, SettingsChart(r, rows), TrialsChart(r, e.trials));
  absl::StrAppend(&h, "<table class=\"experiment-settings\"><tr><th>setting</th><th>trials</th>"
                      "<th>failed</th><th>",
                  EscapeHtml(r.metric), "</th><th>95% CI</th><th></th></tr>");
  for (const auto& s : rows) {
    std::string note;
    for (auto [flag, text] : {std::pair<bool, const char*>{s.is_start, "start"},
                              {s.is_best, "best"}, {s.is_applied, "left on"}}) {
      if (flag) absl::StrAppend(&note, note.empty() ? "" : ", ", text);
    }
    absl::StrAppend(&h, "<tr>", Cell(s.label), Cell(absl::StrCat(s.trials)),
                    Cell(absl::StrCat(s.failed)), Cell(s.measured ? Value(s.metric.mean) : "-"),
                    Cell(s.measured ? absl::StrCat("[", Value(s.metric.low), ", ",
                                                   Value(s.metric.high), "]")
                                    : "-"),
                    Cell(note), "</tr>");
  }
  absl::StrAppend(&h, "</table></section>\n");
  return h;
}

}  // namespace spintune
