// Counting what a SampleBatch carries, the same way on both sides of the
// wire: completion samples as columns and as histogram deltas.
#ifndef SPINTUNE_PROTO_SAMPLE_BATCH_UTIL_H_
#define SPINTUNE_PROTO_SAMPLE_BATCH_UTIL_H_

#include <cstdint>

#include "spintune/v1/spintune.pb.h"

namespace spintune {

// Completion samples in `batch` (columns plus histogram counts; a
// placeholder's dropped samples are not in it).
inline uint64_t CompletionSamples(const v1::SampleBatch& batch) {
  uint64_t n = static_cast<uint64_t>(batch.completions().wait_ns_size());
  for (const auto& h : batch.histograms()) n += h.wait().count();
  return n;
}

// True when `batch` carries any measurement (completions, dispatch,
// outcomes, timer oversleep).
inline bool HasMeasurements(const v1::SampleBatch& batch) {
  return batch.completions().wait_ns_size() > 0 || batch.dispatches().handler_ns_size() > 0 ||
         batch.histograms_size() > 0 || batch.dispatch_histograms_size() > 0 ||
         batch.outcomes_size() > 0 || batch.timer_oversleep_size() > 0;
}

}  // namespace spintune

#endif  // SPINTUNE_PROTO_SAMPLE_BATCH_UTIL_H_
