#include "policy/policy_json.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "policy/json_fields.h"

namespace spintune {
namespace {

using nlohmann::json;

constexpr uint64_t kMaxParamNs = 4'000'000'000;  // fits the blob's u32

absl::StatusOr<WaitParams> WaitFromJson(const json& obj, const std::string& where) {
  SPINTUNE_ASSIGN_OR_RETURN(std::string name, GetString(obj, "strategy", where));
  auto strategy = ParseStrategy(name);
  if (!strategy.ok()) return FieldError(where + ".strategy", strategy.status().message());
  WaitParams w;
  w.strategy = *strategy;
  SPINTUNE_ASSIGN_OR_RETURN(w.spin_ns, GetUint(obj, "spin_ns", where, kMaxParamNs, false));
  SPINTUNE_ASSIGN_OR_RETURN(w.sleep_ns, GetUint(obj, "sleep_ns", where, kMaxParamNs, false));
  SPINTUNE_ASSIGN_OR_RETURN(w.poll_interval_ns,
                            GetUint(obj, "poll_interval_ns", where, kMaxParamNs, false));
  return w;
}

json FamilyToJson(const FamilyOptimum& f) {
  json j = WaitToJson(f.params);
  j["strategy"] = std::string(StrategyName(f.strategy));
  j["feasible"] = f.feasible;
  j["cpu_ns"] = f.expected.cpu_ns;
  j["latency_ns"] = f.expected.latency_ns;
  j["cost_ns"] = f.cost_ns;
  return j;
}

}  // namespace

json WaitToJson(const WaitParams& w) {
  return json{{"strategy", std::string(StrategyName(w.strategy))},
              {"spin_ns", w.spin_ns},
              {"sleep_ns", w.sleep_ns},
              {"poll_interval_ns", w.poll_interval_ns}};
}

json DefaultRulesToJson(const std::vector<DefaultRule>& rules) {
  json out = json::array();
  for (const auto& r : rules) {
    json rj = WaitToJson(r.wait);
    rj["opcode"] = r.any_opcode ? json(nullptr) : json(r.opcode);
    rj["min_bytes"] = r.min_bytes;
    rj["max_bytes"] = r.max_bytes;
    rj["note"] = r.note;
    out.push_back(std::move(rj));
  }
  return out;
}

absl::StatusOr<std::vector<DefaultRule>> DefaultRulesFromJson(const json& rules,
                                                              const std::string& where) {
  if (!rules.is_array()) return FieldError(where, "must be an array");
  std::vector<DefaultRule> out;
  for (size_t r = 0; r < rules.size(); ++r) {
    const std::string rw = absl::StrCat(where, "[", r, "]");
    const json& rj = rules[r];
    if (!rj.is_object()) return FieldError(rw, "must be an object");
    DefaultRule rule;
    SPINTUNE_ASSIGN_OR_RETURN(rule.wait, WaitFromJson(rj, rw));
    rule.any_opcode = !rj.contains("opcode") || rj["opcode"].is_null();
    if (!rule.any_opcode) {
      SPINTUNE_ASSIGN_OR_RETURN(uint64_t op, GetUint(rj, "opcode", rw, 0xFFFFFFFEu));
      rule.opcode = static_cast<uint32_t>(op);
    }
    SPINTUNE_ASSIGN_OR_RETURN(rule.min_bytes, GetUint(rj, "min_bytes", rw, ~uint64_t{0}, false));
    SPINTUNE_ASSIGN_OR_RETURN(rule.max_bytes, GetUint(rj, "max_bytes", rw, ~uint64_t{0}, false));
    SPINTUNE_ASSIGN_OR_RETURN(rule.note, GetString(rj, "note", rw, false));
    out.push_back(std::move(rule));
  }
  return out;
}

json ContextToJson(const ContextConditions& context) {
  json out = json::array();
  for (const auto& c : context) {
    out.push_back(json{{"feature", std::string(ContextFeatureName(c.feature))},
                       {"min", c.min ? json(*c.min) : json(nullptr)},
                       {"max", c.max ? json(*c.max) : json(nullptr)}});
  }
  return out;
}

absl::StatusOr<ContextConditions> ContextFromJson(const json& list, const std::string& where) {
  if (!list.is_array()) return FieldError(where, "must be an array");
  ContextConditions out;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string cw = absl::StrCat(where, "[", i, "]");
    const json& cj = list[i];
    if (!cj.is_object()) return FieldError(cw, "must be an object");
    SPINTUNE_ASSIGN_OR_RETURN(std::string name, GetString(cj, "feature", cw));
    auto feature = ParseContextFeature(name);
    if (!feature.ok()) return FieldError(cw + ".feature", feature.status().message());
    ContextCondition c;
    c.feature = *feature;
    for (const char* bound : {"min", "max"}) {
      if (!cj.contains(bound) || cj[bound].is_null()) continue;
      SPINTUNE_ASSIGN_OR_RETURN(uint64_t v, GetUint(cj, bound, cw, ~uint64_t{0}));
      (std::string(bound) == "min" ? c.min : c.max) = v;
    }
    if (c.min == uint64_t{0}) c.min.reset();  // from 0 is unbounded
    if (!c.min && !c.max) return FieldError(cw, "a condition needs min or max");
    if (c.min && c.max && *c.min >= *c.max) return FieldError(cw, "min must be below max");
    for (const auto& other : out) {
      if (other.feature == c.feature) return FieldError(cw, "feature listed twice");
    }
    out.push_back(c);
  }
  std::sort(out.begin(), out.end(), [](const ContextCondition& a, const ContextCondition& b) {
    return a.feature < b.feature;
  });
  return out;
}

