// Bootstrap confidence interval of the expected gain of one wait policy over
// another on an empirical distribution.
//
//   gain = E[J_baseline(X) - J_chosen(X)]   (ns per request, > 0: chosen is cheaper)
//
// Each point's cost is its expectation over `model` (ExpectedRequestCost).
// Percentile bootstrap with Poisson(count) reweighting of every point
// (Knuth's method; for counts above 50 the normal approximation
// N(count, count)), `resamples` draws from a SplitMix64 generator seeded
// with `seed`: deterministic for a given input, on every platform.
//
// Pure function; thread-safe.
#ifndef SPINTUNE_MODELS_BOOTSTRAP_H_
#define SPINTUNE_MODELS_BOOTSTRAP_H_

#include <cstdint>

#include "models/cost_model.h"
#include "models/platform_model.h"
#include "models/wait_distribution.h"

namespace spintune {

struct GainInterval {
  double gain_ns = 0;  // on the distribution itself
  double low_ns = 0;   // lower end of the interval
  double high_ns = 0;  // upper end
};

// REQUIRES: !dist.empty(), resamples >= 10, 0 < confidence < 1.
GainInterval BootstrapGain(const WaitDistribution& dist, const WaitParams& chosen,
                           const WaitParams& baseline, const PlatformModel& model,
                           double latency_weight, int resamples = 200,
                           double confidence = 0.95, uint64_t seed = 1);

}  // namespace spintune

#endif  // SPINTUNE_MODELS_BOOTSTRAP_H_
