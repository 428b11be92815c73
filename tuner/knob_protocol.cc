#include "tuner/knob_protocol.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/fingerprint.h"
#include "common/printable.h"
#include "common/status_macros.h"

namespace spintune {
namespace {

constexpr size_t kMaxKnobs = 32;
constexpr size_t kMaxCoordinates = 64;
constexpr size_t kMaxValues = 4095;  // the start may add one: the design takes 4096
constexpr size_t kMaxTotalValues = 16384;
constexpr size_t kMaxNameBytes = 64;

absl::Status Invalid(const std::string& where, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("knobs_declared.", where, ": ", what));
}

absl::Status CheckName(const std::string& name, const std::string& where) {
  if (name.empty() || name.size() > kMaxNameBytes || Printable(name) != name ||
      name.find_first_of(" .=,") != std::string::npos) {
    return Invalid(where, "1..64 printable bytes without spaces, '.', '=' or ','");
  }
  return absl::OkStatus();
}

absl::Status CheckValues(const google::protobuf::RepeatedField<int64_t>& values,
                         const std::string& where) {
  if (values.empty() || static_cast<size_t>(values.size()) > kMaxValues) {
    return Invalid(where, absl::StrCat("needs 1..", kMaxValues, " values"));
  }
  if (std::set<int64_t>(values.begin(), values.end()).size() != static_cast<size_t>(values.size())) {
    return Invalid(where, "repeats a value");
  }
  return absl::OkStatus();
}

KnobCoordinate Coordinate(std::string name, const google::protobuf::RepeatedField<int64_t>& values,
                          int64_t start) {
  KnobCoordinate c;
  c.name = std::move(name);
  c.values.assign(values.begin(), values.end());
  if (std::find(c.values.begin(), c.values.end(), start) == c.values.end()) {
    c.values.push_back(start);
  }
  return c;
}

}  // namespace

absl::StatusOr<DeclaredSpace> SpaceFromDeclaration(const v1::KnobsDeclared& d) {
  SPINTUNE_RETURN_IF_ERROR(CheckName(d.name(), "name"));
  SPINTUNE_RETURN_IF_ERROR(CheckName(d.metric(), "metric"));
  if (d.knobs().empty() || static_cast<size_t>(d.knobs_size()) > kMaxKnobs) {
    return Invalid("knobs", absl::StrCat("needs 1..", kMaxKnobs, " knobs"));
  }
  if (d.constraints_size() > 16) return Invalid("constraints", "at most 16");
  for (int i = 0; i < d.constraints_size(); ++i) {
    SPINTUNE_RETURN_IF_ERROR(CheckName(d.constraints(i).metric(),
                                       absl::StrCat("constraints[", i, "].metric")));
  }
  if (d.max_trials() > 100000) return Invalid("max_trials", "at most 100000");
  for (const std::string* text : {&d.metric_unit(), &d.workload()}) {
    if (text->size() > 4096) return Invalid("metric_unit/workload", "at most 4096 bytes");
  }
  DeclaredSpace out;
  std::set<std::string> names;
  for (int i = 0; i < d.knobs_size(); ++i) {
    const v1::Knob& k = d.knobs(i);
    const std::string at = absl::StrCat("knobs[", i, "]");
    SPINTUNE_RETURN_IF_ERROR(CheckName(k.name(), at + ".name"));
    if (!names.insert(k.name()).second) return Invalid(at + ".name", "repeats a knob");
    const int domains = !k.values().empty() + !k.labels().empty() + !k.fields().empty();
    if (domains != 1) return Invalid(at, "needs exactly one of values, labels, fields");
    if (!k.values().empty()) {
      SPINTUNE_RETURN_IF_ERROR(CheckValues(k.values(), at + ".values"));
      out.space.coordinates.push_back(Coordinate(k.name(), k.values(), k.start_value()));
      out.start.push_back(k.start_value());
    } else if (!k.labels().empty()) {
      if (static_cast<size_t>(k.labels_size()) > kMaxValues) return Invalid(at + ".labels", "too many");
      std::set<std::string> seen;
      KnobCoordinate c;
      c.name = k.name();
      for (int v = 0; v < k.labels_size(); ++v) {
        if (k.labels(v).empty() || k.labels(v).size() > kMaxNameBytes ||
            Printable(k.labels(v)) != k.labels(v) || !seen.insert(k.labels(v)).second) {
          return Invalid(absl::StrCat(at, ".labels[", v, "]"), "empty, too long or repeated");
        }
        c.labels.push_back(k.labels(v));
        c.values.push_back(v);
      }
      if (k.start_value() < 0 || k.start_value() >= k.labels_size()) {
        return Invalid(at + ".start_value", "is not a label index");
      }
      out.space.coordinates.push_back(std::move(c));
      out.start.push_back(k.start_value());
    } else {
      uint64_t used = 0;
      for (int f = 0; f < k.fields_size(); ++f) {
        const v1::KnobField& field = k.fields(f);
        const std::string fat = absl::StrCat(at, ".fields[", f, "]");
        SPINTUNE_RETURN_IF_ERROR(CheckName(field.name(), fat + ".name"));
        if (field.width() < 1 || field.width() > 32 ||
            uint64_t{field.shift()} + field.width() > 64) {
          return Invalid(fat, "needs width 1..32 and shift + width <= 64");
        }
        const uint64_t mask = ((uint64_t{1} << field.width()) - 1) << field.shift();
        if (used & mask) return Invalid(fat, "overlaps another field");
        used |= mask;
        SPINTUNE_RETURN_IF_ERROR(CheckValues(field.values(), fat + ".values"));
        for (int64_t v : field.values()) {
          if (v < 0 || static_cast<uint64_t>(v) > (mask >> field.shift())) {
            return Invalid(fat + ".values", absl::StrCat(v, " does not fit"));
          }
        }
        const int64_t start =
            static_cast<int64_t>((static_cast<uint64_t>(k.start_value()) & mask) >> field.shift());
        KnobCoordinate c = Coordinate(k.name() + "." + field.name(), field.values(), start);
        c.register_name = k.name();
        c.shift = field.shift();
        c.width = field.width();
        out.space.coordinates.push_back(std::move(c));
        out.start.push_back(start);
      }
    }
  }
  size_t values = 0;
  for (const auto& c : out.space.coordinates) values += c.values.size();
  if (out.space.coordinates.size() > kMaxCoordinates || values > kMaxTotalValues) {
    return Invalid("knobs", absl::StrCat("more than ", kMaxCoordinates, " coordinates or ",
                                         kMaxTotalValues, " candidate values in all"));
  }
  return out;
}

