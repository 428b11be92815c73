// HistogramSum: the sum of many sparse LatencyHistograms in one pass.
//
// LatencyHistogram::Merge() is a linear merge into a new vector: summing n
// histograms into one that grows to B buckets costs about n * B pair copies
// and n allocations. A HistogramSum keeps one counter per bucket (the
// layout's 4,608 counters, 36 KiB) and a bitmap of the non-empty ones, so
// Add() costs one increment per bucket of its argument and Take() one pass
// over the non-empty buckets (and the 72 bitmap words), whatever n was.
// Used where many deltas of one key are summed at once (compaction). Its
// sibling LatencyRecorder (latency_recorder.h) records single values on a
// hot path and has no bitmap: its flush scans every counter.
//
// Thread-compatible.
#ifndef SPINTUNE_MODELS_HISTOGRAM_SUM_H_
#define SPINTUNE_MODELS_HISTOGRAM_SUM_H_

#include <array>
#include <cstdint>
#include <vector>

#include "models/latency_histogram.h"

namespace spintune {

class HistogramSum {
 public:
  HistogramSum() : counts_(LatencyHistogram::kBucketCount, 0) {}

  // Adds every sample of `histogram`. O(its non-empty buckets).
  void Add(const LatencyHistogram& histogram);
  // Samples added since the last Take().
  uint64_t total_count() const { return total_count_; }
  // The sum of everything added since the last Take(), and clears. Equal to
  // merging the added histograms with LatencyHistogram::Merge().
  LatencyHistogram Take();

 private:
  static constexpr int kWords = (LatencyHistogram::kBucketCount + 63) / 64;
  std::vector<uint64_t> counts_;
  std::array<uint64_t, kWords> non_empty_{};
  uint64_t total_count_ = 0;
  int buckets_ = 0;  // non-empty buckets
};

}  // namespace spintune

#endif  // SPINTUNE_MODELS_HISTOGRAM_SUM_H_
