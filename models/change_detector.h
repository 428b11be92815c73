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
// (storage/SCHEMA.md, migration 2): its latest windows against the windows
// before them, back to `since` (where its evidence starts since its last
// change).
struct WindowVerdict {
  // The latest windows differ: the key's evidence starts at window `since`
  // from now on.
  bool changed = false;
  // The change is the last one again, located later: everything it was
  // compared with lies within the evidence that detected the last one (a
  // window there straddled the change, so the evidence from `since` mixed
  // the distributions before and after it). Not a new change.
  bool refined = false;
  int64_t since = 0;
  // For a change: the `changed_through` of the next judgement (the latest
  // window of the evidence that detected it; a refined change keeps the
  // last change's).
  int64_t through = -1;
  // Windows before this one are no longer needed (0: keep every one).
  int64_t keep_from = 0;
};

// `windows`: the key's (window, histogram) from `since` on, in window order.
// `changed_through`: the `through` of the key's last change (-1: none).
// The recent evidence is the fewest latest windows that hold `min_recent`
// samples together (the latest alone for a key with that many samples per
// window; several for a key with a small share of its target's samples,
// which would otherwise never be judged), never all of them. No verdict
// (nothing changed, nothing pruned) when there is no such recent evidence;
// a change needs `min_recent` samples before it too. Otherwise the key
// keeps the last `keep_windows` windows, or more when the recent evidence
// and `min_recent` samples before it need more (and, after a change, only
// the recent evidence).
WindowVerdict JudgeWindows(const std::vector<std::pair<int64_t, LatencyHistogram>>& windows,
                           int64_t since, int64_t changed_through, const ChangeTest& test,
                           uint64_t min_recent, uint64_t keep_windows);

}  // namespace spintune

#endif  // SPINTUNE_MODELS_CHANGE_DETECTOR_H_
