// The wire form of histogram deltas (SampleBatch.histograms and
// .dispatch_histograms, docs/protocol.md): sparse buckets with delta-coded
// indexes, or the same buckets packed as bytes. The tuner decodes them in
// tuner/batch_decoder.cc.
//
// Pure functions; thread-safe.
#ifndef SPINTUNE_AGENT_CAPTURE_HISTOGRAM_BATCH_H_
#define SPINTUNE_AGENT_CAPTURE_HISTOGRAM_BATCH_H_

#include <map>
#include <string>

#include "agent/capture/capture.h"
#include "spintune/v1/spintune.pb.h"

namespace spintune {

// REQUIRES: buckets in increasing index order, each count >= 1.
void BucketCountsToProto(const BucketCounts& b, v1::HistogramDelta* out);

// Rewrites every histogram delta of `batch` (the keys' waits, the dispatch
// handler and wake times) from bucket_index/bucket_count into
// HistogramDelta.buckets: the same buckets in about half the bytes, which
// the tuner stages as they came (`--histogram-wire bytes`; only for a tuner
// whose HelloAck sets accepts_bucket_bytes). REQUIRES: the arrays are valid
// (indexes increasing, counts >= 1), as BucketCountsToProto writes them.
void PackBuckets(v1::SampleBatch* batch);

// Appends the deltas of devices in `device_index` to `batch` (others are
// counted in *dropped). Returns the completions added.
uint64_t AppendHistograms(const std::vector<KeyHistogramDelta>& keys,
                          const std::vector<DispatchHistogramDelta>& dispatch,
                          const std::map<std::string, uint32_t>& device_index,
                          v1::SampleBatch* batch, uint64_t* dropped);

}  // namespace spintune

#endif  // SPINTUNE_AGENT_CAPTURE_HISTOGRAM_BATCH_H_
