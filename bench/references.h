// Reference costs every policy is compared with (models/cost_model.h).
//
// Clairvoyant: per request, the cheapest wait knowing X in advance. Two
// versions: the classic ski-rental one, min over spinning and blocking,
//   OPT_sb(X) = min(X (1 + lambda), irq_cpu + lambda (X + irq_wake)),
// against which the robustness bound is stated; and the broad one, which may
// also sleep exactly until X (SLEEP_THEN_SPIN with S = X - timer_wake):
//   OPT(X) = min(OPT_sb(X), timer_cpu + lambda * max(X, timer_wake)).
// Best static in hindsight is OptimizeWait() on the whole stream.
//
// Pure functions; thread-safe.
#ifndef SPINTUNE_BENCH_REFERENCES_H_
#define SPINTUNE_BENCH_REFERENCES_H_

#include "models/cost_model.h"

namespace spintune {

inline double SpinBlockClairvoyantCost(double x_ns, const PlatformCosts& c, double lambda) {
  const double spin = x_ns * (1 + lambda);
  const double block = c.irq_cpu_ns + lambda * (x_ns + c.irq_wake_ns);
  return spin < block ? spin : block;
}

inline double ClairvoyantCost(double x_ns, const PlatformCosts& c, double lambda) {
  const double sleep = c.timer_cpu_ns + lambda * (x_ns > c.timer_wake_ns ? x_ns : c.timer_wake_ns);
  const double sb = SpinBlockClairvoyantCost(x_ns, c, lambda);
  return sleep < sb ? sleep : sb;
}

}  // namespace spintune

#endif  // SPINTUNE_BENCH_REFERENCES_H_
