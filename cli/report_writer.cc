#include "cli/report_writer.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/experiment_report.h"
#include "cli/report_evidence.h"
#include "cli/svg_chart.h"
#include "cli/table_format.h"
#include "models/wait_distribution.h"
#include "models/wait_optimizer.h"

namespace spintune {
namespace {

constexpr char kGrey[] = "#555555";
constexpr char kBlack[] = "#000000";
constexpr size_t kMaxDrawnPoints = 240;

std::string KeyLabel(const PolicyKey& k) {
  return absl::StrCat(k.device, " / ", k.cpu_class, " / opcode ", k.opcode, " / size ",
                      FormatSizeClass(k.size_class));
}

std::string KeyAnchor(const PolicyKey& k) {
  std::string a = absl::StrCat("key-", k.device, "-", k.cpu_class, "-", k.opcode, "-",
                               k.size_class);
  for (char& c : a) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-') c = '_';
  }
  return a;
}

double Floor10(double v) { return std::pow(10.0, std::floor(std::log10(std::max(v, 1.0)))); }
double Ceil10(double v) { return std::pow(10.0, std::ceil(std::log10(std::max(v, 10.0)))); }

// The parameter a wait is drawn at on a threshold axis (0: none).
double ThresholdOf(const WaitParams& w) {
  switch (w.strategy) {
    case Strategy::kSpin:
    case Strategy::kSpinThenIrq:
      return static_cast<double>(w.spin_ns);
    case Strategy::kSleepThenSpin:
      return static_cast<double>(w.sleep_ns);
    case Strategy::kPollSleep:
      return static_cast<double>(w.poll_interval_ns);
    case Strategy::kIrq:
      return 0;
  }
  return 0;
}

// At most `n` items of `v` spread over it (first and last kept).
template <typename T>
std::vector<T> Thin(const std::vector<T>& v, size_t n) {
  if (v.size() <= n) return v;
  std::vector<T> out;
  for (size_t i = 0; i < n; ++i) out.push_back(v[i * (v.size() - 1) / (n - 1)]);
  return out;
}

// (value, fraction <= value) steps of a histogram.
std::vector<std::pair<double, double>> CdfPoints(const LatencyHistogram& h) {
  std::vector<std::pair<double, double>> pts;
  if (h.empty()) return pts;
  const double total = static_cast<double>(h.total_count());
  pts.push_back({static_cast<double>(LatencyHistogram::BucketLowerNs(h.buckets()[0].first)), 0});
  uint64_t cum = 0;
  for (const auto& [index, count] : h.buckets()) {
    cum += count;
    pts.push_back({LatencyHistogram::BucketMidNs(index), static_cast<double>(cum) / total});
  }
  return Thin(pts, 2 * kMaxDrawnPoints);
}

std::string KeyChart(const KeyEvidence& k, const PolicyEntry* entry, const PolicyTable& table) {
  const WaitDistribution dist = WaitDistribution::FromHistogram(k.histogram);
  const int cpu = table.CpuClassIndex(k.key.cpu_class);
  const PlatformCosts costs = cpu >= 0 ? table.cpu_classes[cpu].costs : PlatformCosts{};
  const double lambda = table.latency_weight;
  auto cost = [&](const WaitParams& w) { return EvaluateWait(dist, w, costs).Cost(lambda); };
  const double max_spin = static_cast<double>(table.max_spin_ns ? table.max_spin_ns : 1'000'000);

  // Panel 1: the distribution.
  SvgChart cdf("Completion time CDF", "completion time (log scale)", "fraction of requests <= x");
  cdf.SetXFormat([](double v) { return FormatDurationNs(v); });
  cdf.SetYFormat([](double v) { return absl::StrFormat("%.1f", v); });
  const double lo = Floor10(std::max(1.0, dist.points().front().value_ns / 2));
  double hi = dist.max_ns();
  if (entry) hi = std::max(hi, ThresholdOf(entry->wait));
  cdf.SetLogX(lo, Ceil10(hi * 1.2));
  cdf.SetY(0, 1);
  cdf.Add(SvgChart::Series{absl::StrCat("CDF of ", k.histogram.total_count(), " samples"), kChartBlue,
                           CdfPoints(k.histogram), false, true});
  if (entry && ThresholdOf(entry->wait) > 0) {
    cdf.Add(SvgChart::Marker{ThresholdOf(entry->wait),
                             absl::StrCat("chosen: ", DescribeWait(entry->wait)), kChartRed});
  }
  if (entry && entry->default_wait && ThresholdOf(*entry->default_wait) > 0) {
    cdf.Add(SvgChart::Marker{ThresholdOf(*entry->default_wait),
                             absl::StrCat("driver default: ", DescribeWait(*entry->default_wait)),
                             kGrey});
  }

  // Panel 2: expected cost over thresholds, every family.
  // The exact candidates (0 and the samples' catch times), thinned for
  // drawing, plus a log grid so the curves also show beyond the samples.
  std::vector<double> samples;
  for (const auto& p : dist.points()) {
    if (p.catch_ns > 0 && static_cast<double>(p.catch_ns) <= max_spin) {
      samples.push_back(static_cast<double>(p.catch_ns));
    }
  }
  const double c_lo =
      Floor10(std::max(1.0, (samples.empty() ? dist.points().front().value_ns : samples[0]) / 2));
  const double c_hi = Ceil10(std::max(max_spin, entry ? ThresholdOf(entry->wait) : 0.0));
  std::vector<double> candidates = Thin(samples, kMaxDrawnPoints);
  candidates.push_back(0);
  for (double g = c_lo; g <= c_hi * 1.0001; g *= std::pow(10.0, 1.0 / 8)) candidates.push_back(g);
  std::sort(candidates.begin(), candidates.end());
  SvgChart curve("Expected cost per request",
                 "threshold T / sleep S / interval I (log scale; 0 at the left edge)",
                 absl::StrFormat("CPU + %g x latency per request", lambda));
  curve.SetXFormat([](double v) { return FormatDurationNs(v); });
  curve.SetYFormat([](double v) { return FormatDurationNs(v); });
  curve.SetLogX(c_lo, c_hi);
  SvgChart::Series spin_then_irq{"spin_then_irq(T)", kChartBlue, {}, false, false};
  SvgChart::Series sleep_then_spin{"sleep_then_spin(S)", kChartGreen, {}, false, false};
  for (double t : candidates) {
    const uint64_t x = static_cast<uint64_t>(t);
    if (t <= max_spin) {  // thresholds above the bound are not allowed
      spin_then_irq.points.push_back({std::max(t, c_lo), cost(WaitParams::SpinThenIrq(x))});
    }
    sleep_then_spin.points.push_back({std::max(t, c_lo), cost(WaitParams::SleepThenSpin(x))});
  }
  const double irq = cost(WaitParams::Irq());
  double y_top = irq;
  double best = irq;  // the cheapest candidate drawn
  curve.Add(SvgChart::Series{absl::StrCat("irq: ", FormatDurationNs(irq)), kChartOrange,
                             {{c_lo, irq}, {c_hi, irq}}, false, false});
  curve.Add(std::move(spin_then_irq));
  curve.Add(std::move(sleep_then_spin));
  if (entry) {
    for (const FamilyOptimum& f : entry->families) {
      if (!f.feasible) continue;
      if (f.strategy == Strategy::kSpin || f.strategy == Strategy::kPollSleep) {
        const double j = cost(f.params);
        best = std::min(best, j);
        curve.Add(SvgChart::Series{absl::StrCat("best ", DescribeWait(f.params), ": ",
                                                FormatDurationNs(j)),
                                   f.strategy == Strategy::kSpin ? kChartPurple : kBlack,
                                   {{c_lo, j}, {c_hi, j}}, true, false});
      }
    }
    const double chosen = cost(entry->wait);
    y_top = std::max(y_top, chosen);
    best = std::min(best, chosen);
    if (entry->default_wait) {
      const double j = cost(*entry->default_wait);
      const std::string label = absl::StrCat("driver default ", DescribeWait(*entry->default_wait),
                                             ": ", FormatDurationNs(j));
      if (best <= 0 || j <= std::max(y_top, kDefaultAxisFactor * best)) {
        y_top = std::max(y_top, j);
        curve.Add(SvgChart::Series{label, kGrey, {{c_lo, j}, {c_hi, j}}, true, false});
      } else {  // off the axis: its cost in words (legend and note)
        curve.Add(SvgChart::Series{label + " (above the axis)", kGrey, {}, true, false});
        curve.SetNote(absl::StrFormat("y axis clipped: the driver default costs %s, %.0fx the best",
                                      FormatDurationNs(j), j / best));
      }
    }
    // IRQ has no parameter: its dot sits mid-axis on the IRQ line.
    const double x = entry->wait.strategy == Strategy::kIrq ? std::sqrt(c_lo * c_hi)
                                                            : ThresholdOf(entry->wait);
    curve.Add(SvgChart::Dot{std::max(x, c_lo), chosen,
                            absl::StrCat("chosen ", DescribeWait(entry->wait), ": ",
                                         FormatDurationNs(chosen)),
                            kChartRed});
  } else {
    curve.SetNote("no entry: fewer samples than the table's minimum");
  }
  curve.SetY(0, y_top * 1.5);
  return absl::StrCat(
      "<svg class=\"key-chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"1000\" "
      "height=\"440\" viewBox=\"0 0 1000 440\" role=\"img\" aria-label=\"",
      EscapeHtml(KeyLabel(k.key)), "\">", cdf.RenderPanel(0, 0, 490, 440),
      curve.RenderPanel(510, 0, 490, 440), "</svg>");
}

std::string DispatchChart(const DispatchRecord& d, const PolicyTable& table) {
  SvgChart chart(absl::StrCat("IRQ dispatch: CPU class ", d.cpu_class, ", device ", d.device),
                 "time (log scale)", "fraction <= x");
  chart.SetXFormat([](double v) { return FormatDurationNs(v); });
  chart.SetYFormat([](double v) { return absl::StrFormat("%.1f", v); });
  double lo = 1e12, hi = 10;
  for (const LatencyHistogram* h : {&d.handler, &d.wake}) {
    if (h->empty()) continue;
    lo = std::min(lo, static_cast<double>(LatencyHistogram::BucketLowerNs(h->buckets()[0].first)));
    hi = std::max(hi, LatencyHistogram::BucketMidNs(h->buckets().back().first));
  }
  const int cpu = table.CpuClassIndex(d.cpu_class);
  if (cpu >= 0) {
    hi = std::max({hi, table.cpu_classes[cpu].costs.irq_cpu_ns,
                   table.cpu_classes[cpu].costs.irq_wake_ns});
  }
  chart.SetLogX(Floor10(std::max(1.0, std::min(lo, hi) / 2)), Ceil10(hi * 1.2));
  chart.SetY(0, 1);
  chart.Add(SvgChart::Series{absl::StrCat("handler (", d.handler.total_count(), " samples)"), kChartBlue,
                             CdfPoints(d.handler), false, true});
  chart.Add(SvgChart::Series{absl::StrCat("wake (", d.wake.total_count(), " samples)"), kChartGreen,
                             CdfPoints(d.wake), false, true});
  if (cpu >= 0) {
    const PlatformCosts& c = table.cpu_classes[cpu].costs;
    if (c.irq_cpu_ns > 0) {
      chart.Add(SvgChart::Marker{c.irq_cpu_ns,
                                 absl::StrCat("irq_cpu_ns used: ", FormatDurationNs(c.irq_cpu_ns)),
                                 kChartOrange});
    }
    if (c.irq_wake_ns > 0) {
      chart.Add(SvgChart::Marker{
          c.irq_wake_ns, absl::StrCat("irq_wake_ns used: ", FormatDurationNs(c.irq_wake_ns)),
          kChartRed});
    }
  }
  return absl::StrCat(
      "<svg class=\"dispatch-chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"600\" "
      "height=\"440\" viewBox=\"0 0 600 440\" role=\"img\">",
      chart.RenderPanel(0, 0, 600, 440), "</svg>");
}

std::string Cell(const std::string& text, bool numeric = false) {
  return absl::StrCat(numeric ? "<td class=\"n\">" : "<td>", EscapeHtml(text), "</td>");
}

// The knob settings in force and one section per experiment.
void AppendKnobs(const Profile& p, const ReportOptions& options, std::string* h) {
  if (p.knobs.empty() && options.experiments.empty()) return;
  absl::StrAppend(h, "<h2>Knob settings and experiments</h2>\n");
  if (!p.knobs.empty()) {
    absl::StrAppend(h, "<table class=\"knobs\"><tr><th>knob set</th><th>knob</th><th>value</th>"
                       "<th>evidence</th></tr>");
    for (const auto& k : p.knobs) {
      absl::StrAppend(h, "<tr>", Cell(k.declaration), Cell(k.coordinate), Cell(k.label),
                      Cell(k.evidence), "</tr>");
    }
    absl::StrAppend(h, "</table>\n");
  }
  for (const auto& e : options.experiments) absl::StrAppend(h, RenderExperimentSection(e));
}

}  // namespace

