// The fit's settings as `spintune tune` and `spintune-tuner` take them from
// their command lines (and the tuner's TOML file): one set of flags, one
// set of defaults, one set of limits, so the same words fit the same table
// offline and live.
//
//   --objective cpu|balanced|latency   --latency-weight W (overrides it)
//   --max-spin-ns   --min-samples   --robustness   --hysteresis
//
// Limits (FitConfigFromFlags, exit 2 in both binaries): latency weight a
// finite number in [0, 1e6]; max spin in [1, 10^7] ns; min samples >= 1;
// robustness in [0, 1]; hysteresis in [0, 0.5].
//
// Thread-compatible plain data and pure functions.
#ifndef SPINTUNE_POLICY_FIT_FLAGS_H_
#define SPINTUNE_POLICY_FIT_FLAGS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "policy/policy_builder.h"

namespace spintune {

struct FitFlags {
  std::string objective = "balanced";
  std::optional<double> latency_weight;  // set: overrides objective
  uint64_t max_spin_ns = 1'000'000;
  uint64_t min_samples = 50;
  double robustness = 0;  // rho; 0: off
  double hysteresis = 0.02;
};

// Adds the flags above to `app`, writing into `*flags` (which must outlive
// the parse). Range errors are left to FitConfigFromFlags, so both binaries
// word them the same.
void AddFitFlags(CLI::App* app, FitFlags* flags);

// The FitConfig the flags ask for, or INVALID_ARGUMENT naming the flag.
absl::StatusOr<FitConfig> FitConfigFromFlags(const FitFlags& flags);

}  // namespace spintune

#endif  // SPINTUNE_POLICY_FIT_FLAGS_H_
