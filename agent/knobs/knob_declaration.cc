#include "agent/knobs/knob_declaration.h"

#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/knobs/ahci_sunxi_sim.h"
#include "common/file_util.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "policy/json_fields.h"

namespace spintune {
namespace {

using nlohmann::json;

constexpr size_t kMaxKnobs = 32;
constexpr size_t kMaxValues = 4096;
constexpr uint64_t kMaxDeclarationBytes = 1 << 20;

absl::Status CheckKnown(const json& obj, const std::set<std::string>& known,
                        const std::string& where) {
  for (const auto& [key, value] : obj.items()) {
    if (!known.count(key)) return FieldError(where + "." + key, "unknown field");
  }
  return absl::OkStatus();
}

absl::Status CheckName(const std::string& name, const std::string& where) {
  bool ok = !name.empty() && name.size() <= 64;
  for (char c : name) {
    ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-');
  }
  return ok ? absl::OkStatus() : FieldError(where, "1..64 characters of A-Z a-z 0-9 _ -");
}

absl::StatusOr<std::vector<int64_t>> GetIntList(const json& obj, const std::string& key,
                                                const std::string& where) {
  const json& arr = obj.at(key);
  if (!arr.is_array() || arr.empty() || arr.size() > kMaxValues) {
    return FieldError(where + "." + key, absl::StrCat("must be 1..", kMaxValues, " integers"));
  }
  std::vector<int64_t> out;
  std::set<int64_t> seen;
  for (const json& v : arr) {
    if (!v.is_number_integer()) return FieldError(where + "." + key, "must hold integers");
    if (!seen.insert(v.get<int64_t>()).second) {
      return FieldError(where + "." + key, absl::StrCat("repeats ", v.get<int64_t>()));
    }
    out.push_back(v.get<int64_t>());
  }
  return out;
}

// {"min": a, "max": b, "step": s} or {"min": a, "max": b, "factor": f}.
absl::StatusOr<std::vector<int64_t>> GetRange(const json& range, const std::string& where) {
  if (!range.is_object()) return FieldError(where, "must be an object");
  SPINTUNE_RETURN_IF_ERROR(CheckKnown(range, {"min", "max", "step", "factor"}, where));
  if (!range.contains("min") || !range.contains("max") || !range["min"].is_number_integer() ||
      !range["max"].is_number_integer()) {
    return FieldError(where, "needs integers min and max");
  }
  const int64_t lo = range["min"].get<int64_t>(), hi = range["max"].get<int64_t>();
  if (lo > hi) return FieldError(where, "min is above max");
  const bool geometric = range.contains("factor");
  if (geometric == range.contains("step")) return FieldError(where, "give step or factor");
  const json& by = geometric ? range["factor"] : range["step"];
  if (!by.is_number_integer() || by.get<int64_t>() < (geometric ? 2 : 1)) {
    return FieldError(where, geometric ? "factor must be an integer >= 2"
                                       : "step must be an integer >= 1");
  }
  if (geometric && lo < 1) return FieldError(where, "a factor needs min >= 1");
  std::vector<int64_t> out;
  for (int64_t v = lo; v <= hi; v = geometric ? v * by.get<int64_t>() : v + by.get<int64_t>()) {
    out.push_back(v);
    if (out.size() > kMaxValues) return FieldError(where, absl::StrCat("more than ", kMaxValues, " values"));
    if (v > INT64_MAX / 4) break;
  }
  return out;
}

absl::StatusOr<KnobSpec> ParseKnob(const json& k, const std::string& where) {
  if (!k.is_object()) return FieldError(where, "must be an object");
  SPINTUNE_RETURN_IF_ERROR(CheckKnown(
      k, {"name", "file", "read", "write", "values", "range", "enum", "fields", "unit"}, where));
  KnobSpec spec;
  SPINTUNE_ASSIGN_OR_RETURN(spec.name, GetString(k, "name", where));
  SPINTUNE_RETURN_IF_ERROR(CheckName(spec.name, where + ".name"));
  SPINTUNE_ASSIGN_OR_RETURN(spec.unit, GetString(k, "unit", where, false));
  if (k.contains("file") == (k.contains("read") || k.contains("write"))) {
    return FieldError(where, "give either file or read and write commands");
  }
  if (k.contains("file")) {
    SPINTUNE_ASSIGN_OR_RETURN(spec.access.path, GetString(k, "file", where));
  } else {
    spec.access.kind = KnobAccess::Kind::kCommand;
    SPINTUNE_ASSIGN_OR_RETURN(spec.access.read_command, GetString(k, "read", where));
    SPINTUNE_ASSIGN_OR_RETURN(spec.access.write_command, GetString(k, "write", where));
    if (!absl::StrContains(spec.access.write_command, "{value}")) {
      return FieldError(where + ".write", "must contain {value}");
    }
  }
  const int domains = k.contains("values") + k.contains("range") + k.contains("enum") +
                      k.contains("fields");
  if (domains != 1) return FieldError(where, "give exactly one of values, range, enum, fields");
  if (k.contains("values")) {
    SPINTUNE_ASSIGN_OR_RETURN(spec.values, GetIntList(k, "values", where));
  } else if (k.contains("range")) {
    SPINTUNE_ASSIGN_OR_RETURN(spec.values, GetRange(k["range"], where + ".range"));
  } else if (k.contains("enum")) {
    const json& labels = k["enum"];
    if (!labels.is_array() || labels.empty() || labels.size() > kMaxValues) {
      return FieldError(where + ".enum", "must be 1..4096 strings");
    }
    std::set<std::string> seen;
    for (const json& l : labels) {
      if (!l.is_string() || l.get<std::string>().empty() ||
          absl::StrContains(l.get<std::string>(), " ")) {
        return FieldError(where + ".enum", "must hold non-empty words");
      }
      if (!seen.insert(l.get<std::string>()).second) return FieldError(where + ".enum", "repeats a value");
      spec.labels.push_back(l.get<std::string>());
    }
  } else {
    const json& fields = k["fields"];
    if (!fields.is_array() || fields.empty() || fields.size() > 16) {
      return FieldError(where + ".fields", "must be 1..16 fields");
    }
    uint64_t used = 0;
    for (size_t i = 0; i < fields.size(); ++i) {
      const std::string at = absl::StrCat(where, ".fields[", i, "]");
      const json& f = fields[i];
      if (!f.is_object()) return FieldError(at, "must be an object");
      SPINTUNE_RETURN_IF_ERROR(CheckKnown(f, {"name", "shift", "width", "values"}, at));
      KnobFieldSpec field;
      SPINTUNE_ASSIGN_OR_RETURN(field.name, GetString(f, "name", at));
      SPINTUNE_RETURN_IF_ERROR(CheckName(field.name, at + ".name"));
      SPINTUNE_ASSIGN_OR_RETURN(uint64_t shift, GetUint(f, "shift", at, 63));
      SPINTUNE_ASSIGN_OR_RETURN(uint64_t width, GetUint(f, "width", at, 12));
      if (width == 0 || shift + width > 64) return FieldError(at, "needs 1 <= width, shift + width <= 64");
      const uint64_t mask = ((uint64_t{1} << width) - 1) << shift;
      if (used & mask) return FieldError(at, "overlaps another field");
      used |= mask;
      field.shift = static_cast<uint32_t>(shift);
      field.width = static_cast<uint32_t>(width);
      if (f.contains("values")) {
        SPINTUNE_ASSIGN_OR_RETURN(field.values, GetIntList(f, "values", at));
        for (int64_t v : field.values) {
          if (v < 0 || v >= (int64_t{1} << width)) {
            return FieldError(at + ".values", absl::StrCat(v, " does not fit in ", width, " bits"));
          }
        }
      } else {
        for (int64_t v = 0; v < (int64_t{1} << width); ++v) field.values.push_back(v);
      }
      spec.fields.push_back(std::move(field));
    }
  }
  return spec;
}

absl::StatusOr<WorkloadSpec> ParseWorkload(const json& w) {
  const std::string where = "workload";
  if (!w.is_object() || w.size() != 1) return FieldError(where, "needs one of ioload, command");
  WorkloadSpec spec;
  if (w.contains("command")) {
    const json& c = w["command"];
    spec.kind = WorkloadSpec::Kind::kCommand;
    if (c.is_string()) {
      spec.command = c.get<std::string>();
    } else {
      SPINTUNE_RETURN_IF_ERROR(CheckKnown(c, {"run", "timeout_seconds"}, where + ".command"));
      SPINTUNE_ASSIGN_OR_RETURN(spec.command, GetString(c, "run", where + ".command"));
      SPINTUNE_ASSIGN_OR_RETURN(double t, GetDouble(c, "timeout_seconds", where + ".command", false));
      if (t > 0) spec.timeout_seconds = t;
    }
    if (spec.command.empty()) return FieldError(where + ".command", "is empty");
    return spec;
  }
  if (!w.contains("ioload")) return FieldError(where, "needs one of ioload, command");
  const json& o = w["ioload"];
  const std::string at = where + ".ioload";
  if (!o.is_object()) return FieldError(at, "must be an object");
  SPINTUNE_RETURN_IF_ERROR(CheckKnown(
      o, {"file", "file_mb", "seconds", "sizes", "write_share", "threads", "fsync_every"}, at));
  IoLoadOptions& io = spec.ioload;
  io.path = "/var/tmp/spintune-knobs.bin";
  io.duration = absl::Seconds(1);
  io.fsync_every = 0;
  SPINTUNE_ASSIGN_OR_RETURN(std::string file, GetString(o, "file", at, false));
  if (!file.empty()) io.path = file;
  SPINTUNE_ASSIGN_OR_RETURN(uint64_t file_mb, GetUint(o, "file_mb", at, 1 << 20, false, 64));
  io.file_bytes = std::max<uint64_t>(file_mb, 1) << 20;
  SPINTUNE_ASSIGN_OR_RETURN(double seconds, GetDouble(o, "seconds", at, false));
  if (seconds > 0) io.duration = absl::Seconds(seconds);
  if (o.contains("sizes")) {
    SPINTUNE_ASSIGN_OR_RETURN(std::vector<int64_t> sizes, GetIntList(o, "sizes", at));
    io.sizes.clear();
    for (int64_t s : sizes) {
      if (s <= 0 || s % 4096 != 0 || s > (8 << 20)) {
        return FieldError(at + ".sizes", "must be multiples of 4096 up to 8 MiB");
      }
      io.sizes.push_back(static_cast<uint32_t>(s));
    }
  }
  if (o.contains("write_share")) {
    SPINTUNE_ASSIGN_OR_RETURN(io.write_share, GetDouble(o, "write_share", at));
    if (io.write_share > 1) return FieldError(at + ".write_share", "must be in [0, 1]");
  }
  SPINTUNE_ASSIGN_OR_RETURN(uint64_t threads, GetUint(o, "threads", at, 64, false, 1));
  io.threads = static_cast<int>(std::max<uint64_t>(threads, 1));
  SPINTUNE_ASSIGN_OR_RETURN(uint64_t fsync_every, GetUint(o, "fsync_every", at, 1 << 20, false, 0));
  io.fsync_every = static_cast<uint32_t>(fsync_every);
  return spec;
}

}  // namespace

std::string KnobAccess::Describe() const {
  switch (kind) {
    case Kind::kFile:
      return "file:" + path;
    case Kind::kCommand:
      return absl::StrCat("command: read '", read_command, "', write '", write_command, "'");
    case Kind::kSim:
      return "sim";
  }
  return "";
}

std::string WorkloadSpec::Describe() const {
  switch (kind) {
    case Kind::kIoLoad: {
      std::string sizes;
      for (uint32_t s : ioload.sizes) absl::StrAppend(&sizes, sizes.empty() ? "" : ",", s / 1024, "K");
      return absl::StrCat("spintune-ioload ", absl::FormatDuration(ioload.duration), " on ",
                          ioload.path, ": O_DIRECT ", sizes, ", ", ioload.write_share * 100,
                          "% writes, ", ioload.threads, " threads");
    }
    case Kind::kCommand:
      return "command: " + command;
    case Kind::kSim:
      return absl::StrCat("simulated dd write and read, bs=", block_bytes / 1024, "K");
  }
  return "";
}

absl::StatusOr<KnobDeclaration> ParseKnobDeclaration(const std::string& text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError("a knob declaration must be a JSON object");
  }
  SPINTUNE_RETURN_IF_ERROR(CheckKnown(
      j,
      {"name", "board", "device", "driver", "knobs", "workload", "metric", "metric_unit",
       "better", "constraints", "max_trials", "on_finish", "seed"},
      "knobs"));
  KnobDeclaration d;
  SPINTUNE_ASSIGN_OR_RETURN(d.name, GetString(j, "name", "knobs"));
  SPINTUNE_RETURN_IF_ERROR(CheckName(d.name, "knobs.name"));
  SPINTUNE_ASSIGN_OR_RETURN(d.board, GetString(j, "board", "knobs", false));
  SPINTUNE_ASSIGN_OR_RETURN(d.device, GetString(j, "device", "knobs", false));
  SPINTUNE_ASSIGN_OR_RETURN(d.driver, GetString(j, "driver", "knobs", false));
  if (!j.contains("knobs") || !j["knobs"].is_array() || j["knobs"].empty() ||
      j["knobs"].size() > kMaxKnobs) {
    return FieldError("knobs.knobs", absl::StrCat("must be an array of 1..", kMaxKnobs, " knobs"));
  }
  std::set<std::string> names;
  for (size_t i = 0; i < j["knobs"].size(); ++i) {
    const std::string where = absl::StrCat("knobs.knobs[", i, "]");
    SPINTUNE_ASSIGN_OR_RETURN(KnobSpec k, ParseKnob(j["knobs"][i], where));
    if (!names.insert(k.name).second) return FieldError(where + ".name", "repeats a knob");
    d.knobs.push_back(std::move(k));
  }
  if (!j.contains("workload")) return FieldError("knobs.workload", "missing");
  SPINTUNE_ASSIGN_OR_RETURN(d.workload, ParseWorkload(j["workload"]));
  SPINTUNE_ASSIGN_OR_RETURN(d.metric, GetString(j, "metric", "knobs"));
  SPINTUNE_RETURN_IF_ERROR(CheckName(d.metric, "knobs.metric"));
  SPINTUNE_ASSIGN_OR_RETURN(d.metric_unit, GetString(j, "metric_unit", "knobs", false));
  SPINTUNE_ASSIGN_OR_RETURN(std::string better, GetString(j, "better", "knobs", false));
  if (better != "" && better != "higher" && better != "lower") {
    return FieldError("knobs.better", "higher or lower");
  }
  d.lower_is_better = better == "lower";
  if (j.contains("constraints")) {
    if (!j["constraints"].is_array() || j["constraints"].size() > 16) {
      return FieldError("knobs.constraints", "must be an array of at most 16");
    }
    for (size_t i = 0; i < j["constraints"].size(); ++i) {
      const std::string where = absl::StrCat("knobs.constraints[", i, "]");
      const json& c = j["constraints"][i];
      if (!c.is_object()) return FieldError(where, "must be an object");
      SPINTUNE_RETURN_IF_ERROR(CheckKnown(c, {"metric", "min", "max"}, where));
      KnobConstraintSpec spec;
      SPINTUNE_ASSIGN_OR_RETURN(spec.metric, GetString(c, "metric", where));
      SPINTUNE_RETURN_IF_ERROR(CheckName(spec.metric, where + ".metric"));
      for (const char* bound : {"min", "max"}) {
        if (!c.contains(bound)) continue;
        if (!c[bound].is_number()) return FieldError(where + "." + bound, "must be a number");
        (std::string(bound) == "min" ? spec.min : spec.max) = c[bound].get<double>();
      }
      if (!spec.min && !spec.max) return FieldError(where, "needs min or max");
      d.constraints.push_back(std::move(spec));
    }
  }
  SPINTUNE_ASSIGN_OR_RETURN(uint64_t max_trials, GetUint(j, "max_trials", "knobs", 100000, false));
  d.max_trials = static_cast<uint32_t>(max_trials);
  SPINTUNE_ASSIGN_OR_RETURN(std::string on_finish, GetString(j, "on_finish", "knobs", false));
  if (on_finish != "" && on_finish != "apply_winner" && on_finish != "restore") {
    return FieldError("knobs.on_finish", "apply_winner or restore");
  }
  d.apply_winner = on_finish != "restore";
  SPINTUNE_ASSIGN_OR_RETURN(d.seed, GetUint(j, "seed", "knobs", uint64_t{1} << 53, false));
  return d;
}

