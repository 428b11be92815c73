// WaitOptimizer: the exact optimum of the cost model (models/cost_model.h)
// over an empirical distribution of completion times.
//
// For each strategy family the optimizer evaluates every candidate parameter
// exactly with prefix sums (see wait_distribution.h) and keeps the cheapest:
//
//   IRQ             one candidate.
//   SPIN            one candidate; feasible when the largest X <= max_spin_ns.
//   SPIN_THEN_IRQ   T in {catch threshold of every point} with T <= max_spin_ns.
//                   E[J](T) is piecewise linear between points with a jump
//                   at each, so the optimum lies at a point (Karlin et al.
//                   1991): sweep j = 1..n, spin catches points [0, j):
//                     cpu(T) = (P_j + (N - W_j)(T + irq_cpu)) / N
//                     lat(T) = (P_n + (N - W_j) irq_wake) / N
//                   (T = 0 is the IRQ candidate.) When the best T catches
//                   every sample, T is raised to B = irq_cpu + lambda *
//                   irq_wake (capped): same cost on the samples, and waits
//                   longer than any seen still spin until B (Karlin's T = B).
//   SLEEP_THEN_SPIN D = S + timer_wake; the spin after the sleep is bounded
//                   by max_spin_ns (then IRQ). For each timer oversleep atom
//                   tw, J is linear in S between the events S = X_j - tw and
//                   S = X_j - max_spin_ns - tw, and so is its expectation
//                   over the atoms: S = 0 and those events are the exact
//                   candidates, visited in increasing order by merging the
//                   (already sorted) event sequences, no sort (formulas in
//                   wait_optimizer.cc).
//   POLL_SLEEP      I in a documented candidate set (the 1-2-5 series from
//                   1 us to 100 ms plus OptimizerOptions::extra_poll_intervals_ns),
//                   E[k] over the points and the oversleep atoms.
//
// Platform costs come as a PlatformModel (platform_model.h): means for the
// costs J is linear in, atoms for the timer oversleep. Every candidate's cost
// is its exact expectation over both the points and the atoms. Time is linear
// in the number of points n: O(n) with constant costs, O(n m log m) with m
// timer atoms; with constant costs (and at most 32 POLL_SLEEP intervals) it
// allocates nothing.
//
// Then the cheapest feasible family wins. Ties (relative 1e-12) are broken
// towards the earlier of IRQ, SPIN_THEN_IRQ, SPIN, POLL_SLEEP, SLEEP_THEN_SPIN
// (the IRQ fallback is safer than an unbounded spin) and towards the smaller
// parameter within a family.
//
// Pure functions; thread-safe.
#ifndef SPINTUNE_MODELS_WAIT_OPTIMIZER_H_
#define SPINTUNE_MODELS_WAIT_OPTIMIZER_H_

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "models/cost_model.h"
#include "models/platform_model.h"
#include "models/wait_distribution.h"

namespace spintune {

// Mean CPU and latency per request of one policy on one distribution.
struct ExpectedCost {
  double cpu_ns = 0;
  double latency_ns = 0;
  double Cost(double latency_weight) const {
    return cpu_ns + latency_weight * latency_ns;
  }
};

// Mean cost of `params` on `dist` under `model`, evaluated point by point
// (O(n), O(n m) with m timer atoms for the strategies that sleep). Used for
// the driver-default comparison and to check the sweeps in tests.
ExpectedCost EvaluateWait(const WaitDistribution& dist, const WaitParams& params,
                          const PlatformModel& model);

// The 1-2-5 series from 1 us to 100 ms, in ns.
const std::vector<uint64_t>& DefaultPollIntervalsNs();

struct OptimizerOptions {
  Objective objective;
  // Upper bound on any busy-wait the policy may ask for (SPIN timeout,
  // SPIN_THEN_IRQ threshold, spin after a SLEEP_THEN_SPIN sleep).
  // REQUIRES: > 0.
  uint64_t max_spin_ns = 1'000'000;
  // allowed[s - 1] says whether Strategy s may be chosen (errors or timeouts
  // seen on a strategy's wait path exclude it).
  std::array<bool, kStrategyCount> allowed = {true, true, true, true, true};
  // POLL_SLEEP intervals to try besides DefaultPollIntervalsNs().
  std::vector<uint64_t> extra_poll_intervals_ns;
  // Robustness (0: off; else 0 < rho <= 1). Only SPIN_THEN_IRQ(T) with T
  // clamped into [rho * B, B / rho], B = irq_cpu + lambda * irq_wake, is
  // allowed. Then for every request J(X) <= (1 + 1/rho) * min(X (1 + lambda),
  // irq_cpu + lambda (X + irq_wake)), the clairvoyant choice between
  // spinning and blocking, whatever the distribution does (ski rental with
  // a learned threshold, Purohit, Svitkina, Kumar 2018): for T <= B the worst
  // X is just above T, (T + B) / T <= 1 + 1/rho; for T >= B it is
  // (T + B) / B <= 1 + 1/rho; adding lambda X to both sides keeps the bound.
  double robustness_rho = 0;

  bool IsAllowed(Strategy s) const { return allowed[static_cast<int>(s) - 1]; }
  void Disallow(Strategy s) { allowed[static_cast<int>(s) - 1] = false; }
};

// The best candidate of one family.
struct FamilyOptimum {
  Strategy strategy = Strategy::kIrq;
  bool feasible = false;  // false: excluded, capped out or not allowed
  WaitParams params;
  ExpectedCost expected;
  double cost_ns = 0;  // J under the objective
};

struct OptimizerResult {
  WaitParams params;
  ExpectedCost expected;
  double cost_ns = 0;
  // One entry per strategy family, indexed by Strategy value - 1.
  std::array<FamilyOptimum, kStrategyCount> families;
};

// Exact optimum of `dist` under `model` (PlatformCosts convert to a model of
// constants) and `options`.
// Errors: InvalidArgument for an empty distribution, invalid costs or
// options; FailedPrecondition when no allowed strategy is feasible.
absl::StatusOr<OptimizerResult> OptimizeWait(const WaitDistribution& dist,
                                             const PlatformModel& model,
                                             const OptimizerOptions& options);

}  // namespace spintune

#endif  // SPINTUNE_MODELS_WAIT_OPTIMIZER_H_
