// JSON form of a PolicyTable (docs/policy-json.md): what `spintune tune`
// prints, what `spintune policy` shows and what `spintune header --json`
// reads back.
//
// Pure functions; thread-safe.
#ifndef SPINTUNE_POLICY_POLICY_JSON_H_
#define SPINTUNE_POLICY_POLICY_JSON_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "policy/policy_table.h"

namespace spintune {

inline constexpr int kPolicyJsonFormatVersion = 1;

nlohmann::json PolicyTableToJson(const PolicyTable& table);
// Validates structure, types, enums and bounds; InvalidArgument naming the
// offending field (e.g. "entries[3].spin_ns: ...").
absl::StatusOr<PolicyTable> PolicyTableFromJson(const nlohmann::json& json);
absl::StatusOr<PolicyTable> ParsePolicyJson(const std::string& text);

nlohmann::json WaitToJson(const WaitParams& wait);
nlohmann::json DefaultRulesToJson(const std::vector<DefaultRule>& rules);
absl::StatusOr<std::vector<DefaultRule>> DefaultRulesFromJson(const nlohmann::json& json,
                                                              const std::string& where);
// A context list [{"feature": F, "min": A, "max": B}, ...] (null bounds:
// unbounded); read back sorted by feature, a min of 0 as null. InvalidArgument
// for an unknown feature, a repeated one, or min >= max.
nlohmann::json ContextToJson(const ContextConditions& context);
absl::StatusOr<ContextConditions> ContextFromJson(const nlohmann::json& json,
                                                  const std::string& where);
// A device's write opcodes: sorted, unique, at most 4; absent or null gives
// DefaultWriteOpcodes().
absl::StatusOr<std::vector<uint32_t>> WriteOpcodesFromJson(const nlohmann::json& device,
                                                           const std::string& where);
nlohmann::json CostsToJson(const PlatformCosts& costs);
absl::StatusOr<PlatformCosts> CostsFromJson(const nlohmann::json& json,
                                            const std::string& where);

}  // namespace spintune

#endif  // SPINTUNE_POLICY_POLICY_JSON_H_
