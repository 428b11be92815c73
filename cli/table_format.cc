#include "cli/table_format.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "policy/default_rule.h"

namespace spintune {

std::string FormatSigned(double ns) {
  return ns < 0 ? "-" + FormatDurationNs(-ns) : FormatDurationNs(ns);
}

std::string FormatSizeClass(uint32_t size_class) {
  const uint64_t bytes = SizeClassLowerBytes(size_class);
  if (bytes == 0) return "0";
  if (bytes >= (uint64_t{1} << 20) && bytes % (uint64_t{1} << 20) == 0) {
    return absl::StrCat(bytes >> 20, "MiB");
  }
  if (bytes >= 1024 && bytes % 1024 == 0) return absl::StrCat(bytes >> 10, "KiB");
  return absl::StrCat(bytes, "B");
}

std::string RenderColumns(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    if (width.size() < row.size()) width.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      absl::StrAppend(&line, row[i]);
      if (i + 1 < row.size()) line.append(width[i] - row[i].size() + 2, ' ');
    }
    absl::StrAppend(&out, line, "\n");
  }
  return out;
}

std::string RenderPolicyTable(const PolicyTable& t) {
  // A CONTEXT column only for tables with context leaves.
  const bool context = ContextLeafCount(t) > 0;
  std::vector<std::vector<std::string>> rows = {
      {"DEVICE", "CPU", "OPCODE", "SIZE", "SAMPLES", "P50", "P99", "CHOSEN", "CPU/REQ",
       "LAT/REQ", "DEFAULT", "DEF CPU", "DEF LAT", "SAVING", "GAIN/REQ [95% CI]"}};
  if (context) rows[0].insert(rows[0].begin() + 4, "CONTEXT");
  for (const auto& e : t.entries) {
    std::vector<std::string> r = {
        e.key.device,
        e.fallback ? "*" : e.key.cpu_class,
        e.fallback ? "*" : absl::StrCat(e.key.opcode),
        e.fallback ? "*" : FormatSizeClass(e.key.size_class)};
    if (context) r.push_back(DescribeContext(e.context));
    r.insert(r.end(), {
        absl::StrCat(e.samples),
        e.samples ? FormatDurationNs(e.p50_ns) : "-",
        e.samples ? FormatDurationNs(e.p99_ns) : "-",
        DescribeWait(e.wait),
        e.families.empty() ? "-" : FormatDurationNs(e.expected.cpu_ns),
        e.families.empty() ? "-" : FormatDurationNs(e.expected.latency_ns)});
    if (e.default_wait) {
      r.push_back(DescribeWait(*e.default_wait));
      r.push_back(FormatDurationNs(e.default_expected.cpu_ns));
      r.push_back(FormatDurationNs(e.default_expected.latency_ns));
      double saving = e.default_cost_ns > 0
                          ? 100.0 * (e.default_cost_ns - e.expected_cost_ns) / e.default_cost_ns
                          : 0.0;
      if (std::fabs(saving) < 0.05) saving = 0.0;  // no "-0.0%"
      r.push_back(e.default_cost_ns > 0 ? absl::StrFormat("%.1f%%", saving) : "-");
    } else {
      r.insert(r.end(), {"-", "-", "-", "-"});
    }
    r.push_back(e.gain_baseline.empty()
                    ? "-"
                    : absl::StrCat(FormatSigned(e.gain_ns), " [", FormatSigned(e.gain_ci_low_ns),
                                   ", ", FormatSigned(e.gain_ci_high_ns), "]",
                                   e.gain_baseline == "irq" ? " vs irq" : ""));
    rows.push_back(std::move(r));
  }
  std::string out = absl::StrFormat(
      "board %s, table version %d, objective %s (latency weight %g), max spin %s, %d samples%s\n",
      t.board, t.version, t.objective_name, t.latency_weight,
      FormatDurationNs(static_cast<double>(t.max_spin_ns)), t.TotalSamples(),
      t.robustness_rho > 0 ? absl::StrFormat(", robustness rho %g", t.robustness_rho) : "");
  for (const auto& c : t.cpu_classes) {
    absl::StrAppend(&out, absl::StrFormat(
                              "  cpu %s: irq_cpu %s, irq_wake %s, poll_read %s, timer_cpu %s, "
                              "timer_wake %s\n",
                              c.name, FormatDurationNs(c.costs.irq_cpu_ns),
                              FormatDurationNs(c.costs.irq_wake_ns),
                              FormatDurationNs(c.costs.poll_read_ns),
                              FormatDurationNs(c.costs.timer_cpu_ns),
                              FormatDurationNs(c.costs.timer_wake_ns)));
  }
  absl::StrAppend(&out, RenderColumns(rows));
  return out;
}

std::string RenderFamilies(const PolicyTable& t) {
  std::vector<std::vector<std::string>> rows = {
      {"DEVICE", "CPU", "OPCODE", "SIZE", "IRQ", "SPIN", "SPIN_THEN_IRQ", "SLEEP_THEN_SPIN",
       "POLL_SLEEP"}};
  for (const auto& e : t.entries) {
    if (e.families.empty()) continue;
    std::vector<std::string> r = {e.key.device, e.fallback ? "*" : e.key.cpu_class,
                                  e.fallback ? "*" : absl::StrCat(e.key.opcode),
                                  e.fallback ? "*" : FormatSizeClass(e.key.size_class)};
    for (const auto& f : e.families) {
      if (!f.feasible) {
        r.push_back("-");
        continue;
      }
      std::string cell = FormatDurationNs(f.cost_ns);
      const std::string param = DescribeWait(f.params);
      const size_t eq = param.find('=');
      if (eq != std::string::npos) absl::StrAppend(&cell, " (", param.substr(eq + 1), ")");
      if (f.params == e.wait || (f.strategy == e.wait.strategy && f.cost_ns == e.expected_cost_ns)) {
        absl::StrAppend(&cell, " *");
      }
      r.push_back(cell);
    }
    rows.push_back(std::move(r));
  }
  return "Cost J per request of the best candidate of each strategy family (* = chosen;\n"
         "- = excluded, infeasible, or pruned because its lower bound cannot win):\n" +
         RenderColumns(rows);
}

}  // namespace spintune
