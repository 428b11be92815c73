// Change detection between two completion-time histograms: the two-sample
// Kolmogorov-Smirnov statistic computed on bucket boundaries.
//
//   D = max_b |F_a(b) - F_b(b)|
//   change when D > max(min_effect, c(alpha) sqrt((n + m) / (n m))),
//   c(alpha) = sqrt(-ln(alpha / 2) / 2)
//
// `min_effect` keeps huge samples from flagging differences too small to
// change a decision; the default alpha 1e-6 keeps false alarms on a
// stationary stream negligible even when tested every few hundred samples.
//
// Pure functions; thread-safe.
#ifndef SPINTUNE_MODELS_CHANGE_DETECTOR_H_
#define SPINTUNE_MODELS_CHANGE_DETECTOR_H_

#include "models/latency_histogram.h"

namespace spintune {

struct ChangeTest {
  double alpha = 1e-6;
  double min_effect = 0.1;
};

// The KS statistic D of `a` and `b` (0 when either is empty).
double KsDistance(const LatencyHistogram& a, const LatencyHistogram& b);

// True when `recent` differs significantly from `reference`.
bool DistributionChanged(const LatencyHistogram& reference, const LatencyHistogram& recent,
                         const ChangeTest& test = ChangeTest());

}  // namespace spintune

#endif  // SPINTUNE_MODELS_CHANGE_DETECTOR_H_