absl::StatusOr<std::vector<uint32_t>> WriteOpcodesFromJson(const json& device,
                                                           const std::string& where) {
  auto it = device.find("write_opcodes");
  if (it == device.end() || it->is_null()) return DefaultWriteOpcodes();
  const std::string ww = where + ".write_opcodes";
  if (!it->is_array()) return FieldError(ww, "must be an array");
  std::vector<uint32_t> out;
  for (size_t i = 0; i < it->size(); ++i) {
    const json& v = (*it)[i];
    const bool integer =
        v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0);
    if (!integer || v.get<uint64_t>() > 0xFFFFFFFEu) {
      return FieldError(absl::StrCat(ww, "[", i, "]"), "must be an opcode (0..4294967294)");
    }
    out.push_back(static_cast<uint32_t>(v.get<uint64_t>()));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  if (out.size() > kMaxWriteOpcodes) {
    return FieldError(ww, absl::StrCat("more than ", kMaxWriteOpcodes, " opcodes"));
  }
  return out;
}

json CostsToJson(const PlatformCosts& c) {
  return json{{"irq_cpu_ns", c.irq_cpu_ns},
              {"irq_wake_ns", c.irq_wake_ns},
              {"poll_read_ns", c.poll_read_ns},
              {"timer_cpu_ns", c.timer_cpu_ns},
              {"timer_wake_ns", c.timer_wake_ns}};
}

absl::StatusOr<PlatformCosts> CostsFromJson(const json& obj, const std::string& where) {
  if (!obj.is_object()) return FieldError(where, "must be an object");
  PlatformCosts c;
  SPINTUNE_ASSIGN_OR_RETURN(c.irq_cpu_ns, GetDouble(obj, "irq_cpu_ns", where));
  SPINTUNE_ASSIGN_OR_RETURN(c.irq_wake_ns, GetDouble(obj, "irq_wake_ns", where));
  SPINTUNE_ASSIGN_OR_RETURN(c.poll_read_ns, GetDouble(obj, "poll_read_ns", where));
  SPINTUNE_ASSIGN_OR_RETURN(c.timer_cpu_ns, GetDouble(obj, "timer_cpu_ns", where));
  SPINTUNE_ASSIGN_OR_RETURN(c.timer_wake_ns, GetDouble(obj, "timer_wake_ns", where));
  absl::Status s = c.Validate();
  if (!s.ok()) return FieldError(where, s.message());
  return c;
}

