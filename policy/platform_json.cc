#include "policy/platform_json.h"

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/status_macros.h"
#include "policy/policy_json.h"

namespace spintune {

using nlohmann::json;

absl::StatusOr<CpuClassInfo> PlatformFile::CpuClass(const std::string& name) const {
  auto it = cpu_classes.find(name);
  if (it != cpu_classes.end()) return it->second;
  if (costs) return CpuClassInfo{name, cpu_khz, *costs};
  return absl::InvalidArgumentError(absl::StrCat(
      path, ": no costs for cpu class '", name,
      "' (give irq_cpu_ns, irq_wake_ns, poll_read_ns, timer_cpu_ns, timer_wake_ns)"));
}

DeviceInfo PlatformFile::Device(const std::string& name) const {
  auto it = devices.find(name);
  return it != devices.end() ? it->second : DeviceInfo{name, "", "", {}};
}

absl::StatusOr<PlatformFile> ReadPlatformFile(const std::string& path) {
  SPINTUNE_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) return absl::InvalidArgumentError(absl::StrCat(path, ": not valid JSON"));
  if (!j.is_object()) return absl::InvalidArgumentError(absl::StrCat(path, ": must be an object"));
  auto fail = [&](absl::string_view message) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", message));
  };
  PlatformFile p;
  p.path = path;
  if (j.contains("board")) {
    if (!j["board"].is_string()) return fail("board must be a string");
    p.board = j["board"].get<std::string>();
  }
  if (j.contains("cpu_khz")) {
    if (!j["cpu_khz"].is_number_unsigned()) return fail("cpu_khz must be a non-negative integer");
    p.cpu_khz = j["cpu_khz"].get<uint64_t>();
  }
  if (j.contains("irq_cpu_ns")) {
    auto costs = CostsFromJson(j, "platform");
    if (!costs.ok()) return fail(costs.status().message());
    p.costs = *costs;
  }
  if (j.contains("cpu_classes")) {
    if (!j["cpu_classes"].is_array()) return fail("cpu_classes must be an array");
    for (size_t i = 0; i < j["cpu_classes"].size(); ++i) {
      const json& cj = j["cpu_classes"][i];
      const std::string where = absl::StrCat("cpu_classes[", i, "]");
      if (!cj.is_object() || !cj.contains("name") || !cj["name"].is_string()) {
        return fail(where + ".name: missing");
      }
      CpuClassInfo c;
      c.name = cj["name"].get<std::string>();
      auto costs = CostsFromJson(cj, where);
      if (!costs.ok()) return fail(costs.status().message());
      c.costs = *costs;
      if (cj.contains("cpu_khz") && cj["cpu_khz"].is_number_unsigned()) {
        c.cpu_khz = cj["cpu_khz"].get<uint64_t>();
      }
      p.cpu_classes[c.name] = c;
    }
  }
  if (j.contains("devices")) {
    if (!j["devices"].is_array()) return fail("devices must be an array");
    for (size_t i = 0; i < j["devices"].size(); ++i) {
      const json& dj = j["devices"][i];
      const std::string where = absl::StrCat("devices[", i, "]");
      if (!dj.is_object() || !dj.contains("name") || !dj["name"].is_string()) {
        return fail(where + ".name: missing");
      }
      DeviceInfo d;
      d.name = dj["name"].get<std::string>();
      d.driver = dj.value("driver", std::string());
      d.model = dj.value("model", std::string());
      if (dj.contains("default_rules")) {
        auto rules = DefaultRulesFromJson(dj["default_rules"], where + ".default_rules");
        if (!rules.ok()) return fail(rules.status().message());
        d.default_rules = std::move(*rules);
      }
      auto writes = WriteOpcodesFromJson(dj, where);
      if (!writes.ok()) return fail(writes.status().message());
      d.write_opcodes = std::move(*writes);
      p.devices[d.name] = std::move(d);
    }
  }
  return p;
}

}  // namespace spintune
