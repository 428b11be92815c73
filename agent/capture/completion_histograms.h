// CompletionHistograms: folds individual completion and dispatch samples
// (what the raw and text captures produce) into the histogram deltas the
// bpf capture sends (agent/capture/capture.h): per (device, opcode, size
// class) the completion times in the bucket layout of
// models/latency_histogram.h with their IRQ-path, spin-path and error
// counts, and per device the IRQ handler and wake times. A live agent sends
// these once an interval instead of one sample per request
// (docs/traces.md, "What goes on the wire").
//
// Everything is reported in CPU class 0 (trace sources describe one class).
// Memory: 18 KiB per key and per device's handler and wake times
// (LatencyHistogram::kBucketCount 32-bit counters), for the keys seen in the
// last interval; an increment per time.
//
// Thread-compatible.
#ifndef SPINTUNE_AGENT_CAPTURE_COMPLETION_HISTOGRAMS_H_
#define SPINTUNE_AGENT_CAPTURE_COMPLETION_HISTOGRAMS_H_

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "agent/capture/capture.h"
#include "agent/trace/trace_correlator.h"

namespace spintune {

class CompletionHistograms {
 public:
  void Add(const CompletionEvent& e);
  // The handler time always; the wake time when it was measured.
  void Add(const DispatchEvent& e);

  // Appends what was added since the last Flush, as one delta per key with
  // completions (in key order) and one per device with dispatch times, and
  // starts over. Keys without anything in this interval are forgotten.
  void Flush(std::vector<KeyHistogramDelta>* keys,
             std::vector<DispatchHistogramDelta>* dispatches);

  // Completions added since the last Flush.
  uint64_t completions() const { return completions_; }

 private:
  struct Times {
    std::vector<uint32_t> buckets;  // dense, LatencyHistogram::kBucketCount once used
    uint64_t count = 0;
    uint64_t sum_ns = 0;

    void Add(uint64_t ns);
    // The times as sparse buckets; zeroes them.
    BucketCounts Take();
  };
  struct Waits {
    Times times;
    uint64_t irq_path = 0;
    uint64_t spin_path = 0;
    uint64_t errors = 0;
  };
  struct Dispatch {
    Times handler;
    Times wake;
  };

  // (A lookup per completion: hashed, not ordered; Flush sorts.)
  absl::flat_hash_map<std::tuple<std::string, uint32_t, uint32_t>, Waits> waits_;  // device, opcode, size class
  absl::flat_hash_map<std::string, Dispatch> dispatch_;
  uint64_t completions_ = 0;
};

}  // namespace spintune

#endif  // SPINTUNE_AGENT_CAPTURE_COMPLETION_HISTOGRAMS_H_
