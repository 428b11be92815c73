// LatencyRecorder: records durations on a hot path, for a LatencyHistogram.
//
// LatencyHistogram::Record() keeps the sparse sorted form, which costs a
// binary search per sample and a vector insert per new bucket. A recorder
// keeps one counter per bucket of the same layout (kBucketCount = 4,608
// counters, 36 KiB), so Record() is the bucket index (bit arithmetic) and
// one increment, a few ns. FlushTo() adds the counts to a LatencyHistogram,
// the form of the wire, storage and the optimizer, and clears them; the
// bucket layout is the histogram's, so nothing is re-binned.
//
// Thread-compatible.
#ifndef SPINTUNE_MODELS_LATENCY_RECORDER_H_
#define SPINTUNE_MODELS_LATENCY_RECORDER_H_

#include <cstdint>
#include <vector>

#include "models/latency_histogram.h"

namespace spintune {

class LatencyRecorder {
 public:
  LatencyRecorder() : counts_(LatencyHistogram::kBucketCount, 0) {}

  void Record(uint64_t value_ns) {
    ++counts_[LatencyHistogram::BucketIndex(value_ns)];
    ++total_count_;
  }
  // Samples recorded since the last flush.
  uint64_t total_count() const { return total_count_; }

  // Adds every sample recorded since the last flush to `histogram` and
  // clears the recorder. O(kBucketCount).
  void FlushTo(LatencyHistogram* histogram);

 private:
  std::vector<uint64_t> counts_;
  uint64_t total_count_ = 0;
};

}  // namespace spintune

#endif  // SPINTUNE_MODELS_LATENCY_RECORDER_H_