json PolicyTableToJson(const PolicyTable& t) {
  json j;
  j["format"] = "spintune-policy";
  j["format_version"] = kPolicyJsonFormatVersion;
  j["board"] = t.board;
  j["version"] = t.version;
  j["fitted_at"] = t.fitted_at;
  j["origin"] = t.origin;
  j["objective"] = t.objective_name;
  j["latency_weight"] = t.latency_weight;
  j["max_spin_ns"] = t.max_spin_ns;
  j["min_samples"] = t.min_samples;
  j["robustness_rho"] = t.robustness_rho;
  j["cpu_classes"] = json::array();
  for (const auto& c : t.cpu_classes) {
    json cj = CostsToJson(c.costs);
    cj["name"] = c.name;
    cj["cpu_khz"] = c.cpu_khz;
    j["cpu_classes"].push_back(std::move(cj));
  }
  j["devices"] = json::array();
  for (const auto& d : t.devices) {
    j["devices"].push_back(json{{"name", d.name},
                                {"driver", d.driver},
                                {"model", d.model},
                                {"default_rules", DefaultRulesToJson(d.default_rules)},
                                {"write_opcodes", d.write_opcodes}});
  }
  j["entries"] = json::array();
  for (const auto& e : t.entries) {
    json ej = WaitToJson(e.wait);
    ej["device"] = e.key.device;
    ej["cpu_class"] = e.key.cpu_class;
    ej["opcode"] = e.key.opcode;
    ej["size_class"] = e.key.size_class;
    ej["fallback"] = e.fallback;
    ej["context"] = ContextToJson(e.context);
    ej["samples"] = e.samples;
    ej["p50_ns"] = e.p50_ns;
    ej["p99_ns"] = e.p99_ns;
    ej["expected_cpu_ns"] = e.expected.cpu_ns;
    ej["expected_latency_ns"] = e.expected.latency_ns;
    ej["expected_cost_ns"] = e.expected_cost_ns;
    ej["gain_baseline"] = e.gain_baseline;
    ej["gain_ns"] = e.gain_ns;
    ej["gain_ci_low"] = e.gain_ci_low_ns;
    ej["gain_ci_high"] = e.gain_ci_high_ns;
    if (e.trial) {  // absent without one
      json tj = WaitToJson(e.trial->wait);
      tj["share"] = e.trial->share;
      ej["trial"] = std::move(tj);
    }
    if (e.default_wait) {
      json dj = WaitToJson(*e.default_wait);
      dj["cpu_ns"] = e.default_expected.cpu_ns;
      dj["latency_ns"] = e.default_expected.latency_ns;
      dj["cost_ns"] = e.default_cost_ns;
      ej["default"] = std::move(dj);
    } else {
      ej["default"] = nullptr;
    }
    json fams = json::array();
    for (const auto& f : e.families) fams.push_back(FamilyToJson(f));
    ej["families"] = std::move(fams);
    j["entries"].push_back(std::move(ej));
  }
  return j;
}