std::string RenderHtmlReport(const Profile& p, const ReportOptions& options) {
  const PolicyTable& t = p.table;
  // The samples shown and, per key, those the version was fitted on: every
  // count on the page is one of these two, labelled.
  const std::map<PolicyKey, uint64_t> fitted = FittedSamples(t);
  const bool fit_evidence = IsFitEvidence(t, p.keys);
  std::map<PolicyKey, uint64_t> shown;
  uint64_t shown_total = 0, fitted_total = 0;
  for (const auto& k : p.keys) {
    shown[k.key] = k.histogram.total_count();
    shown_total += k.histogram.total_count();
  }
  for (const auto& [key, n] : fitted) fitted_total += n;
  const std::string source =
      options.evidence_source.empty() ? "the profile's samples" : options.evidence_source;
  const std::string title =
      options.title.empty() ? absl::StrCat("spintune report: ", p.info.target) : options.title;
  std::string h = absl::StrCat(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
      "<title>",
      EscapeHtml(title),
      "</title><style>"
      "body{font-family:sans-serif;margin:24px;color:#222;max-width:1040px}"
      "table{border-collapse:collapse;font-size:13px;margin:8px 0}"
      "th,td{border:1px solid #ccc;padding:3px 6px;text-align:left}"
      "td.n{text-align:right;font-variant-numeric:tabular-nums}"
      "th{background:#f3f3f3}section.key{border-top:1px solid #ccc;margin-top:24px}"
      "svg text{font-family:sans-serif;font-size:11px;fill:#222}"
      ".meta{color:#555;font-size:13px}code{background:#f5f5f5;padding:0 3px}"
      ".evidence{background:#fff4e5;border:1px solid #e0a040;padding:6px 10px;font-size:13px}"
      "</style></head><body>\n<h1>",
      EscapeHtml(title), "</h1>\n<p class=\"meta\">");
  absl::StrAppend(&h, "target <code>", EscapeHtml(p.info.target), "</code>, board <code>",
                  EscapeHtml(t.board), "</code>, table version ", t.version, " (",
                  EscapeHtml(t.origin),
                  t.fitted_at.empty() ? "" : ", stored " + EscapeHtml(t.fitted_at), ")");
  if (!p.info.name.empty()) absl::StrAppend(&h, ", profile <code>", EscapeHtml(p.info.name), "</code>");
  if (!p.info.parent.empty()) absl::StrAppend(&h, ", parent <code>", EscapeHtml(p.info.parent), "</code>");
  absl::StrAppend(&h, "<br>objective ", EscapeHtml(t.objective_name), ": cost = CPU + ",
                  absl::StrFormat("%g", t.latency_weight),
                  " x latency per request; max spin ", FormatDurationNs(static_cast<double>(t.max_spin_ns)),
                  "; ", shown_total, " samples over ", p.keys.size(), " keys",
                  fit_evidence ? ": the samples this version was fitted on (" : " shown (",
                  EscapeHtml(source), fit_evidence ? ")" : "; not this version's own, see below)");
  if (!p.info.note.empty()) absl::StrAppend(&h, "<br>note: ", EscapeHtml(p.info.note));
  absl::StrAppend(&h, "<br>generated ", EscapeHtml(options.generated_at), " by spintune ",
                  EscapeHtml(options.tool_version), "</p>\n");
  if (!fit_evidence) {
    absl::StrAppend(
        &h, "<p class=\"evidence\"><b>Not this version's own samples.</b> The table of version ",
        t.version, " (", EscapeHtml(t.origin), ") was fitted on ", fitted_total,
        " samples over ", fitted.size(),
        " keys (summary column <i>fitted on</i>); those samples are not stored. The counts, "
        "charts and curves below show ", EscapeHtml(source), ": ", shown_total,
        " samples over ", p.keys.size(),
        " keys (column <i>shown</i>). To keep a version's own samples, save a profile of it "
        "right after its fit (<code>spintune profiles save</code>).</p>\n");
  }
  if (t.devices.empty()) {  // a target with knob experiments only
    AppendKnobs(p, options, &h);
    absl::StrAppend(&h, "</body></html>\n");
    return h;
  }

  std::vector<const KeyEvidence*> keys;
  for (const auto& k : p.keys) {
    if (!k.histogram.empty()) keys.push_back(&k);
  }
  // The busiest keys get charts when there are more than the limit.
  const size_t all_keys = keys.size();
  if (options.max_key_charts > 0 && keys.size() > options.max_key_charts) {
    std::stable_sort(keys.begin(), keys.end(), [](const KeyEvidence* a, const KeyEvidence* b) {
      return a->histogram.total_count() > b->histogram.total_count();
    });
    keys.resize(options.max_key_charts);
  }
  std::sort(keys.begin(), keys.end(),
            [](const KeyEvidence* a, const KeyEvidence* b) { return a->key < b->key; });
  std::set<PolicyKey> charted;
  for (const KeyEvidence* k : keys) charted.insert(k->key);
  // Summary sorted by expected saving.
  std::vector<const PolicyEntry*> entries;
  for (const auto& e : t.entries) entries.push_back(&e);
  std::stable_sort(entries.begin(), entries.end(),
                   [](const PolicyEntry* a, const PolicyEntry* b) { return a->gain_ns > b->gain_ns; });
  absl::StrAppend(&h, "<h2>Summary, by expected saving per request</h2>"
                      "<table class=\"summary\"><tr><th>key</th>",
                  fit_evidence ? "<th>samples</th>" : "<th>fitted on</th><th>shown</th>",
                  "<th>chosen</th>"
                      "<th>cost/req</th><th>baseline</th><th>baseline cost/req</th>"
                      "<th>saving/req</th><th>95% CI</th><th>saving</th></tr>");
  for (const PolicyEntry* e : entries) {
    const bool has_default = e->gain_baseline == "default" && e->default_wait;
    const std::string baseline =
        e->gain_baseline.empty() ? "-"
        : has_default            ? "default " + DescribeWait(*e->default_wait)
                                 : "irq";
    const double base_cost = e->expected_cost_ns + e->gain_ns;
    std::string key = e->fallback ? absl::StrCat(e->key.device, " / * (fallback)")
                                  : KeyLabel(e->key);
    absl::StrAppend(&h, "<tr><td>");
    if (!e->fallback && charted.count(e->key)) {
      absl::StrAppend(&h, "<a href=\"#", KeyAnchor(e->key), "\">", EscapeHtml(key), "</a>");
    } else {
      absl::StrAppend(&h, EscapeHtml(key));
    }
    absl::StrAppend(
        &h, "</td>", Cell(absl::StrCat(e->samples), true),
        fit_evidence ? ""
        : e->fallback ? Cell("-", true)
                      : Cell(absl::StrCat(shown.count(e->key) ? shown.at(e->key) : 0), true),
        Cell(DescribeWait(e->wait)),
        Cell(FormatDurationNs(e->expected_cost_ns), true), Cell(baseline),
        Cell(e->gain_baseline.empty() ? "-" : FormatDurationNs(base_cost), true),
        Cell(e->gain_baseline.empty() ? "-" : FormatSigned(e->gain_ns), true),
        Cell(e->gain_baseline.empty()
                 ? "-"
                 : absl::StrCat("[", FormatSigned(e->gain_ci_low_ns), ", ",
                                FormatSigned(e->gain_ci_high_ns), "]"),
             true),
        Cell(e->gain_baseline.empty() || base_cost <= 0
                 ? "-"
                 : absl::StrFormat("%.1f%%", 100 * e->gain_ns / base_cost),
             true),
        "</tr>");
  }
  absl::StrAppend(&h, "</table>\n");

  // Platform costs.
  absl::StrAppend(&h, "<h2>Platform costs used</h2><table><tr><th>CPU class</th><th>kHz</th>"
                      "<th>irq_cpu</th><th>irq_wake</th><th>poll_read</th><th>timer_cpu</th>"
                      "<th>timer_wake</th></tr>");
  for (const auto& c : t.cpu_classes) {
    absl::StrAppend(&h, "<tr>", Cell(c.name), Cell(absl::StrCat(c.cpu_khz), true),
                    Cell(FormatDurationNs(c.costs.irq_cpu_ns), true),
                    Cell(FormatDurationNs(c.costs.irq_wake_ns), true),
                    Cell(FormatDurationNs(c.costs.poll_read_ns), true),
                    Cell(FormatDurationNs(c.costs.timer_cpu_ns), true),
                    Cell(FormatDurationNs(c.costs.timer_wake_ns), true), "</tr>");
  }
  absl::StrAppend(&h, "</table>\n");

  // Every push is checked against what the driver measured.
  if (!options.verifications.empty()) {
    absl::StrAppend(&h, "<h2>Verification: predicted against measured</h2>"
                        "<p class=\"meta\">Cost J per request of each key a version changed, "
                        "measured by the driver (95% interval), against the version in force "
                        "before it (v0: the driver's default rule).</p>"
                        "<table><tr><th>version</th><th>key</th><th>predicted</th>"
                        "<th>measured</th><th>requests</th><th>before</th><th>verdict</th>"
                        "<th>rolled back in</th></tr>");
    auto interval = [](const CostInterval& i) {
      return absl::StrCat(FormatDurationNs(i.mean_ns), " [", FormatDurationNs(i.low_ns), ", ",
                          FormatDurationNs(i.high_ns), "]");
    };
    for (const auto& v : options.verifications) {
      absl::StrAppend(
          &h, "<tr>", Cell(absl::StrCat("v", v.version), true),
          Cell(absl::StrCat(v.key.device, " ", v.key.cpu_class, " op", v.key.opcode, " ",
                            FormatSizeClass(v.key.size_class))),
          Cell(FormatDurationNs(v.predicted_cost_ns), true), Cell(interval(v.measured), true),
          Cell(absl::StrCat(v.requests), true),
          Cell(absl::StrCat("v", v.incumbent_version, " ", interval(v.incumbent)), true),
          Cell(v.VerdictLabel()), Cell(v.rollback_version ? absl::StrCat("v", v.rollback_version) : "-"),
          "</tr>");
    }
    absl::StrAppend(&h, "</table>\n");
  }

  // One chart per key.
  std::map<PolicyKey, const PolicyEntry*> by_key;
  for (const auto& e : t.entries) {
    if (!e.fallback) by_key[e.key] = &e;
  }
  absl::StrAppend(&h, "<h2>Per key</h2>\n");
  if (keys.size() < all_keys) {
    absl::StrAppend(&h, "<p class=\"meta\">Charts for the ", keys.size(), " of ", all_keys,
                    " keys with the most samples (--max-charts).</p>\n");
  }
  for (const KeyEvidence* k : keys) {
    auto it = by_key.find(k->key);
    const PolicyEntry* e = it == by_key.end() ? nullptr : it->second;
    absl::StrAppend(&h, "<section class=\"key\" id=\"", KeyAnchor(k->key), "\"><h3>",
                    EscapeHtml(KeyLabel(k->key)), "</h3><p class=\"meta\">",
                    k->histogram.total_count(), " samples",
                    fit_evidence || !fitted.count(k->key)
                        ? ""
                        : absl::StrCat(" shown (this version was fitted on ", fitted.at(k->key),
                                       ")"),
                    ", p50 ",
                    FormatDurationNs(k->histogram.QuantileNs(0.5)), ", p99 ",
                    FormatDurationNs(k->histogram.QuantileNs(0.99)));
    if (k->errors || k->irq_timeouts || k->spin_timeouts) {
      absl::StrAppend(&h, "; ", k->errors, " errors, ", k->irq_timeouts, " IRQ timeouts, ",
                      k->spin_timeouts, " polling timeouts");
    }
    if (e) {
      absl::StrAppend(&h, "<br>chosen <b>", EscapeHtml(DescribeWait(e->wait)), "</b>",
                      fit_evidence ? "" : " (priced on the samples it was fitted on)", ": ",
                      FormatDurationNs(e->expected.cpu_ns), " CPU + ",
                      FormatDurationNs(e->expected.latency_ns), " latency per request");
      if (e->default_wait) {
        absl::StrAppend(&h, "; driver default ", EscapeHtml(DescribeWait(*e->default_wait)), ": ",
                        FormatDurationNs(e->default_expected.cpu_ns), " CPU + ",
                        FormatDurationNs(e->default_expected.latency_ns), " latency");
      }
      if (!e->gain_baseline.empty()) {
        absl::StrAppend(&h, "<br>saving over ", EscapeHtml(e->gain_baseline), " ",
                        FormatSigned(e->gain_ns), " per request, 95% CI [",
                        FormatSigned(e->gain_ci_low_ns), ", ", FormatSigned(e->gain_ci_high_ns),
                        "]");
      }
    }
    absl::StrAppend(&h, "</p>", KeyChart(*k, e, t), "</section>\n");
  }

  absl::StrAppend(&h, "<h2>IRQ dispatch per CPU class</h2>\n");
  if (p.dispatch.empty()) {
    absl::StrAppend(&h, "<p class=\"meta\">No IRQ dispatch samples in this evidence.</p>\n");
  }
  for (const DispatchRecord& d : p.dispatch) {
    absl::StrAppend(&h, "<section class=\"dispatch\">", DispatchChart(d, t), "</section>\n");
  }
  AppendKnobs(p, options, &h);
  absl::StrAppend(&h, "</body></html>\n");
  return h;
}

}  // namespace spintune
