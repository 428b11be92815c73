// PolicyBounds: what a board's own configuration allows a pushed table to
// ask of its drivers (the agent's --max-spin-ns and --allow-strategies). A
// table that asks for more is refused as a whole; the last good one stays.
//
// Pure functions; thread-safe.
#ifndef SPINTUNE_POLICY_POLICY_BOUNDS_H_
#define SPINTUNE_POLICY_POLICY_BOUNDS_H_

#include <cstdint>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "policy/policy_table.h"

namespace spintune {

struct PolicyBounds {
  // Longest busy-wait any entry may ask for: the SPIN_THEN_IRQ threshold,
  // the SPIN timeout, the SLEEP_THEN_SPIN spin bound (which must then be
  // set). 0: no local limit.
  uint64_t max_spin_ns = 0;
  // Strategies an entry may use; empty: all.
  std::set<Strategy> allowed;
};

// "irq,spin_then_irq" -> the set. InvalidArgument naming an unknown name.
absl::StatusOr<std::set<Strategy>> ParseStrategyList(const std::string& list);

// OK when every entry (fallbacks included) is within `bounds`; otherwise
// PermissionDenied naming the first entry and the local limit it breaks.
absl::Status CheckPolicyBounds(const PolicyTable& table, const PolicyBounds& bounds);

}  // namespace spintune

#endif  // SPINTUNE_POLICY_POLICY_BOUNDS_H_
