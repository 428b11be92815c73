#include "policy/json_fields.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace spintune {

using nlohmann::json;

absl::Status FieldError(const std::string& where, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", message));
}

absl::StatusOr<uint64_t> GetUint(const json& obj, const std::string& key,
                                 const std::string& where, uint64_t max_value,
                                 bool required, uint64_t default_value) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    if (required) return FieldError(where + "." + key, "missing");
    return default_value;
  }
  if (!it->is_number_unsigned() && !(it->is_number_integer() && it->get<int64_t>() >= 0)) {
    return FieldError(where + "." + key, "must be a non-negative integer");
  }
  const uint64_t v = it->get<uint64_t>();
  if (v > max_value) {
    return FieldError(where + "." + key, absl::StrCat("must be <= ", max_value, ", got ", v));
  }
  return v;
}

absl::StatusOr<double> GetDouble(const json& obj, const std::string& key,
                                 const std::string& where, bool required) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    if (required) return FieldError(where + "." + key, "missing");
    return 0.0;
  }
  if (!it->is_number()) return FieldError(where + "." + key, "must be a number");
  const double v = it->get<double>();
  if (!std::isfinite(v) || v < 0) {
    return FieldError(where + "." + key, "must be finite and >= 0");
  }
  return v;
}

absl::StatusOr<double> GetSigned(const json& obj, const std::string& key,
                                 const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return 0.0;
  if (!it->is_number() || !std::isfinite(it->get<double>())) {
    return FieldError(where + "." + key, "must be a finite number");
  }
  return it->get<double>();
}

absl::StatusOr<std::string> GetString(const json& obj, const std::string& key,
                                      const std::string& where, bool required) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    if (required) return FieldError(where + "." + key, "missing");
    return std::string();
  }
  if (!it->is_string()) return FieldError(where + "." + key, "must be a string");
  std::string s = it->get<std::string>();
  if (s.size() > 4096) return FieldError(where + "." + key, "longer than 4096 bytes");
  return s;
}

absl::StatusOr<bool> GetBool(const json& obj, const std::string& key,
                             const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return false;
  if (!it->is_boolean()) return FieldError(where + "." + key, "must be true or false");
  return it->get<bool>();
}

}  // namespace spintune
