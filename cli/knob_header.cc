#include "cli/knob_header.h"

#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace spintune {
namespace {

// The evidence in comment lines of at most ~100 characters.
std::vector<std::string> Evidence(const KnobSettingRecord& k) {
  std::vector<std::string> lines = {
      absl::StrCat(k.declaration, ": ", k.coordinate, " = ", k.label,
                   k.experiment_id ? absl::StrCat(", found by experiment ", k.experiment_id)
                                   : std::string(),
                   k.updated_at.empty() ? "" : " (" + k.updated_at + ")")};
  std::string rest = k.evidence;
  while (!rest.empty()) {
    size_t cut = rest.size() <= 100 ? rest.size() : rest.rfind(' ', 100);
    if (cut == std::string::npos || cut == 0) cut = std::min<size_t>(rest.size(), 100);
    lines.push_back(rest.substr(0, cut));
    rest = rest.substr(std::min(rest.size(), cut + 1));
  }
  return lines;
}

}  // namespace

std::vector<HeaderDefine> KnobHeaderDefines(const std::vector<KnobSettingRecord>& knobs) {
  std::map<std::string, int> uses;  // coordinate -> declarations having it
  for (const auto& k : knobs) ++uses[k.coordinate];
  std::vector<HeaderDefine> out;
  struct Register {
    uint64_t mask = 0, value = 0;
    std::vector<std::string> fields;
    const KnobSettingRecord* first = nullptr;
  };
  std::map<std::pair<std::string, std::string>, Register> registers;
  std::vector<std::pair<std::string, std::string>> register_order;
  for (const auto& k : knobs) {
    const std::string name =
        absl::StrCat("SPINTUNE_KNOB_", uses[k.coordinate] > 1 ? k.declaration + "_" : "",
                     k.coordinate);
    const bool numeric = k.label == absl::StrCat(k.value);
    out.push_back({name, numeric ? absl::StrCat(k.value) : "\"" + SanitizeText(k.label) + "\"",
                   Evidence(k)});
    if (k.register_name.empty() || k.width == 0 || k.width > 63) continue;
    const auto key = std::make_pair(k.declaration, k.register_name);
    Register& r = registers[key];
    if (r.first == nullptr) {
      r.first = &k;
      register_order.push_back(key);
    }
    const uint64_t field = (uint64_t{1} << k.width) - 1;
    r.mask |= field << k.shift;
    r.value |= (static_cast<uint64_t>(k.value) & field) << k.shift;
    r.fields.push_back(k.coordinate + "=" + k.label);
  }
  for (const auto& key : register_order) {
    const Register& r = registers[key];
    std::string fields;
    for (const auto& f : r.fields) absl::StrAppend(&fields, fields.empty() ? "" : ", ", f);
    const std::string base = absl::StrCat("SPINTUNE_KNOB_", key.second);
    out.push_back({base + "_MASK",
                   absl::StrFormat("0x%08xu", r.mask),
                   {absl::StrCat(key.first, ": ", fields),
                    absl::StrCat("set with (", key.second, " & ~", base, "_MASK) | ", base,
                                 "_VALUE")}});
    out.push_back({base + "_VALUE", absl::StrFormat("0x%08xu", r.value), {}});
  }
  return out;
}

}  // namespace spintune
