// Readers of JSON fields that check presence, type and range, with errors
// that name the field ("entries[3].spin_ns: must be <= ..."). Shared by the
// policy JSON, platform JSON and profile readers.
//
// Pure functions; thread-safe.
#ifndef SPINTUNE_POLICY_JSON_FIELDS_H_
#define SPINTUNE_POLICY_JSON_FIELDS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace spintune {

// InvalidArgument "<where>: <message>".
absl::Status FieldError(const std::string& where, absl::string_view message);

// obj[key] as an integer in [0, max_value]; missing or null gives
// `default_value` unless `required`.
absl::StatusOr<uint64_t> GetUint(const nlohmann::json& obj, const std::string& key,
                                 const std::string& where, uint64_t max_value,
                                 bool required = true, uint64_t default_value = 0);
// A finite number >= 0 (0 when missing and not required).
absl::StatusOr<double> GetDouble(const nlohmann::json& obj, const std::string& key,
                                 const std::string& where, bool required = true);
// A finite number of either sign (gains can be negative); 0 when missing.
absl::StatusOr<double> GetSigned(const nlohmann::json& obj, const std::string& key,
                                 const std::string& where);
// A string of at most 4096 bytes ("" when missing and not required).
absl::StatusOr<std::string> GetString(const nlohmann::json& obj, const std::string& key,
                                      const std::string& where, bool required = true);
// true or false (false when missing).
absl::StatusOr<bool> GetBool(const nlohmann::json& obj, const std::string& key,
                             const std::string& where);

}  // namespace spintune

#endif  // SPINTUNE_POLICY_JSON_FIELDS_H_
