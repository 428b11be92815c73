#include "storage/profile.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "policy/json_fields.h"
#include "policy/policy_json.h"

namespace spintune {
namespace {

using nlohmann::json;

constexpr size_t kMaxEvidenceKeys = 65536;
constexpr uint64_t kMaxBucketCount = uint64_t{1} << 53;  // exact in a double
constexpr uint64_t kMaxHistogramTotal = uint64_t{1} << 62;

// Sparse buckets as [[lower_ns, count], ...].
json BucketsToJson(const LatencyHistogram& h) {
  json arr = json::array();
  for (const auto& [index, count] : h.buckets()) {
    arr.push_back(json::array({LatencyHistogram::BucketLowerNs(index), count}));
  }
  return arr;
}

absl::StatusOr<LatencyHistogram> BucketsFromJson(const json& obj, const std::string& key,
                                                 const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_array()) {
    return FieldError(where + "." + key, "must be an array of [lower_ns, count]");
  }
  LatencyHistogram h;
  int last_index = -1;
  uint64_t total = 0;
  for (size_t i = 0; i < it->size(); ++i) {
    const std::string at = absl::StrCat(where, ".", key, "[", i, "]");
    const json& pair = (*it)[i];
    if (!pair.is_array() || pair.size() != 2 || !pair[0].is_number_unsigned() ||
        !pair[1].is_number_unsigned()) {
      return FieldError(at, "must be [lower_ns, count] with non-negative integers");
    }
    const uint64_t lower_ns = pair[0].get<uint64_t>();
    const uint64_t count = pair[1].get<uint64_t>();
    if (lower_ns > LatencyHistogram::kMaxValueNs) {
      return FieldError(at, absl::StrCat("lower_ns above ", LatencyHistogram::kMaxValueNs));
    }
    const int index = LatencyHistogram::BucketIndex(lower_ns);
    if (LatencyHistogram::BucketLowerNs(index) != lower_ns) {
      return FieldError(at, absl::StrCat(lower_ns, " ns is not a bucket's lower bound"));
    }
    if (index <= last_index) return FieldError(at, "buckets must be increasing");
    if (count == 0 || count > kMaxBucketCount) {
      return FieldError(at, absl::StrCat("count must be in [1, ", kMaxBucketCount, "]"));
    }
    total += count;
    if (total > kMaxHistogramTotal) return FieldError(at, "histogram total too large");
    h.AddToBucket(index, count);
    last_index = index;
  }
  return h;
}

absl::Status CheckKnownFields(const json& obj, const std::set<std::string>& known,
                              const std::string& where) {
  for (const auto& [field, value] : obj.items()) {
    if (!known.count(field)) return FieldError(where + "." + field, "unknown field");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> GetName(const json& obj, const std::string& key,
                                    const std::string& where) {
  SPINTUNE_ASSIGN_OR_RETURN(std::string s, GetString(obj, key, where));
  if (s.empty() || s.size() > 128) return FieldError(where + "." + key, "1..128 bytes");
  return s;
}

}  // namespace

json KnobSettingsToJson(const std::vector<KnobSettingRecord>& knobs) {
  json arr = json::array();
  for (const auto& k : knobs) {
    json o{{"declaration", k.declaration}, {"coordinate", k.coordinate}, {"value", k.value},
           {"label", k.label},           {"experiment_id", k.experiment_id},
           {"evidence", k.evidence},     {"updated_at", k.updated_at}};
    if (!k.register_name.empty()) {
      o["register"] = k.register_name;
      o["shift"] = k.shift;
      o["width"] = k.width;
    }
    arr.push_back(std::move(o));
  }
  return arr;
}

absl::StatusOr<std::vector<KnobSettingRecord>> KnobSettingsFromJson(const json& arr,
                                                                   const std::string& where) {
  if (!arr.is_array() || arr.size() > 4096) return FieldError(where, "must be an array (at most 4096)");
  std::vector<KnobSettingRecord> out;
  std::set<std::pair<std::string, std::string>> seen;
  for (size_t i = 0; i < arr.size(); ++i) {
    const std::string at = absl::StrCat(where, "[", i, "]");
    const json& k = arr[i];
    if (!k.is_object()) return FieldError(at, "must be an object");
    SPINTUNE_RETURN_IF_ERROR(CheckKnownFields(
        k,
        {"declaration", "coordinate", "value", "label", "experiment_id", "evidence", "updated_at",
         "register", "shift", "width"},
        at));
    KnobSettingRecord r;
    SPINTUNE_ASSIGN_OR_RETURN(r.declaration, GetName(k, "declaration", at));
    SPINTUNE_ASSIGN_OR_RETURN(r.coordinate, GetName(k, "coordinate", at));
    if (!seen.insert({r.declaration, r.coordinate}).second) return FieldError(at, "listed twice");
    if (!k.contains("value") || !k["value"].is_number_integer()) {
      return FieldError(at + ".value", "must be an integer");
    }
    r.value = k["value"].get<int64_t>();
    SPINTUNE_ASSIGN_OR_RETURN(r.label, GetString(k, "label", at, false));
    SPINTUNE_ASSIGN_OR_RETURN(uint64_t experiment, GetUint(k, "experiment_id", at, uint64_t{1} << 53, false));
    r.experiment_id = static_cast<int64_t>(experiment);
    SPINTUNE_ASSIGN_OR_RETURN(r.evidence, GetString(k, "evidence", at, false));
    SPINTUNE_ASSIGN_OR_RETURN(r.updated_at, GetString(k, "updated_at", at, false));
    SPINTUNE_ASSIGN_OR_RETURN(r.register_name, GetString(k, "register", at, false));
    SPINTUNE_ASSIGN_OR_RETURN(uint64_t shift, GetUint(k, "shift", at, 63, false));
    SPINTUNE_ASSIGN_OR_RETURN(uint64_t width, GetUint(k, "width", at, 64, false));
    if (shift + width > 64) return FieldError(at, "shift + width must be <= 64");
    r.shift = static_cast<uint32_t>(shift);
    r.width = static_cast<uint32_t>(width);
    out.push_back(std::move(r));
  }
  return out;
}

absl::Status ValidateProfileName(const std::string& name) {
  bool ok = !name.empty() && name.size() <= 64 && name[0] != '.' && name[0] != '-';
  for (char c : name) {
    ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-');
  }
  if (!ok) {
    return absl::InvalidArgumentError(
        absl::StrCat("profile name '", name,
                     "': use 1..64 characters of A-Z a-z 0-9 . _ - (not starting with . or -)"));
  }
  return absl::OkStatus();
}

json ProfileToJson(const Profile& p) {
  json keys = json::array();
  for (const KeyEvidence& k : p.keys) {
    keys.push_back(json{{"cpu_class", k.key.cpu_class},
                        {"device", k.key.device},
                        {"opcode", k.key.opcode},
                        {"size_class", k.key.size_class},
                        {"errors", k.errors},
                        {"irq_timeouts", k.irq_timeouts},
                        {"spin_timeouts", k.spin_timeouts},
                        {"irq_path", k.irq_path},
                        {"spin_path", k.spin_path},
                        {"buckets", BucketsToJson(k.histogram)}});
  }
  json dispatch = json::array();
  for (const DispatchRecord& d : p.dispatch) {
    dispatch.push_back(json{{"cpu_class", d.cpu_class},
                            {"device", d.device},
                            {"handler_buckets", BucketsToJson(d.handler)},
                            {"wake_buckets", BucketsToJson(d.wake)}});
  }
  json out{{"format", kProfileFormat},
           {"format_version", kProfileFormatVersion},
           {"name", p.info.name},
           {"target", p.info.target},
           {"source_version", p.info.source_version},
           {"created_at", p.info.created_at},
           {"note", p.info.note},
           {"tool_version", p.info.tool_version},
           {"parent", p.info.parent},
           {"table", PolicyTableToJson(p.table)},
           {"evidence", json{{"keys", keys}, {"dispatch", dispatch}}}};
  if (!p.knobs.empty()) out["knobs"] = KnobSettingsToJson(p.knobs);
  return out;
}

absl::StatusOr<Profile> ProfileFromJson(const json& j) {
  if (!j.is_object()) return absl::InvalidArgumentError("a profile must be a JSON object");
  SPINTUNE_RETURN_IF_ERROR(CheckKnownFields(
      j,
      {"format", "format_version", "name", "target", "source_version", "created_at", "note",
       "tool_version", "parent", "table", "evidence", "knobs"},
      "profile"));
  SPINTUNE_ASSIGN_OR_RETURN(std::string format, GetString(j, "format", "profile"));
  if (format != kProfileFormat) {
    return FieldError("profile.format", absl::StrCat("must be '", kProfileFormat, "'"));
  }
  SPINTUNE_ASSIGN_OR_RETURN(uint64_t version,
                            GetUint(j, "format_version", "profile", 1'000'000));
  if (version != kProfileFormatVersion) {
    return FieldError("profile.format_version",
                      absl::StrCat("this spintune reads version ", kProfileFormatVersion,
                                   ", the file is version ", version));
  }
  Profile p;
  SPINTUNE_ASSIGN_OR_RETURN(p.info.name, GetString(j, "name", "profile"));
  SPINTUNE_RETURN_IF_ERROR(ValidateProfileName(p.info.name));
  SPINTUNE_ASSIGN_OR_RETURN(p.info.target, GetName(j, "target", "profile"));
  SPINTUNE_ASSIGN_OR_RETURN(p.info.source_version,
                            GetUint(j, "source_version", "profile", uint64_t{1} << 53, false));
  SPINTUNE_ASSIGN_OR_RETURN(p.info.created_at, GetString(j, "created_at", "profile", false));
  SPINTUNE_ASSIGN_OR_RETURN(p.info.note, GetString(j, "note", "profile", false));
  SPINTUNE_ASSIGN_OR_RETURN(p.info.tool_version, GetString(j, "tool_version", "profile", false));
  SPINTUNE_ASSIGN_OR_RETURN(p.info.parent, GetString(j, "parent", "profile", false));
  if (!p.info.parent.empty()) {
    auto parent_ok = ValidateProfileName(p.info.parent);
    if (!parent_ok.ok()) return FieldError("profile.parent", parent_ok.message());
  }
  auto table_it = j.find("table");
  if (table_it == j.end()) return FieldError("profile.table", "missing");
  auto table = PolicyTableFromJson(*table_it);
  if (!table.ok()) return FieldError("profile.table", table.status().message());
  p.table = std::move(*table);

  std::set<std::string> classes, devices;
  for (const auto& c : p.table.cpu_classes) classes.insert(c.name);
  for (const auto& d : p.table.devices) devices.insert(d.name);
  auto ev = j.find("evidence");
  if (ev == j.end() || !ev->is_object()) return FieldError("profile.evidence", "missing");
  SPINTUNE_RETURN_IF_ERROR(CheckKnownFields(*ev, {"keys", "dispatch"}, "profile.evidence"));
  auto keys = ev->find("keys");
  if (keys == ev->end() || !keys->is_array()) {
    return FieldError("profile.evidence.keys", "must be an array");
  }
  if (keys->size() > kMaxEvidenceKeys) {
    return FieldError("profile.evidence.keys", absl::StrCat("more than ", kMaxEvidenceKeys));
  }
  std::set<PolicyKey> seen;
  for (size_t i = 0; i < keys->size(); ++i) {
    const std::string where = absl::StrCat("profile.evidence.keys[", i, "]");
    const json& k = (*keys)[i];
    if (!k.is_object()) return FieldError(where, "must be an object");
    SPINTUNE_RETURN_IF_ERROR(CheckKnownFields(
        k,
        {"cpu_class", "device", "opcode", "size_class", "errors", "irq_timeouts",
         "spin_timeouts", "irq_path", "spin_path", "buckets"},
        where));
    KeyEvidence e;
    SPINTUNE_ASSIGN_OR_RETURN(e.key.cpu_class, GetName(k, "cpu_class", where));
    SPINTUNE_ASSIGN_OR_RETURN(e.key.device, GetName(k, "device", where));
    if (!classes.count(e.key.cpu_class)) {
      return FieldError(where + ".cpu_class",
                        absl::StrCat("'", e.key.cpu_class, "' is not a CPU class of the table"));
    }
    if (!devices.count(e.key.device)) {
      return FieldError(where + ".device",
                        absl::StrCat("'", e.key.device, "' is not a device of the table"));
    }
    SPINTUNE_ASSIGN_OR_RETURN(uint64_t opcode, GetUint(k, "opcode", where, UINT32_MAX));
    SPINTUNE_ASSIGN_OR_RETURN(uint64_t size_class, GetUint(k, "size_class", where, UINT32_MAX));
    e.key.opcode = static_cast<uint32_t>(opcode);
    e.key.size_class = static_cast<uint32_t>(size_class);
    if (!seen.insert(e.key).second) return FieldError(where, "key listed twice");
    SPINTUNE_ASSIGN_OR_RETURN(e.histogram, BucketsFromJson(k, "buckets", where));
    const uint64_t n = e.histogram.total_count();
    SPINTUNE_ASSIGN_OR_RETURN(e.errors, GetUint(k, "errors", where, n, false));
    SPINTUNE_ASSIGN_OR_RETURN(e.irq_timeouts, GetUint(k, "irq_timeouts", where, n, false));
    SPINTUNE_ASSIGN_OR_RETURN(e.spin_timeouts, GetUint(k, "spin_timeouts", where, n, false));
    SPINTUNE_ASSIGN_OR_RETURN(e.irq_path, GetUint(k, "irq_path", where, n, false));
    SPINTUNE_ASSIGN_OR_RETURN(e.spin_path, GetUint(k, "spin_path", where, n, false));
    p.info.samples += n;
    p.keys.push_back(std::move(e));
  }
  auto dispatch = ev->find("dispatch");
  if (dispatch != ev->end()) {
    if (!dispatch->is_array() || dispatch->size() > kMaxEvidenceKeys) {
      return FieldError("profile.evidence.dispatch", "must be an array (at most 65536)");
    }
    for (size_t i = 0; i < dispatch->size(); ++i) {
      const std::string where = absl::StrCat("profile.evidence.dispatch[", i, "]");
      const json& d = (*dispatch)[i];
      if (!d.is_object()) return FieldError(where, "must be an object");
      SPINTUNE_RETURN_IF_ERROR(CheckKnownFields(
          d, {"cpu_class", "device", "handler_buckets", "wake_buckets"}, where));
      DispatchRecord r;
      SPINTUNE_ASSIGN_OR_RETURN(r.cpu_class, GetName(d, "cpu_class", where));
      SPINTUNE_ASSIGN_OR_RETURN(r.device, GetString(d, "device", where, false));
      SPINTUNE_ASSIGN_OR_RETURN(r.handler, BucketsFromJson(d, "handler_buckets", where));
      SPINTUNE_ASSIGN_OR_RETURN(r.wake, BucketsFromJson(d, "wake_buckets", where));
      p.dispatch.push_back(std::move(r));
    }
  }
  for (const auto& e : p.table.entries) p.info.keys += e.fallback ? 0 : 1;
  if (auto knobs = j.find("knobs"); knobs != j.end()) {
    SPINTUNE_ASSIGN_OR_RETURN(p.knobs, KnobSettingsFromJson(*knobs, "profile.knobs"));
  }
  return p;
}

absl::StatusOr<Profile> ParseProfileJson(const std::string& text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError("not valid JSON");
  return ProfileFromJson(j);
}

}  // namespace spintune
