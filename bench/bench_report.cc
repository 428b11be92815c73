#include "bench/bench_report.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/table_format.h"

namespace spintune {
namespace {

constexpr double kStationaryLimit = 1.02;
constexpr double kShiftingLimit = 1.05;
constexpr double kPeerMargin = 0.005;

const std::map<std::string, std::string>& Abbreviations() {
  static const std::map<std::string, std::string> kAbbrev = {
      {"spintune", "ST"},        {"spintune-online", "ST-on"}, {"always-irq", "irq"},
      {"always-spin", "spin"},   {"poll-5us", "poll5"},        {"spin-150us-irq", "s150"},
      {"karlin-det", "k-det"},   {"karlin-rand", "k-rnd"},     {"blk-mq-hybrid", "blkmq"},
      {"io_uring-hybrid", "iour"}, {"kvm-halt-poll", "kvm"},   {"cpuidle-haltpoll", "chp"},
      {"dpas-pas", "dpas"},      {"litex-upstream", "litex"},  {"mxs-mmc-vendor", "mxs"}};
  return kAbbrev;
}

std::string Ratio(const PolicyResult& p) {
  std::string s = p.vs_best_static >= 99.995 ? ">99" : absl::StrFormat("%.3f", p.vs_best_static);
  if (p.vs_best_static >= 9.9995 && p.vs_best_static < 99.995) {
    s = absl::StrFormat("%.1f", p.vs_best_static);
  }
  if (!p.feasible) s += "*";
  if (!p.within_spin_cap) s += "!";
  return s;
}

std::string Samples(long n) {
  if (n == -2) return "-";
  if (n == -1) return "never";
  return absl::StrCat(n);
}

}  // namespace

std::vector<Violation> CheckResults(const std::vector<ScenarioResult>& results) {
  std::vector<Violation> v;
  for (const auto& r : results) {
    const PolicyResult& st = r.Spintune();
    const double limit = r.shifting ? kShiftingLimit : kStationaryLimit;
    if (st.vs_best_static > limit) {
      v.push_back({r.name, absl::StrFormat("%s J = %.4f x best static (limit %.2f)", st.name,
                                           st.vs_best_static, limit)});
    }
    if (!st.feasible) v.push_back({r.name, st.name + " breaks the latency cap"});
    if (!st.within_spin_cap) v.push_back({r.name, st.name + " spins longer than max_spin_ns"});
    for (const auto& p : r.policies) {
      if (p.name == "spintune" || p.name == "spintune-online" || !p.feasible ||
          !p.within_spin_cap) {
        continue;
      }
      if (p.j_ns < st.j_ns * (1 - kPeerMargin)) {
        v.push_back({r.name, absl::StrFormat("%s beats %s by %.2f%%", p.name, st.name,
                                             100 * (1 - p.j_ns / st.j_ns))});
      }
    }
  }
  return v;
}

std::string RenderResults(const std::vector<ScenarioResult>& results) {
  if (results.empty()) return "no scenarios\n";
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> header = {"SCENARIO", "J* (best static)"};
  for (const auto& p : results[0].policies) header.push_back(Abbreviations().at(p.name));
  header.insert(header.end(), {"ST/OPT", "n2%", "SPINTUNE CHOSE"});
  rows.push_back(header);
  for (const auto& r : results) {
    std::vector<std::string> row = {r.name, FormatDurationNs(r.best_static_j)};
    for (const auto& p : r.policies) row.push_back(Ratio(p));
    const PolicyResult& st = r.Spintune();
    row.push_back(absl::StrFormat("%.3f", st.vs_clairvoyant));
    row.push_back(Samples(st.samples_to_2pct));
    row.push_back(r.shifting ? "(online)" : r.spintune_choice);
    rows.push_back(std::move(row));
  }
  std::string out =
      "J of every policy as a ratio to the best static policy in hindsight (on the evaluated\n"
      "part: after the 5,000 training samples, or the whole shifting stream against the best\n"
      "static policy of each segment). * = breaks the latency cap of the cpu objective (l0);\n"
      "! = busy-waits longer than the 10 ms spin cap (both excluded from the checks).\n"
      "ST/OPT = spintune's J over the clairvoyant's; n2% = training samples spintune needed\n"
      "to be within 2% of the best static policy.\n\n";
  absl::StrAppend(&out, RenderColumns(rows));

  // Per policy summary.
  std::vector<std::vector<std::string>> sum = {
      {"POLICY", "SCENARIOS", "GEOMEAN", "WORST", "VS OPT (geomean)", "BEATS SPINTUNE >0.5%",
       "LEARNS IN (median n2%)"}};
  for (size_t i = 0; i < results[0].policies.size(); ++i) {
    const std::string name = results[0].policies[i].name;
    double log_sum = 0, log_opt = 0, worst = 0;
    int count = 0, wins = 0;
    std::vector<long> learn;
    for (const auto& r : results) {
      const PolicyResult& p = r.policies[i];
      log_sum += std::log(p.vs_best_static);
      log_opt += std::log(p.vs_clairvoyant);
      worst = std::max(worst, p.vs_best_static);
      ++count;
      const PolicyResult& st = r.Spintune();
      if (&p != &st && p.feasible && p.within_spin_cap && p.j_ns < st.j_ns * (1 - kPeerMargin)) {
        ++wins;
      }
      if (p.samples_to_2pct >= 0) learn.push_back(p.samples_to_2pct);
    }
    std::sort(learn.begin(), learn.end());
    sum.push_back({name, absl::StrCat(count), absl::StrFormat("%.3f", std::exp(log_sum / count)),
                   absl::StrFormat("%.3f", worst), absl::StrFormat("%.3f", std::exp(log_opt / count)),
                   name.rfind("spintune", 0) == 0 ? "-" : absl::StrCat(wins),
                   learn.empty() ? "-" : absl::StrCat(learn[learn.size() / 2])});
  }
  absl::StrAppend(&out, "\nSummary over all scenarios (ratios to best static in hindsight):\n",
                  RenderColumns(sum));
  const auto violations = CheckResults(results);
  absl::StrAppend(&out, "\nChecks: ", violations.empty() ? "all passed" : "VIOLATIONS", "\n");
  for (const auto& v : violations) absl::StrAppend(&out, "  ", v.scenario, ": ", v.what, "\n");
  return out;
}

nlohmann::json ResultsToJson(const std::vector<ScenarioResult>& results) {
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& r : results) {
    nlohmann::json pol = nlohmann::json::array();
    for (const auto& p : r.policies) {
      pol.push_back({{"name", p.name},
                     {"adaptive", p.adaptive},
                     {"j_ns", p.j_ns},
                     {"cpu_ns", p.cpu_ns},
                     {"latency_ns", p.latency_ns},
                     {"feasible", p.feasible},
                     {"within_spin_cap", p.within_spin_cap},
                     {"vs_best_static", p.vs_best_static},
                     {"vs_clairvoyant", p.vs_clairvoyant},
                     {"samples_to_2pct", p.samples_to_2pct >= 0 ? nlohmann::json(p.samples_to_2pct)
                                                               : nlohmann::json(nullptr)}});
    }
    arr.push_back({{"scenario", r.name},
                   {"family", r.family},
                   {"latency_weight", r.lambda},
                   {"shifting", r.shifting},
                   {"best_static_j_ns", r.best_static_j},
                   {"best_static", r.best_static},
                   {"clairvoyant_j_ns", r.clairvoyant_j},
                   {"spintune_choice", r.spintune_choice},
                   {"policies", pol}});
  }
  nlohmann::json v = nlohmann::json::array();
  for (const auto& x : CheckResults(results)) v.push_back({{"scenario", x.scenario}, {"what", x.what}});
  return {{"scenarios", arr}, {"violations", v}};
}

}  // namespace spintune
