#include "policy/fit_flags.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace spintune {

void AddFitFlags(CLI::App* app, FitFlags* flags) {
  app->add_option("--objective", flags->objective, "cpu | balanced | latency")
      ->capture_default_str();
  app->add_option_function<double>(
      "--latency-weight", [flags](const double& w) { flags->latency_weight = w; },
      "ns of CPU one ns of latency is worth, in [0, 1e6] (overrides --objective)");
  app->add_option("--max-spin-ns", flags->max_spin_ns,
                  "Longest busy-wait a policy may ask for, in [1, 10000000]")
      ->capture_default_str();
  app->add_option("--min-samples", flags->min_samples,
                  "Samples a key needs before it gets an entry")
      ->capture_default_str();
  app->add_option("--robustness", flags->robustness,
                  "Clamp spin thresholds into [rho*B, B/rho]: worst case <= (1+1/rho) x "
                  "clairvoyant, rho in [0, 1] (0: off)")
      ->capture_default_str();
  app->add_option("--hysteresis", flags->hysteresis,
                  "Keep a key's wait unless a refit is cheaper by this fraction, in [0, 0.5]")
      ->capture_default_str();
}

absl::StatusOr<FitConfig> FitConfigFromFlags(const FitFlags& flags) {
  FitConfig config;
  auto objective = ParseObjective(flags.objective);
  if (!objective.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--objective: ", objective.status().message()));
  }
  config.objective = *objective;
  config.objective_name = flags.objective;
  if (flags.latency_weight.has_value()) {
    const double w = *flags.latency_weight;
    if (!std::isfinite(w) || w < 0 || w > 1e6) {
      return absl::InvalidArgumentError(
          absl::StrCat("--latency-weight ", w, ": a number in [0, 1e6]"));
    }
    config.objective = {w, false};
    config.objective_name = "custom";
  }
  if (flags.max_spin_ns == 0 || flags.max_spin_ns > 10'000'000) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max-spin-ns ", flags.max_spin_ns, ": in [1, 10000000]"));
  }
  config.max_spin_ns = flags.max_spin_ns;
  if (flags.min_samples == 0) return absl::InvalidArgumentError("--min-samples: at least 1");
  config.min_samples = flags.min_samples;
  if (!(flags.robustness >= 0 && flags.robustness <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--robustness ", flags.robustness, ": in [0, 1] (0: off)"));
  }
  config.robustness_rho = flags.robustness;
  if (!(flags.hysteresis >= 0 && flags.hysteresis <= 0.5)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--hysteresis ", flags.hysteresis, ": in [0, 0.5]"));
  }
  config.hysteresis = flags.hysteresis;
  return config;
}

}  // namespace spintune