absl::StatusOr<KnobDeclaration> SimKnobDeclaration(const std::string& board_name) {
  const AhciSunxiBoard* board = FindAhciSunxiBoard(board_name);
  if (board == nullptr) {
    std::string names;
    for (const auto& b : AhciSunxiBoards()) absl::StrAppend(&names, names.empty() ? "" : ", ", b.name);
    return absl::InvalidArgumentError(
        absl::StrCat("unknown simulated knob board '", board_name, "' (", names, ")"));
  }
  KnobDeclaration d;
  d.name = "ahci0-dma";
  d.board = board->name;
  d.device = "ata1";
  d.driver = "ahci_sunxi";
  d.sim_board = board->name;
  KnobSpec reg;
  reg.name = "P0DMACR";
  reg.access.kind = KnobAccess::Kind::kSim;
  for (const auto& [name, shift] : {std::pair<const char*, uint32_t>{"TXTS", kTxtsShift},
                                    {"RXTS", kRxtsShift}}) {
    KnobFieldSpec f{name, shift, kFieldWidth, {}};
    for (int64_t v = 0; v < 16; ++v) f.values.push_back(v);
    reg.fields.push_back(std::move(f));
  }
  d.knobs.push_back(std::move(reg));
  d.workload.kind = WorkloadSpec::Kind::kSim;
  d.workload.block_bytes = kDefaultBlockBytes;
  d.metric = "write_mbps";
  d.metric_unit = "MB/s";
  d.constraints.push_back({"dma_errors", std::nullopt, 0.0});
  return d;
}

absl::StatusOr<KnobDeclaration> LoadKnobDeclaration(const std::string& spec) {
  if (absl::StartsWith(spec, "sim:")) return SimKnobDeclaration(spec.substr(4));
  SPINTUNE_ASSIGN_OR_RETURN(std::string text, ReadFileToString(spec, kMaxDeclarationBytes));
  auto d = ParseKnobDeclaration(text);
  if (!d.ok()) return absl::InvalidArgumentError(absl::StrCat(spec, ": ", d.status().message()));
  return d;
}

}  // namespace spintune
