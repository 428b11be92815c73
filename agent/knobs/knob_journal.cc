#include "agent/knobs/knob_journal.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "nlohmann/json.hpp"

namespace spintune {
namespace {

constexpr char kFormat[] = "spintune-knob-journal";

absl::Status Corrupt(const std::string& path, const std::string& why) {
  return absl::DataLossError(absl::StrCat(path, ": not a knob journal (", why,
                                          "); remove it after checking the knobs by hand"));
}

bool ReadMap(const nlohmann::json& j, const char* key, std::map<std::string, std::string>* out) {
  if (!j.contains(key)) return true;
  if (!j[key].is_object()) return false;
  for (const auto& [name, value] : j[key].items()) {
    if (!value.is_string()) return false;
    (*out)[name] = value.get<std::string>();
  }
  return true;
}

}  // namespace

absl::StatusOr<KnobJournalState> LoadKnobJournal(const std::string& path) {
  KnobJournalState state;
  if (!PathExists(path)) return state;
  auto text = ReadFileToString(path, 1 << 20);
  if (!text.ok()) return Corrupt(path, std::string(text.status().message()));
  const nlohmann::json j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || j.value("format", "") != kFormat) {
    return Corrupt(path, "format");
  }
  if (!j.contains("experiment_id") || !j["experiment_id"].is_number_unsigned() ||
      !j.contains("declaration") || !j["declaration"].is_string() ||
      !ReadMap(j, "baseline", &state.baseline) || !ReadMap(j, "applied", &state.applied)) {
    return Corrupt(path, "fields");
  }
  state.experiment_id = j["experiment_id"].get<uint64_t>();
  state.declaration = j["declaration"].get<std::string>();
  return state;
}

absl::Status SaveKnobJournal(const std::string& path, const KnobJournalState& state) {
  if (state.empty()) {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      return absl::UnavailableError(absl::StrCat(path, ": ", std::strerror(errno)));
    }
    return absl::OkStatus();
  }
  const nlohmann::json j{{"format", kFormat},
                         {"declaration", state.declaration},
                         {"experiment_id", state.experiment_id},
                         {"baseline", state.baseline},
                         {"applied", state.applied}};
  return WriteFileAtomically(path, j.dump(2) + "\n", 0600);
}

}  // namespace spintune
