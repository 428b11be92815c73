#include "policy/outcome_report.h"

#include <algorithm>
#include <set>
#include <tuple>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/file_util.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "policy/json_fields.h"

namespace spintune {

absl::StatusOr<OutcomeReport> ReadOutcomeReport(const std::string& path) {
  SPINTUNE_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path, 64 << 20));
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a JSON object"));
  }
  if (j.value("format", "") != "spintune-outcomes" || j.value("format_version", 0) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not an outcome report (format spintune-outcomes, version 1)"));
  }
  OutcomeReport r;
  SPINTUNE_ASSIGN_OR_RETURN(r.device, GetString(j, "device", path));
  if (r.device.empty()) return FieldError(path + ".device", "must not be empty");
  SPINTUNE_ASSIGN_OR_RETURN(r.mode, GetString(j, "mode", path, /*required=*/false));
  SPINTUNE_ASSIGN_OR_RETURN(r.policy_version,
                            GetUint(j, "policy_version", path, UINT64_MAX, /*required=*/false));
  if (!j.contains("keys") || !j["keys"].is_array()) {
    return FieldError(path + ".keys", "must be an array");
  }
  std::set<std::tuple<std::string, uint32_t, uint32_t, OutcomeArm>> seen;
  for (size_t i = 0; i < j["keys"].size(); ++i) {
    const nlohmann::json& k = j["keys"][i];
    const std::string where = absl::StrCat(path, ": keys[", i, "]");
    if (!k.is_object()) return FieldError(where, "not an object");
    OutcomeReportKey key;
    SPINTUNE_ASSIGN_OR_RETURN(key.cpu_class, GetString(k, "cpu_class", where, false));
    if (key.cpu_class.empty()) key.cpu_class = "default";
    SPINTUNE_ASSIGN_OR_RETURN(uint64_t opcode, GetUint(k, "opcode", where, 0xFFFFFFFEu));
    SPINTUNE_ASSIGN_OR_RETURN(uint64_t size_class, GetUint(k, "size_class", where, 64));
    key.opcode = static_cast<uint32_t>(opcode);
    key.size_class = static_cast<uint32_t>(size_class);
    SPINTUNE_ASSIGN_OR_RETURN(key.bytes, GetUint(k, "bytes", where, UINT64_MAX));
    SPINTUNE_ASSIGN_OR_RETURN(std::string arm, GetString(k, "arm", where, /*required=*/false));
    if (arm == "incumbent") {
      key.arm = OutcomeArm::kIncumbent;
    } else if (!arm.empty() && arm != "table") {
      return FieldError(where + ".arm", "must be \"table\" or \"incumbent\"");
    }
    CostMoments& m = key.moments;
    SPINTUNE_ASSIGN_OR_RETURN(m.requests, GetUint(k, "requests", where, UINT64_MAX));
    if (m.requests == 0) return FieldError(where + ".requests", "must be >= 1");
    SPINTUNE_ASSIGN_OR_RETURN(m.cpu_ns_sum, GetDouble(k, "cpu_ns_sum", where));
    SPINTUNE_ASSIGN_OR_RETURN(m.latency_ns_sum, GetDouble(k, "latency_ns_sum", where));
    SPINTUNE_ASSIGN_OR_RETURN(m.cpu_ns_sq_sum, GetDouble(k, "cpu_ns_sq_sum", where));
    SPINTUNE_ASSIGN_OR_RETURN(m.latency_ns_sq_sum, GetDouble(k, "latency_ns_sq_sum", where));
    SPINTUNE_ASSIGN_OR_RETURN(m.cpu_latency_ns_sum, GetDouble(k, "cpu_latency_ns_sum", where));
    if (!seen.insert({key.cpu_class, key.opcode, key.size_class, key.arm}).second) {
      return FieldError(where, "the same cpu_class, opcode, size_class and arm twice");
    }
    r.keys.push_back(std::move(key));
  }
  return r;
}

int OutcomeCpuClassIndex(absl::string_view name, const std::vector<std::string>& class_names) {
  for (size_t i = 0; i < class_names.size(); ++i) {
    if (class_names[i] == name) return static_cast<int>(i);
  }
  int index = -1;
  if (name == "default") {
    index = 0;
  } else if (absl::ConsumePrefix(&name, "class") && !name.empty() && name.size() <= 3 &&
             std::all_of(name.begin(), name.end(), absl::ascii_isdigit)) {
    absl::SimpleAtoi(name, &index);
  }
  return index < static_cast<int>(class_names.size()) ? index : -1;
}

}  // namespace spintune
