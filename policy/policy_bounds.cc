#include "policy/policy_bounds.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace spintune {

absl::StatusOr<std::set<Strategy>> ParseStrategyList(const std::string& list) {
  std::set<Strategy> out;
  for (absl::string_view name : absl::StrSplit(list, ',', absl::SkipWhitespace())) {
    auto s = ParseStrategy(absl::StripAsciiWhitespace(name));
    if (!s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown strategy '", name, "' (irq, spin, spin_then_irq, sleep_then_spin, poll_sleep)"));
    }
    out.insert(*s);
  }
  if (out.empty()) return absl::InvalidArgumentError("no strategy allowed");
  return out;
}

absl::Status CheckPolicyBounds(const PolicyTable& table, const PolicyBounds& bounds) {
  for (size_t i = 0; i < table.entries.size(); ++i) {
    const PolicyEntry& e = table.entries[i];
    const WaitParams& w = e.wait;
    const std::string where =
        e.fallback ? absl::StrCat("entries[", i, "] (fallback of ", e.key.device, ")")
                   : absl::StrCat("entries[", i, "] (", e.key.device, " ", e.key.cpu_class,
                                  " opcode ", e.key.opcode, " size class ", e.key.size_class, ")");
    if (!bounds.allowed.empty() && bounds.allowed.count(w.strategy) == 0) {
      return absl::PermissionDeniedError(absl::StrCat(
          where, ": strategy ", StrategyName(w.strategy),
          " is not allowed on this board (--allow-strategies)"));
    }
    if (bounds.max_spin_ns == 0) continue;
    const bool spins = w.strategy == Strategy::kSpin || w.strategy == Strategy::kSpinThenIrq ||
                       w.strategy == Strategy::kSleepThenSpin;
    if (!spins) continue;
    if (w.spin_ns == 0 && w.strategy != Strategy::kSpinThenIrq) {
      return absl::PermissionDeniedError(absl::StrCat(
          where, ": ", StrategyName(w.strategy), " without a spin bound exceeds the local ",
          "--max-spin-ns ", bounds.max_spin_ns));
    }
    if (w.spin_ns > bounds.max_spin_ns) {
      return absl::PermissionDeniedError(absl::StrCat(
          where, ": ", StrategyName(w.strategy), " spins up to ", w.spin_ns,
          " ns, above the local --max-spin-ns ", bounds.max_spin_ns));
    }
  }
  return absl::OkStatus();
}

}  // namespace spintune
