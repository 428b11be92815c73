// PlatformModel: the platform costs the optimizer prices waits with, as
// constants or as measured distributions (models/cost_model.h; issue 12).
//
// Timer oversleep and IRQ wake are distributions, not constants (timer
// slack, idle states, virtualisation). How much of a distribution the
// expected cost of a wait needs depends on how the cost table of
// cost_model.h uses the quantity, given the completion time X (independent
// of the platform costs):
//
//   irq_cpu, irq_wake, timer_cpu, poll_read   enter every row linearly, so
//       E[cost] takes only their means: the mean of a measured distribution
//       is exact, not an approximation.
//   timer_wake   does not: SLEEP_THEN_SPIN's latency is max(X, S + tw) and
//       POLL_SLEEP's first poll at or after X is ceil(X / (I + tw)) sleeps
//       away. The model keeps it as discrete atoms (value, probability) and
//       the optimizer convolves every candidate with them exactly.
//
// POLL_SLEEP with a random oversleep: one draw of tw per request, shared by
// all of its sleeps (k = ceil(X / (I + tw)), latency k (I + tw)). Repeated
// sleeps of the same length in one wait tend to see the same timer slack and
// idle state; with independent draws per sleep the expected k would be a
// renewal function, which has no exact linear-time form. The two agree
// whenever one sleep covers X.
//
// Value type; thread-compatible.
#ifndef SPINTUNE_MODELS_PLATFORM_MODEL_H_
#define SPINTUNE_MODELS_PLATFORM_MODEL_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "models/cost_model.h"
#include "models/latency_histogram.h"

namespace spintune {

// One value of a discrete distribution and its probability.
struct CostAtom {
  double value_ns = 0;
  double probability = 0;
};

// Measured platform costs of one CPU class; an empty histogram means "not
// measured" and leaves the declared constant in force.
struct MeasuredCosts {
  // irq_cpu = irq_overhead_cpu_ns + the handler's time. The handler alone is
  // what traces measure; it is used only when the overhead is known (> 0).
  LatencyHistogram irq_handler;
  double irq_overhead_cpu_ns = 0;
  LatencyHistogram irq_wake;
  LatencyHistogram timer_wake;
};

class PlatformModel {
 public:
  PlatformModel() = default;
  // Constants: timer_wake is one atom at costs.timer_wake_ns. Implicit on
  // purpose: constant costs are the model whose distributions are points.
  PlatformModel(const PlatformCosts& costs);  // NOLINT(google-explicit-constructor)
  // `declared`, with the mean (irq_cpu, irq_wake) or the atoms (timer_wake,
  // bucket midpoints weighted by count) of every non-empty distribution of
  // `measured` in place of the constant.
  static PlatformModel Measured(const PlatformCosts& declared, const MeasuredCosts& measured);

  // This model with the IRQ path's costs replaced (a key whose IRQ path was
  // measured on its own, tuner/verifier.h IrqPathOutcomes).
  // REQUIRES: both finite and >= 0.
  PlatformModel WithIrqPath(double irq_cpu_ns, double irq_wake_ns) const {
    PlatformModel m = *this;
    m.means_.irq_cpu_ns = irq_cpu_ns;
    m.means_.irq_wake_ns = irq_wake_ns;
    return m;
  }

  // Mean of every cost; means().timer_wake_ns is the mean of the atoms.
  // What the linear terms use and what a fitted table records.
  const PlatformCosts& means() const { return means_; }
  // Timer oversleep atoms: values increasing, probabilities > 0, sum 1.
  absl::Span<const CostAtom> timer_wake() const {
    return timer_wake_.empty() ? absl::MakeConstSpan(&constant_timer_wake_, 1)
                               : absl::MakeConstSpan(timer_wake_);
  }

  // OK when the means are valid (PlatformCosts::Validate).
  absl::Status Validate() const { return means_.Validate(); }

 private:
  PlatformCosts means_;
  CostAtom constant_timer_wake_{0, 1};
  std::vector<CostAtom> timer_wake_;  // empty: constant_timer_wake_ alone
};

// Expected cost of one request that completes after `x_ns` under `params`,
// over the model's distributions (CostOfRequest for constants). O(atoms).
RequestCost ExpectedRequestCost(double x_ns, const WaitParams& params,
                                const PlatformModel& model);

}  // namespace spintune

#endif  // SPINTUNE_MODELS_PLATFORM_MODEL_H_
