// Store: named profiles (storage/profile.h, docs/profiles.md).
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "storage/store.h"
#include "storage/store_rows.h"

namespace spintune {
namespace {

using store_rows::I;
using store_rows::U;

}  // namespace

absl::Status Store::SaveProfile(const Profile& p) {
  SPINTUNE_RETURN_IF_ERROR(ValidateProfileName(p.info.name));
  const std::string text = ProfileToJson(p).dump();
  absl::MutexLock lock(&mu_);
  SPINTUNE_ASSIGN_OR_RETURN(
      auto q, db_->Prepare("INSERT INTO profiles VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"));
  q->Bind(1, p.info.name).Bind(2, p.info.target).Bind(3, I(p.info.source_version));
  q->Bind(4, p.info.created_at).Bind(5, p.info.note).Bind(6, p.info.tool_version);
  q->Bind(7, p.info.parent).Bind(8, I(p.info.samples)).Bind(9, I(p.info.keys)).Bind(10, text);
  absl::Status s = q->Run();
  if (absl::IsAlreadyExists(s)) {
    return absl::AlreadyExistsError(absl::StrCat(
        "a profile named '", p.info.name, "' exists (spintune profiles delete, or pick a name)"));
  }
  return s;
}

absl::StatusOr<std::vector<ProfileInfo>> Store::ListProfiles() {
  absl::MutexLock lock(&mu_);
  SPINTUNE_ASSIGN_OR_RETURN(
      auto q, db_->Prepare("SELECT name, target, source_version, created_at, note, tool_version, "
                           "parent, samples, keys FROM profiles ORDER BY created_at, name"));
  std::vector<ProfileInfo> out;
  while (true) {
    SPINTUNE_ASSIGN_OR_RETURN(bool row, q->Step());
    if (!row) break;
    ProfileInfo p;
    p.name = q->ColumnText(0);
    p.target = q->ColumnText(1);
    p.source_version = U(q->ColumnInt(2));
    p.created_at = q->ColumnText(3);
    p.note = q->ColumnText(4);
    p.tool_version = q->ColumnText(5);
    p.parent = q->ColumnText(6);
    p.samples = U(q->ColumnInt(7));
    p.keys = U(q->ColumnInt(8));
    out.push_back(std::move(p));
  }
  return out;
}

absl::StatusOr<Profile> Store::LoadProfile(const std::string& name) {
  absl::MutexLock lock(&mu_);
  SPINTUNE_ASSIGN_OR_RETURN(auto q,
                            db_->Prepare("SELECT profile_json FROM profiles WHERE name = ?1"));
  q->Bind(1, name);
  SPINTUNE_ASSIGN_OR_RETURN(bool row, q->Step());
  if (!row) {
    return absl::NotFoundError(
        absl::StrCat("no profile '", name, "' (spintune profiles list shows them)"));
  }
  auto profile = ParseProfileJson(q->ColumnText(0));
  if (!profile.ok()) {
    return absl::DataLossError(absl::StrCat("stored profile '", name,
                                            "' is unreadable: ", profile.status().message()));
  }
  return profile;
}

absl::Status Store::DeleteProfile(const std::string& name) {
  absl::MutexLock lock(&mu_);
  SPINTUNE_ASSIGN_OR_RETURN(auto q, db_->Prepare("DELETE FROM profiles WHERE name = ?1"));
  q->Bind(1, name);
  SPINTUNE_RETURN_IF_ERROR(q->Run());
  if (db_->Changes() != 1) return absl::NotFoundError(absl::StrCat("no profile '", name, "'"));
  return absl::OkStatus();
}

absl::StatusOr<Profile> Store::SnapshotProfile(int64_t target_id, uint64_t version,
                                               const std::string& name) {
  SPINTUNE_ASSIGN_OR_RETURN(auto table, LoadPolicy(target_id, version));
  Profile p;
  SPINTUNE_ASSIGN_OR_RETURN(p.knobs, LoadKnobSettings(target_id));
  bool knob_only = false;
  if (!table && version == 0) {
    SPINTUNE_ASSIGN_OR_RETURN(auto experiments, ListExperiments(target_id));
    knob_only = !p.knobs.empty() || !experiments.empty();
  }
  if (knob_only) {
    // A target with knob experiments and no policy (a knob-only agent):
    // an empty table of its CPU classes.
    SPINTUNE_ASSIGN_OR_RETURN(TargetRecord target, LoadTarget(target_id));
    table.emplace();
    table->board = target.board;
    for (const auto& c : target.cpu_classes) {
      table->cpu_classes.push_back({c.name, c.cpu_khz, c.declared});
    }
  }
  if (!table) {
    return absl::NotFoundError(version ? absl::StrCat("no policy version ", version)
                                       : std::string("the target has no policy yet"));
  }
  p.table = std::move(*table);
  SPINTUNE_ASSIGN_OR_RETURN(std::vector<KeyEvidence> keys, LoadKeys(target_id));
  // The evidence of the table's classes and devices (a key seen after the
  // fit under a new class has no costs in this table).
  for (auto& k : keys) {
    const bool known_device =
        std::any_of(p.table.devices.begin(), p.table.devices.end(),
                    [&](const DeviceInfo& d) { return d.name == k.key.device; });
    if (known_device && p.table.CpuClassIndex(k.key.cpu_class) >= 0) {
      p.keys.push_back(std::move(k));
    }
  }
  SPINTUNE_ASSIGN_OR_RETURN(p.dispatch, LoadDispatch(target_id));
  SPINTUNE_ASSIGN_OR_RETURN(TargetRecord target, LoadTarget(target_id));
  p.info.name = name;
  p.info.target = target.agent_id;
  p.info.source_version = p.table.version;
  p.info.created_at = NowRfc3339();
  for (const auto& k : p.keys) p.info.samples += k.histogram.total_count();
  for (const auto& e : p.table.entries) p.info.keys += e.fallback ? 0 : 1;
  return p;
}

}  // namespace spintune
