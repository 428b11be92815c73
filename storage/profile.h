// Profile: a named snapshot of one target's policy table and the evidence
// behind it (per-key completion histograms, per CPU class IRQ dispatch
// histograms) and its knob settings, with where it came from. Profiles are what users compare
// (diff), hand to colleagues (export/import), roll back to and render
// (report). The file form is the JSON of docs/profiles.md.
//
// Plain values and pure functions; thread-safe.
#ifndef SPINTUNE_STORAGE_PROFILE_H_
#define SPINTUNE_STORAGE_PROFILE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "models/latency_histogram.h"
#include "nlohmann/json.hpp"
#include "policy/policy_builder.h"
#include "policy/policy_table.h"
#include "storage/experiment_record.h"

namespace spintune {

inline constexpr char kProfileFormat[] = "spintune-profile";
inline constexpr int kProfileFormatVersion = 1;
// Largest profile file `spintune profiles import` reads.
inline constexpr uint64_t kMaxProfileFileBytes = 64ull << 20;

// IRQ dispatch histograms of one (CPU class, device).
struct DispatchRecord {
  std::string cpu_class;
  std::string device;
  LatencyHistogram handler;  // irq_handler_entry -> exit
  LatencyHistogram wake;     // hardware completion -> waiter running
};

struct ProfileInfo {
  std::string name;
  std::string target;           // agent id the table was taken from
  uint64_t source_version = 0;  // its policy version there (0: imported table)
  std::string created_at;       // RFC 3339 UTC
  std::string note;
  std::string tool_version;     // spintune version that saved it
  std::string parent;           // previous profile of the target ("" for none)
  uint64_t samples = 0;         // completion samples in the evidence
  uint64_t keys = 0;            // entries of the table that are not fallbacks
};

struct Profile {
  ProfileInfo info;
  PolicyTable table;
  std::vector<KeyEvidence> keys;
  std::vector<DispatchRecord> dispatch;
  // Knob settings in force on the target (docs/knobs.md); the file has a
  // "knobs" array only when there are some.
  std::vector<KnobSettingRecord> knobs;
};

// 1..64 characters of [A-Za-z0-9._-], not starting with '.' or '-'.
absl::Status ValidateProfileName(const std::string& name);

nlohmann::json ProfileToJson(const Profile& profile);
// Validates everything: format and version, names, the table (as policy
// JSON), every histogram bucket (a bucket's lower bound, increasing, counts
// >= 1, bounded totals), and that evidence names CPU classes and devices of
// the table. InvalidArgument naming the offending field.
absl::StatusOr<Profile> ProfileFromJson(const nlohmann::json& json);
absl::StatusOr<Profile> ParseProfileJson(const std::string& text);

// The "knobs" array of a profile file (docs/profiles.md); FromJson names
// the offending field after `where`.
nlohmann::json KnobSettingsToJson(const std::vector<KnobSettingRecord>& knobs);
absl::StatusOr<std::vector<KnobSettingRecord>> KnobSettingsFromJson(const nlohmann::json& arr,
                                                                   const std::string& where);

}  // namespace spintune

#endif  // SPINTUNE_STORAGE_PROFILE_H_
