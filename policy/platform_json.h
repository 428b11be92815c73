// The platform JSON of `spintune tune` and of the agent's csv source
// (docs/csv-formats.md): the five platform costs at the top level for every
// CPU class not listed, optional per-class costs, optional devices with the
// driver's default rules.
#ifndef SPINTUNE_POLICY_PLATFORM_JSON_H_
#define SPINTUNE_POLICY_PLATFORM_JSON_H_

#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "policy/policy_table.h"

namespace spintune {

struct PlatformFile {
  std::string path;
  std::string board = "offline";
  uint64_t cpu_khz = 0;
  std::optional<PlatformCosts> costs;  // the top-level costs
  std::map<std::string, CpuClassInfo> cpu_classes;
  std::map<std::string, DeviceInfo> devices;

  // The listed class, else the top-level costs under that name.
  // InvalidArgument (naming the file) when neither exists.
  absl::StatusOr<CpuClassInfo> CpuClass(const std::string& name) const;
  // The listed device, else a bare one (no default rules).
  DeviceInfo Device(const std::string& name) const;
};

// NotFound when the file cannot be read; InvalidArgument naming the file and
// field for anything malformed.
absl::StatusOr<PlatformFile> ReadPlatformFile(const std::string& path);

}  // namespace spintune

#endif  // SPINTUNE_POLICY_PLATFORM_JSON_H_