uint64_t DeclarationFingerprint(const v1::KnobsDeclared& declared) {
  v1::KnobsDeclared d = declared;
  for (auto& k : *d.mutable_knobs()) k.clear_start_value();
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream out(&bytes);
    google::protobuf::io::CodedOutputStream coded(&out);
    coded.SetSerializationDeterministic(true);
    d.SerializeToCodedStream(&coded);
  }
  // Stored as a signed SQLite integer: keep it positive.
  return Fingerprint64(bytes) >> 1;
}

std::string ConstraintsText(const v1::KnobsDeclared& d) {
  std::string out;
  for (const auto& c : d.constraints()) {
    std::string bound;
    if (c.has_min() && c.has_max()) {
      bound = absl::StrFormat(" in [%g, %g]", c.min(), c.max());
    } else if (c.has_max()) {
      bound = absl::StrFormat(" <= %g", c.max());
    } else if (c.has_min()) {
      bound = absl::StrFormat(" >= %g", c.min());
    }
    absl::StrAppend(&out, out.empty() ? "" : ", ", c.metric(), bound);
  }
  return out;
}

void SettingToProto(const KnobSpace& space, const KnobSetting& setting,
                    google::protobuf::RepeatedPtrField<v1::KnobValue>* out) {
  for (size_t i = 0; i < space.coordinates.size() && i < setting.size(); ++i) {
    v1::KnobValue* v = out->Add();
    v->set_coordinate(space.coordinates[i].name);
    v->set_value(setting[i]);
  }
}

std::vector<KnobSettingRecord> SettingRecords(const KnobSpace& space, const KnobSetting& setting,
                                              const std::string& declaration,
                                              int64_t experiment_id, const std::string& evidence) {
  std::vector<KnobSettingRecord> out;
  for (size_t i = 0; i < space.coordinates.size() && i < setting.size(); ++i) {
    const KnobCoordinate& c = space.coordinates[i];
    KnobSettingRecord r;
    r.declaration = declaration;
    r.coordinate = c.name;
    r.value = setting[i];
    r.label = c.Format(setting[i]);
    r.register_name = c.register_name;
    r.shift = c.shift;
    r.width = c.width;
    r.experiment_id = experiment_id;
    r.evidence = evidence;
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace spintune
