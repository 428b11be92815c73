#include "models/latency_recorder.h"

#include <algorithm>

namespace spintune {

void LatencyRecorder::FlushTo(LatencyHistogram* histogram) {
  if (total_count_ == 0) return;
  // Buckets in increasing order: each AddToBucket appends, then one merge.
  LatencyHistogram recorded;
  for (int i = 0; i < LatencyHistogram::kBucketCount; ++i) {
    if (counts_[i] != 0) recorded.AddToBucket(i, counts_[i]);
  }
  histogram->Merge(recorded);
  std::fill(counts_.begin(), counts_.end(), 0);
  total_count_ = 0;
}

}  // namespace spintune
