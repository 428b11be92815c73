#include "cli/profiles_command.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "cli/table_format.h"
#include "common/file_util.h"
#include "common/status_macros.h"
#include "common/version.h"
#include "nlohmann/json.hpp"
#include "policy/policy_diff.h"
#include "policy/policy_json.h"
#include "storage/store.h"

namespace spintune {
namespace {

using nlohmann::json;

json InfoToJson(const ProfileInfo& p) {
  return json{{"name", p.name},         {"target", p.target},
              {"source_version", p.source_version},
              {"created_at", p.created_at}, {"note", p.note},
              {"tool_version", p.tool_version}, {"parent", p.parent},
              {"samples", p.samples},   {"keys", p.keys}};
}

absl::StatusOr<TargetSummary> FindTargetOrError(Store& store, const std::string& db,
                                                const std::string& agent_id) {
  SPINTUNE_ASSIGN_OR_RETURN(auto summary, store.FindTarget(agent_id));
  if (!summary) {
    return absl::NotFoundError(absl::StrCat(db, ": no target '", agent_id,
                                            "' (spintune targets lists them)"));
  }
  return *summary;
}

absl::Status Save(Store& store, const std::string& db, const ProfilesFlags& f,
                  std::ostream& out) {
  SPINTUNE_RETURN_IF_ERROR(ValidateProfileName(f.name));
  if (f.target.empty()) return absl::InvalidArgumentError("profiles save: --target is required");
  SPINTUNE_ASSIGN_OR_RETURN(TargetSummary target, FindTargetOrError(store, db, f.target));
  auto profile = store.SnapshotProfile(target.id, f.version, f.name);
  if (absl::IsNotFound(profile.status())) {
    return absl::NotFoundError(
        absl::StrCat("target '", f.target, "': ", profile.status().message()));
  }
  SPINTUNE_RETURN_IF_ERROR(profile.status());
  profile->info.note = f.note;
  profile->info.tool_version = Version();
  // The parent is the target's newest profile before this one.
  SPINTUNE_ASSIGN_OR_RETURN(auto all, store.ListProfiles());
  for (const auto& p : all) {
    if (p.target == f.target) profile->info.parent = p.name;
  }
  SPINTUNE_RETURN_IF_ERROR(store.SaveProfile(*profile));
  out << "saved profile '" << f.name << "': target " << f.target << " version "
      << profile->info.source_version << ", " << profile->info.keys << " keys, "
      << profile->info.samples << " samples"
      << (profile->knobs.empty() ? ""
                                 : absl::StrCat(", ", profile->knobs.size(), " knob settings"))
      << (profile->info.parent.empty() ? "" : ", parent " + profile->info.parent) << "\n";
  return absl::OkStatus();
}

absl::Status List(Store& store, const std::string& format, std::ostream& out) {
  SPINTUNE_ASSIGN_OR_RETURN(auto all, store.ListProfiles());
  if (format == "json") {
    json arr = json::array();
    for (const auto& p : all) arr.push_back(InfoToJson(p));
    out << json{{"profiles", arr}}.dump(2) << "\n";
    return absl::OkStatus();
  }
  std::vector<std::vector<std::string>> rows = {
      {"NAME", "TARGET", "VERSION", "KEYS", "SAMPLES", "CREATED", "PARENT", "NOTE"}};
  for (const auto& p : all) {
    rows.push_back({p.name, p.target, absl::StrCat(p.source_version), absl::StrCat(p.keys),
                    absl::StrCat(p.samples), p.created_at, p.parent.empty() ? "-" : p.parent,
                    p.note});
  }
  out << RenderColumns(rows);
  return absl::OkStatus();
}

absl::Status Show(Store& store, const ProfilesFlags& f, std::ostream& out) {
  SPINTUNE_ASSIGN_OR_RETURN(Profile p, store.LoadProfile(f.name));
  if (f.format == "json") {
    json j = InfoToJson(p.info);
    j["table"] = PolicyTableToJson(p.table);
    if (!p.knobs.empty()) j["knobs"] = KnobSettingsToJson(p.knobs);
    out << j.dump(2) << "\n";
    return absl::OkStatus();
  }
  out << "profile " << p.info.name << ": target " << p.info.target << " version "
      << p.info.source_version << ", saved " << p.info.created_at << " by spintune "
      << p.info.tool_version << "\n";
  if (!p.info.parent.empty()) out << "parent: " << p.info.parent << "\n";
  if (!p.info.note.empty()) out << "note: " << p.info.note << "\n";
  out << "objective " << p.table.objective_name << " (latency weight " << p.table.latency_weight
      << "), " << p.info.keys << " keys, " << p.info.samples << " samples\n\n";
  out << RenderPolicyTable(p.table);
  if (!p.knobs.empty()) {
    std::vector<std::vector<std::string>> rows = {{"KNOB SET", "KNOB", "VALUE", "EVIDENCE"}};
    for (const auto& k : p.knobs) {
      rows.push_back({k.declaration, k.coordinate, k.label, k.evidence});
    }
    out << "\nknob settings:\n" << RenderColumns(rows);
  }
  return absl::OkStatus();
}

std::string KeyName(const KeyDiff& d) {
  if (d.fallback) return absl::StrCat(d.key.device, " *");
  return absl::StrCat(d.key.device, " ", d.key.cpu_class, " op", d.key.opcode, " ",
                      FormatSizeClass(d.key.size_class),
                      d.context.empty() ? "" : " if " + DescribeContext(d.context));
}

// Knob settings of two profiles, by (knob set, knob): each row's labels in
// A and B ("-" when absent) and whether it changed.
struct KnobChange {
  std::string declaration, coordinate, a = "-", b = "-";
  bool changed() const { return a != b; }
};
std::vector<KnobChange> DiffKnobs(const Profile& a, const Profile& b) {
  std::vector<KnobChange> rows;
  auto row = [&rows](const KnobSettingRecord& k) -> KnobChange& {
    for (auto& r : rows) {
      if (r.declaration == k.declaration && r.coordinate == k.coordinate) return r;
    }
    rows.push_back({k.declaration, k.coordinate});
    return rows.back();
  };
  for (const auto& k : a.knobs) row(k).a = k.label;
  for (const auto& k : b.knobs) row(k).b = k.label;
  return rows;
}

absl::Status Diff(Store& store, const ProfilesFlags& f, std::ostream& out) {
  if (f.other.empty()) return absl::InvalidArgumentError("profiles diff: give two profiles A B");
  SPINTUNE_ASSIGN_OR_RETURN(Profile a, store.LoadProfile(f.name));
  SPINTUNE_ASSIGN_OR_RETURN(Profile b, store.LoadProfile(f.other));
  const PolicyDiff diff = DiffPolicyTables(a.table, b.table, &b.keys);
  const std::vector<KnobChange> knobs = DiffKnobs(a, b);
  if (f.format == "json") {
    json knob_rows = json::array();
    for (const auto& k : knobs) {
      knob_rows.push_back({{"declaration", k.declaration}, {"coordinate", k.coordinate},
                           {"a", k.a}, {"b", k.b}, {"changed", k.changed()}});
    }
    json rows = json::array();
    for (const KeyDiff& d : diff.keys) {
      json r{{"device", d.key.device}, {"fallback", d.fallback}, {"change", DiffKindName(d.kind)}};
      if (!d.fallback) {
        r["cpu_class"] = d.key.cpu_class;
        r["opcode"] = d.key.opcode;
        r["size_class"] = d.key.size_class;
        r["context"] = ContextToJson(d.context);
      }
      if (d.a) r["a"] = {{"wait", WaitToJson(d.a->wait)}, {"cost_ns", d.a->expected_cost_ns}};
      if (d.b) r["b"] = {{"wait", WaitToJson(d.b->wait)}, {"cost_ns", d.b->expected_cost_ns}};
      if (d.a && d.b) r["cost_delta_ns"] = d.cost_delta_ns;
      if (d.a_on_b_cost_ns) r["a_on_b_cost_ns"] = *d.a_on_b_cost_ns;
      rows.push_back(std::move(r));
    }
    out << json{{"a", f.name},
                {"b", f.other},
                {"changed", diff.changed},
                {"same", diff.same},
                {"only_a", diff.only_a},
                {"only_b", diff.only_b},
                {"keys", rows},
                {"knobs", knob_rows}}
               .dump(2)
        << "\n";
    return absl::OkStatus();
  }
  std::vector<std::vector<std::string>> rows = {
      {"KEY", "A: " + f.name, "B: " + f.other, "COST A", "COST B", "DELTA", "A ON B", "CHANGE"}};
  for (const KeyDiff& d : diff.keys) {
    rows.push_back({KeyName(d), d.a ? DescribeWait(d.a->wait) : "-",
                    d.b ? DescribeWait(d.b->wait) : "-",
                    d.a ? FormatDurationNs(d.a->expected_cost_ns) : "-",
                    d.b ? FormatDurationNs(d.b->expected_cost_ns) : "-",
                    d.a && d.b ? FormatSigned(d.cost_delta_ns) : "-",
                    d.a_on_b_cost_ns ? FormatDurationNs(*d.a_on_b_cost_ns) : "-",
                    DiffKindName(d.kind)});
  }
  out << RenderColumns(rows);
  if (!knobs.empty()) {
    std::vector<std::vector<std::string>> knob_rows = {
        {"KNOB", "A: " + f.name, "B: " + f.other, "CHANGE"}};
    for (const auto& k : knobs) {
      knob_rows.push_back({k.declaration + " " + k.coordinate, k.a, k.b,
                           k.changed() ? "changed" : "same"});
    }
    out << "\n" << RenderColumns(knob_rows) << "\n";
  }
  out << diff.changed << " changed, " << diff.same << " same, " << diff.only_a << " only in "
      << f.name << ", " << diff.only_b << " only in " << f.other
      << " (costs per request on each profile's own samples; DELTA = B - A; A ON B: A's wait "
         "on B's samples)\n";
  return absl::OkStatus();
}

absl::Status Export(Store& store, const ProfilesFlags& f, std::ostream& out) {
  if (f.output.empty()) return absl::InvalidArgumentError("profiles export: -o FILE is required");
  SPINTUNE_ASSIGN_OR_RETURN(Profile p, store.LoadProfile(f.name));
  const std::string text = ProfileToJson(p).dump(1) + "\n";
  if (f.output == "-") {
    out << text;
    return absl::OkStatus();
  }
  SPINTUNE_RETURN_IF_ERROR(WriteFileAtomically(f.output, text));
  out << "exported profile '" << f.name << "' to " << f.output << "\n";
  return absl::OkStatus();
}

absl::Status Import(Store& store, const ProfilesFlags& f, std::ostream& out) {
  SPINTUNE_ASSIGN_OR_RETURN(std::string text, ReadFileToString(f.name, kMaxProfileFileBytes));
  auto profile = ParseProfileJson(text);
  if (!profile.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(f.name, ": ", profile.status().message()));
  }
  if (!f.rename.empty()) profile->info.name = f.rename;
  SPINTUNE_RETURN_IF_ERROR(store.SaveProfile(*profile));
  out << "imported profile '" << profile->info.name << "' (target " << profile->info.target
      << ", " << profile->info.keys << " keys, " << profile->info.samples << " samples)\n";
  return absl::OkStatus();
}

// Every device and CPU class the table uses must be the target's.
absl::Status CheckFits(const PolicyTable& table, const TargetRecord& target,
                       const std::string& what) {
  auto missing = [&](const char* kind, const std::string& name) {
    return absl::InvalidArgumentError(absl::StrCat(what, " has ", kind, " '", name,
                                                   "' which target '", target.agent_id,
                                                   "' does not"));
  };
  for (const auto& d : table.devices) {
    if (std::none_of(target.devices.begin(), target.devices.end(),
                     [&](const DeviceInfo& t) { return t.name == d.name; })) {
      return missing("device", d.name);
    }
  }
  for (const auto& c : table.cpu_classes) {
    if (std::none_of(target.cpu_classes.begin(), target.cpu_classes.end(),
                     [&](const CpuClassRecord& t) { return t.name == c.name; })) {
      return missing("CPU class", c.name);
    }
  }
  return absl::OkStatus();
}

absl::Status Rollback(Store& store, const std::string& db, const ProfilesFlags& f,
                      std::ostream& out) {
  SPINTUNE_ASSIGN_OR_RETURN(TargetSummary target, FindTargetOrError(store, db, f.name));
  if (f.unpin) {
    if (!f.to.empty()) return absl::InvalidArgumentError("rollback: --to or --unpin, not both");
    SPINTUNE_RETURN_IF_ERROR(store.Unpin(target.id));
    out << "target " << f.name << " unpinned: the tuner fits and pushes new versions again\n";
    return absl::OkStatus();
  }
  if (f.to.empty()) return absl::InvalidArgumentError("rollback: --to VERSION|PROFILE is required");
  PolicyTable table;
  std::string what;
  uint64_t version = 0;
  if (absl::SimpleAtoi(f.to, &version)) {
    SPINTUNE_ASSIGN_OR_RETURN(auto stored, store.LoadPolicy(target.id, version));
    if (version == 0 || !stored) {
      return absl::NotFoundError(
          absl::StrCat("target '", f.name, "' has no policy version ", f.to));
    }
    table = std::move(*stored);
    what = absl::StrCat("version ", version);
  } else {
    SPINTUNE_ASSIGN_OR_RETURN(Profile p, store.LoadProfile(f.to));
    SPINTUNE_ASSIGN_OR_RETURN(TargetRecord record, store.LoadTarget(target.id));
    what = absl::StrCat("profile '", f.to, "'");
    const bool knob_only = p.table.devices.empty() && !p.knobs.empty();
    if (!knob_only) SPINTUNE_RETURN_IF_ERROR(CheckFits(p.table, record, what));
    if (!p.knobs.empty()) {
      // The profile's knob settings become the target's; the tuner pushes
      // them to the agent (between experiments) within a second.
      for (auto& k : p.knobs) {
        k.updated_at.clear();
        absl::StrAppend(&k.evidence, " (in force by rollback to ", what, ")");
      }
      SPINTUNE_RETURN_IF_ERROR(store.ReplaceKnobSettings(target.id, p.knobs));
      out << "target " << f.name << ": " << p.knobs.size() << " knob settings of " << what
          << " are in force\n";
      if (knob_only) return absl::OkStatus();  // nothing to pin
    }
    table = std::move(p.table);
  }
  SPINTUNE_ASSIGN_OR_RETURN(uint64_t pinned, store.AppendPinnedVersion(target.id, &table));
  out << "target " << f.name << ": " << what << " stored as version " << pinned
      << " and pinned; a tuner on " << db
      << " pushes it to the agent within a second (undo: rollback " << f.name << " --unpin)\n";
  return absl::OkStatus();
}

}  // namespace

