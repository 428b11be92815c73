#include "cli/verify_command.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/table_format.h"
#include "common/file_util.h"
#include "common/status_macros.h"
#include "models/cost_moments.h"
#include "nlohmann/json.hpp"
#include "policy/outcome_report.h"

namespace spintune {
namespace {

using json = nlohmann::json;

struct ReportKey {
  std::string cpu_class;
  uint32_t opcode;
  uint32_t size_class;
  friend bool operator<(const ReportKey& a, const ReportKey& b) {
    return std::tie(a.cpu_class, a.opcode, a.size_class) <
           std::tie(b.cpu_class, b.opcode, b.size_class);
  }
};

struct Report {
  OutcomeReport file;
  std::map<ReportKey, std::pair<uint64_t, CostMoments>> keys;  // key -> (bytes, moments)
};

absl::StatusOr<Report> ReadReport(const std::string& path) {
  Report r;
  SPINTUNE_ASSIGN_OR_RETURN(r.file, ReadOutcomeReport(path));
  for (const auto& k : r.file.keys) {
    r.keys[{k.cpu_class, k.opcode, k.size_class}] = {k.bytes, k.moments};
  }
  return r;
}

// spintune.ko's reports name a CPU class by its index in the blob
// ("default", "classN": OutcomeCpuClassIndex); the table's own name for it,
// so that its keys meet the table's.
void NameKernelClasses(const PolicyTable& table, Report* r) {
  std::vector<std::string> names;
  for (const auto& c : table.cpu_classes) names.push_back(c.name);
  std::map<ReportKey, std::pair<uint64_t, CostMoments>> named;
  for (auto& [key, value] : r->keys) {
    ReportKey k = key;
    const int index = OutcomeCpuClassIndex(k.cpu_class, names);
    if (index >= 0) k.cpu_class = names[index];
    named.emplace(k, std::move(value));
  }
  r->keys = std::move(named);
}

json Measured(const CostMoments& m, double lambda) {
  const CostInterval i = m.Interval(lambda);
  return {{"cpu_ns", m.MeanCpuNs()},   {"latency_ns", m.MeanLatencyNs()}, {"cost_ns", i.mean_ns},
          {"cost_low_ns", i.low_ns},   {"cost_high_ns", i.high_ns},      {"requests", m.requests}};
}

}  // namespace

absl::Status RunVerify(const Repository& repo, const VerifyFlags& flags, std::ostream& out) {
  if (flags.format != "table" && flags.format != "json") {
    return absl::InvalidArgumentError("--format: table or json");
  }
  std::map<std::string, Report> reports;  // by mode
  for (const auto& spec : flags.reports) {
    const size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--report ", spec, ": MODE=FILE (e.g. table=run.json)"));
    }
    SPINTUNE_ASSIGN_OR_RETURN(reports[spec.substr(0, eq)], ReadReport(spec.substr(eq + 1)));
  }
  if (reports.count("table") == 0) {
    return absl::InvalidArgumentError("--report table=FILE is required (the table's own run)");
  }
  const Report& mine = reports["table"];
  // By default the version the table's run waited by.
  TableSource source = flags.source;
  const uint64_t waited_by = mine.file.policy_version;
  if (!source.target.empty() && waited_by > 0) {
    if (source.version == 0) source.version = waited_by;
    if (source.version != waited_by) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "the table's run waited by version %d, not version %d", waited_by, source.version));
    }
  }
  SPINTUNE_ASSIGN_OR_RETURN(PolicyTable table, LoadTable(repo, source));
  for (auto& [mode, r] : reports) NameKernelClasses(table, &r);
  const double lambda = table.latency_weight;
  json keys = json::array();
  std::vector<std::vector<std::string>> rows = {
      {"OPCODE", "BYTES", "WAIT", "PREDICTED J", "MEASURED J (95%)", "BEST FIXED J", "TABLE/FIXED",
       "|PRED-MEAS|/MEAS"}};
  for (const auto& [key, bytes_moments] : mine.keys) {
    const PolicyKey pk{key.cpu_class, mine.file.device, key.opcode, key.size_class};
    const PolicyEntry* entry = table.EntryFor(pk);
    if (entry == nullptr) continue;
    json measured = json::object();
    double best_fixed = 0;
    std::string best_mode;
    for (const auto& [mode, r] : reports) {
      auto it = r.keys.find(key);
      if (it == r.keys.end()) continue;
      measured[mode] = Measured(it->second.second, lambda);
      const double j = it->second.second.MeanCostNs(lambda);
      if (mode != "table" && (best_mode.empty() || j < best_fixed)) {
        best_fixed = j;
        best_mode = mode;
      }
    }
    const double meas = bytes_moments.second.MeanCostNs(lambda);
    const double pred = entry->expected_cost_ns;
    json k = {{"opcode", key.opcode},
              {"bytes", bytes_moments.first},
              {"size_class", key.size_class},
              {"strategy", DescribeWait(entry->wait)},
              {"predicted",
               {{"cpu_ns", entry->expected.cpu_ns},
                {"latency_ns", entry->expected.latency_ns},
                {"cost_ns", pred}}},
              {"measured", measured},
              {"prediction_error", meas > 0 ? std::abs(pred - meas) / meas : 0}};
    if (!best_mode.empty()) {
      k["best_fixed"] = best_mode;
      k["table_over_best_fixed"] = meas / best_fixed;
    }
    rows.push_back({absl::StrCat(key.opcode), absl::StrCat(bytes_moments.first),
                    DescribeWait(entry->wait), FormatDurationNs(pred),
                    absl::StrCat(FormatDurationNs(meas), " [",
                                 FormatDurationNs(bytes_moments.second.Interval(lambda).low_ns),
                                 ", ",
                                 FormatDurationNs(bytes_moments.second.Interval(lambda).high_ns),
                                 "]"),
                    best_mode.empty() ? "-" : absl::StrCat(FormatDurationNs(best_fixed), " (",
                                                           best_mode, ")"),
                    best_mode.empty() ? "-" : absl::StrFormat("%.3f", meas / best_fixed),
                    absl::StrFormat("%.1f%%", 100 * k["prediction_error"].get<double>())});
    keys.push_back(std::move(k));
  }
  const json doc = {{"latency_weight", lambda}, {"table_version", table.version}, {"keys", keys}};
  if (!flags.output.empty()) {
    SPINTUNE_RETURN_IF_ERROR(WriteFileAtomically(flags.output, doc.dump(2) + "\n"));
  }
  if (flags.format == "json") {
    out << doc.dump(2) << "\n";
  } else {
    out << absl::StrFormat("Table version %d (latency weight %g) against the driver's runs:\n",
                           table.version, lambda)
        << RenderColumns(rows);
  }
  return absl::OkStatus();
}

}  // namespace spintune
