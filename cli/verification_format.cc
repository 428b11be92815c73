#include "cli/verification_format.h"

#include "absl/strings/str_cat.h"
#include "cli/table_format.h"

namespace spintune {

std::string RenderVerifications(const std::vector<VerificationRecord>& verifications) {
  std::vector<std::vector<std::string>> rows = {{"VERSION", "DEVICE", "CPU", "OPCODE", "SIZE",
                                                 "PREDICTED", "MEASURED (95%)", "REQUESTS",
                                                 "BEFORE (95%)", "VERDICT", "ROLLED BACK IN"}};
  auto interval = [](const CostInterval& i) {
    return absl::StrCat(FormatDurationNs(i.mean_ns), " [", FormatDurationNs(i.low_ns), ", ",
                        FormatDurationNs(i.high_ns), "]");
  };
  for (const auto& v : verifications) {
    rows.push_back({absl::StrCat(v.version), v.key.device, v.key.cpu_class,
                    absl::StrCat(v.key.opcode), FormatSizeClass(v.key.size_class),
                    FormatDurationNs(v.predicted_cost_ns), interval(v.measured),
                    absl::StrCat(v.requests),
                    absl::StrCat("v", v.incumbent_version, " ", interval(v.incumbent)), v.VerdictLabel(),
                    v.rollback_version ? absl::StrCat("v", v.rollback_version) : "-"});
  }
  return "Verified against the driver's measurements (cost J per request; BEFORE: the version\n"
         "in force before, v0 = the driver's default rule; (A/B): against the incumbent arm\n"
         "of the same version, measured in the same window):\n" +
         RenderColumns(rows);
}

nlohmann::json VerificationsToJson(const std::vector<VerificationRecord>& verifications) {
  nlohmann::json out = nlohmann::json::array();
  auto interval = [](const CostInterval& i) {
    return nlohmann::json{{"cost_ns", i.mean_ns}, {"low_ns", i.low_ns}, {"high_ns", i.high_ns}};
  };
  for (const auto& v : verifications) {
    out.push_back({{"version", v.version},
                   {"cpu_class", v.key.cpu_class},
                   {"device", v.key.device},
                   {"opcode", v.key.opcode},
                   {"size_class", v.key.size_class},
                   {"verdict", v.verdict},
                   {"method", v.method},
                   {"predicted_cost_ns", v.predicted_cost_ns},
                   {"measured", interval(v.measured)},
                   {"requests", v.requests},
                   {"incumbent_version", v.incumbent_version},
                   {"incumbent", interval(v.incumbent)},
                   {"rollback_version", v.rollback_version},
                   {"reason", v.reason},
                   {"decided_at", v.decided_at}});
  }
  return out;
}

}  // namespace spintune