absl::Status RunProfiles(const std::string& db, const ProfilesFlags& flags, std::ostream& out) {
  if (flags.format != "table" && flags.format != "json") {
    return absl::InvalidArgumentError("--format: table or json");
  }
  if (flags.name.empty() && flags.action != "list") {
    return absl::InvalidArgumentError(absl::StrCat("profiles ", flags.action, ": ",
                                                   flags.action == "import" ? "FILE" : "NAME",
                                                   " is required"));
  }
  // Import may start a database (to make headers from a shared profile);
  // the other writes need the target's evidence, reads never write.
  const OpenMode mode = flags.action == "import" ? OpenMode::kCreate
                        : flags.action == "save" || flags.action == "rollback" ||
                                flags.action == "delete"
                            ? OpenMode::kExisting
                            : OpenMode::kReadOnly;
  SPINTUNE_ASSIGN_OR_RETURN(auto store, Store::Open(db, {}, mode));
  if (flags.action == "save") return Save(*store, db, flags, out);
  if (flags.action == "list") return List(*store, flags.format, out);
  if (flags.action == "show") return Show(*store, flags, out);
  if (flags.action == "diff") return Diff(*store, flags, out);
  if (flags.action == "export") return Export(*store, flags, out);
  if (flags.action == "import") return Import(*store, flags, out);
  if (flags.action == "rollback") return Rollback(*store, db, flags, out);
  if (flags.action == "delete") {
    SPINTUNE_RETURN_IF_ERROR(store->DeleteProfile(flags.name));
    out << "deleted profile '" << flags.name << "'\n";
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown profiles action '", flags.action, "'"));
}

}  // namespace spintune