absl::StatusOr<PolicyTable> PolicyTableFromJson(const json& j) {
  if (!j.is_object()) return absl::InvalidArgumentError("policy JSON must be an object");
  PolicyTable t;
  if (j.contains("format")) {
    SPINTUNE_ASSIGN_OR_RETURN(std::string format, GetString(j, "format", "policy"));
    if (format != "spintune-policy") {
      return FieldError("format", absl::StrCat("expected 'spintune-policy', got '", format, "'"));
    }
    SPINTUNE_ASSIGN_OR_RETURN(uint64_t fv, GetUint(j, "format_version", "policy", 1000));
    if (fv != kPolicyJsonFormatVersion) {
      return FieldError("format_version", absl::StrCat("unsupported version ", fv));
    }
  }
  SPINTUNE_ASSIGN_OR_RETURN(t.board, GetString(j, "board", "policy", false));
  SPINTUNE_ASSIGN_OR_RETURN(t.version, GetUint(j, "version", "policy", ~uint64_t{0}, false));
  SPINTUNE_ASSIGN_OR_RETURN(t.fitted_at, GetString(j, "fitted_at", "policy", false));
  SPINTUNE_ASSIGN_OR_RETURN(t.origin, GetString(j, "origin", "policy", false));
  if (t.origin.empty()) t.origin = "fitted";
  if (t.origin != "fitted" && t.origin != "predicted" && t.origin != "rollback" &&
      t.origin != "verify-rollback" && t.origin != "verify-settled") {
    return FieldError("origin",
                      "must be fitted, predicted, rollback, verify-rollback or verify-settled");
  }
  SPINTUNE_ASSIGN_OR_RETURN(t.objective_name, GetString(j, "objective", "policy", false));
  SPINTUNE_ASSIGN_OR_RETURN(t.latency_weight, GetDouble(j, "latency_weight", "policy", false));
  SPINTUNE_ASSIGN_OR_RETURN(t.max_spin_ns, GetUint(j, "max_spin_ns", "policy", kMaxParamNs, false));
  SPINTUNE_ASSIGN_OR_RETURN(t.min_samples,
                            GetUint(j, "min_samples", "policy", ~uint64_t{0}, false));
  SPINTUNE_ASSIGN_OR_RETURN(t.robustness_rho, GetDouble(j, "robustness_rho", "policy", false));
  if (t.robustness_rho > 1) return FieldError("robustness_rho", "must be in [0, 1]");

  auto classes = j.find("cpu_classes");
  if (classes == j.end() || !classes->is_array() || classes->empty()) {
    return FieldError("cpu_classes", "must be a non-empty array");
  }
  if (classes->size() > 254) return FieldError("cpu_classes", "more than 254 classes");
  for (size_t i = 0; i < classes->size(); ++i) {
    const std::string where = absl::StrCat("cpu_classes[", i, "]");
    const json& cj = (*classes)[i];
    CpuClassInfo c;
    SPINTUNE_ASSIGN_OR_RETURN(c.name, GetString(cj, "name", where));
    if (c.name.empty() || c.name == kAnyCpuClass) return FieldError(where + ".name", "invalid");
    SPINTUNE_ASSIGN_OR_RETURN(c.cpu_khz, GetUint(cj, "cpu_khz", where, 1'000'000'000, false));
    SPINTUNE_ASSIGN_OR_RETURN(c.costs, CostsFromJson(cj, where));
    if (t.CpuClassIndex(c.name) >= 0) return FieldError(where + ".name", "duplicate");
    t.cpu_classes.push_back(std::move(c));
  }

  auto devices = j.find("devices");
  if (devices == j.end() || !devices->is_array()) {
    return FieldError("devices", "must be an array");
  }
  for (size_t i = 0; i < devices->size(); ++i) {
    const std::string where = absl::StrCat("devices[", i, "]");
    const json& dj = (*devices)[i];
    if (!dj.is_object()) return FieldError(where, "must be an object");
    DeviceInfo d;
    SPINTUNE_ASSIGN_OR_RETURN(d.name, GetString(dj, "name", where));
    if (d.name.empty()) return FieldError(where + ".name", "empty");
    SPINTUNE_ASSIGN_OR_RETURN(d.driver, GetString(dj, "driver", where, false));
    SPINTUNE_ASSIGN_OR_RETURN(d.model, GetString(dj, "model", where, false));
    auto rules = dj.find("default_rules");
    if (rules != dj.end() && !rules->is_null()) {
      SPINTUNE_ASSIGN_OR_RETURN(d.default_rules,
                                DefaultRulesFromJson(*rules, where + ".default_rules"));
    }
    SPINTUNE_ASSIGN_OR_RETURN(d.write_opcodes, WriteOpcodesFromJson(dj, where));
    t.devices.push_back(std::move(d));
  }

  auto entries = j.find("entries");
  if (entries == j.end() || !entries->is_array()) {
    return FieldError("entries", "must be an array");
  }
  for (size_t i = 0; i < entries->size(); ++i) {
    const std::string where = absl::StrCat("entries[", i, "]");
    const json& ej = (*entries)[i];
    if (!ej.is_object()) return FieldError(where, "must be an object");
    PolicyEntry e;
    SPINTUNE_ASSIGN_OR_RETURN(e.key.device, GetString(ej, "device", where));
    SPINTUNE_ASSIGN_OR_RETURN(e.fallback, GetBool(ej, "fallback", where));
    SPINTUNE_ASSIGN_OR_RETURN(e.key.cpu_class,
                              GetString(ej, "cpu_class", where, !e.fallback));
    if (e.fallback) {
      e.key.cpu_class = kAnyCpuClass;
    } else if (t.CpuClassIndex(e.key.cpu_class) < 0) {
      return FieldError(where + ".cpu_class", absl::StrCat("unknown class '", e.key.cpu_class, "'"));
    }
    SPINTUNE_ASSIGN_OR_RETURN(uint64_t op, GetUint(ej, "opcode", where, 0xFFFFFFFEu, !e.fallback));
    e.key.opcode = static_cast<uint32_t>(op);
    SPINTUNE_ASSIGN_OR_RETURN(uint64_t sc, GetUint(ej, "size_class", where, 64, !e.fallback));
    e.key.size_class = static_cast<uint32_t>(sc);
    if (e.fallback) e.key.opcode = 0, e.key.size_class = 0;
    auto context = ej.find("context");
    if (context != ej.end() && !context->is_null()) {
      SPINTUNE_ASSIGN_OR_RETURN(e.context, ContextFromJson(*context, where + ".context"));
    }
    SPINTUNE_ASSIGN_OR_RETURN(e.wait, WaitFromJson(ej, where));
    SPINTUNE_ASSIGN_OR_RETURN(e.samples, GetUint(ej, "samples", where, ~uint64_t{0}, false));
    SPINTUNE_ASSIGN_OR_RETURN(e.p50_ns, GetDouble(ej, "p50_ns", where, false));
    SPINTUNE_ASSIGN_OR_RETURN(e.p99_ns, GetDouble(ej, "p99_ns", where, false));
    SPINTUNE_ASSIGN_OR_RETURN(e.expected.cpu_ns, GetDouble(ej, "expected_cpu_ns", where, false));
    SPINTUNE_ASSIGN_OR_RETURN(e.expected.latency_ns,
                              GetDouble(ej, "expected_latency_ns", where, false));
    SPINTUNE_ASSIGN_OR_RETURN(e.expected_cost_ns, GetDouble(ej, "expected_cost_ns", where, false));
    SPINTUNE_ASSIGN_OR_RETURN(e.gain_baseline, GetString(ej, "gain_baseline", where, false));
    SPINTUNE_ASSIGN_OR_RETURN(e.gain_ns, GetSigned(ej, "gain_ns", where));
    SPINTUNE_ASSIGN_OR_RETURN(e.gain_ci_low_ns, GetSigned(ej, "gain_ci_low", where));
    SPINTUNE_ASSIGN_OR_RETURN(e.gain_ci_high_ns, GetSigned(ej, "gain_ci_high", where));
    auto trial = ej.find("trial");
    if (trial != ej.end() && !trial->is_null()) {
      if (!trial->is_object() || e.fallback) {
        return FieldError(where + ".trial", "must be an object, on a non-fallback entry");
      }
      Trial tr;
      SPINTUNE_ASSIGN_OR_RETURN(tr.wait, WaitFromJson(*trial, where + ".trial"));
      SPINTUNE_ASSIGN_OR_RETURN(uint64_t share, GetUint(*trial, "share", where + ".trial", 255));
      if (share == 0) return FieldError(where + ".trial.share", "must be 1..255");
      tr.share = static_cast<uint32_t>(share);
      e.trial = tr;
    }
    auto def = ej.find("default");
    if (def != ej.end() && def->is_object()) {
      SPINTUNE_ASSIGN_OR_RETURN(WaitParams dw, WaitFromJson(*def, where + ".default"));
      e.default_wait = dw;
      SPINTUNE_ASSIGN_OR_RETURN(e.default_expected.cpu_ns, GetDouble(*def, "cpu_ns", where, false));
      SPINTUNE_ASSIGN_OR_RETURN(e.default_expected.latency_ns,
                                GetDouble(*def, "latency_ns", where, false));
      SPINTUNE_ASSIGN_OR_RETURN(e.default_cost_ns, GetDouble(*def, "cost_ns", where, false));
    }
    auto fams = ej.find("families");
    if (fams != ej.end() && fams->is_array()) {
      for (size_t f = 0; f < fams->size(); ++f) {
        const std::string fw = absl::StrCat(where, ".families[", f, "]");
        const json& fj = (*fams)[f];
        if (!fj.is_object()) return FieldError(fw, "must be an object");
        FamilyOptimum fo;
        SPINTUNE_ASSIGN_OR_RETURN(fo.params, WaitFromJson(fj, fw));
        fo.strategy = fo.params.strategy;
        SPINTUNE_ASSIGN_OR_RETURN(fo.feasible, GetBool(fj, "feasible", fw));
        SPINTUNE_ASSIGN_OR_RETURN(fo.expected.cpu_ns, GetDouble(fj, "cpu_ns", fw, false));
        SPINTUNE_ASSIGN_OR_RETURN(fo.expected.latency_ns, GetDouble(fj, "latency_ns", fw, false));
        SPINTUNE_ASSIGN_OR_RETURN(fo.cost_ns, GetDouble(fj, "cost_ns", fw, false));
        e.families.push_back(fo);
      }
    }
    t.entries.push_back(std::move(e));
  }
  SortEntries(&t.entries);
  // A key has one entry without context, or leaves that form its tree.
  for (size_t first = 0; first < t.entries.size();) {
    const auto& a = t.entries[first];
    size_t last = first + 1;
    while (last < t.entries.size() && t.entries[last].key == a.key &&
           t.entries[last].fallback == a.fallback) {
      ++last;
    }
    const std::string key = absl::StrCat("device '", a.key.device, "' ",
                                         a.fallback ? std::string("fallback")
                                                    : absl::StrCat("opcode ", a.key.opcode,
                                                                   " size class ",
                                                                   a.key.size_class));
    if (last - first == 1 && !a.context.empty()) {
      return FieldError("entries", absl::StrCat(key, ": a single entry with a context"));
    }
    if (last - first > 1) {
      std::vector<ContextConditions> leaves;
      for (size_t i = first; i < last; ++i) leaves.push_back(t.entries[i].context);
      auto tree = ContextTree::FromLeafConditions(leaves);
      if (a.fallback || !tree.ok()) {
        return FieldError("entries",
                          absl::StrCat("duplicate key for ", key,
                                       a.fallback ? "" : absl::StrCat(" whose contexts are not "
                                                                      "a tree's leaves: ",
                                                                      tree.status().message())));
      }
    }
    first = last;
  }
  return t;
}

absl::StatusOr<PolicyTable> ParsePolicyJson(const std::string& text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError("not valid JSON");
  return PolicyTableFromJson(j);
}

}  // namespace spintune
