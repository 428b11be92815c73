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

#include <cstdint>
#include <utility>
#include <vector>

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

// The drift decision for one key kept in windows of its target's samples
// (storage/SCHEMA.md, migration 2): its latest window against the windows
// before it, back to `since` (where its evidence starts since its last
// change).
struct WindowVerdict {
  // The latest window differs: the key's evidence starts there from now on.
  bool changed = false;
  // Windows before this one are no longer needed (0: keep every one).
  int64_t keep_from = 0;
};

// `windows`: the key's (window, histogram) from `since` on, in window order.
// No verdict (nothing changed, nothing pruned) unless there are two windows
// or more and the latest holds `min_recent` samples; a change needs
// `min_recent` samples before the latest too. Otherwise the key keeps the
// last `keep_windows` windows (and, after a change, only the latest).
WindowVerdict JudgeWindows(const std::vector<std::pair<int64_t, LatencyHistogram>>& windows,
                           int64_t since, const ChangeTest& test, uint64_t min_recent,
                           uint64_t keep_windows);

}  // namespace spintune

#endif  // SPINTUNE_MODELS_CHANGE_DETECTOR_H_
