// FleetStreams: thousands of simulated agents in one process, each a raw
// Session stream (gRPC callback API, multiplexed over a few channels) that
// says Hello and then sends one histogram batch (`keys` keys of
// `samples_per_key` completions each, as the BPF capture does) per
// `interval`, each agent at its own phase (or a batch of raw sample
// columns: FleetOptions::raw_samples). Measures the tuner's ack latency
// and throughput in the steady state; unlike spintune-loadgen's Agent mode
// it needs no thread per agent, so 10,000 agents fit on a small machine.
//
// Thread-safety: RunFleetStreams is a blocking call.
#ifndef SPINTUNE_BENCH_FLEET_STREAMS_H_
#define SPINTUNE_BENCH_FLEET_STREAMS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/channel_security.h"

namespace spintune {

struct FleetOptions {
  std::string tuner;
  ClientSecurity security;
  std::string prefix = "fleet";
  int agents = 1000;
  int channels = 32;
  uint32_t keys = 64;
  uint32_t samples_per_key = 100;
  // > 0: batches of this many raw completion samples (sample columns, as
  // sim, csv and replay agents send) instead of histogram deltas.
  uint32_t raw_samples = 0;
  // Histogram deltas as HistogramDelta.buckets instead of the arrays
  // (agent/capture/histogram_batch.h PackBuckets).
  bool histogram_bytes = false;
  // > 0: a stream skips its turn while this many of its batches are
  // unacknowledged (an agent's window); with a short `interval` the fleet
  // then sends as fast as the tuner acknowledges.
  size_t max_unacked = 0;
  absl::Duration interval = absl::Seconds(1);
  // Batches sent and timed after every agent's Hello was acknowledged.
  absl::Duration duration = absl::Seconds(20);
};

struct FleetResult {
  int agents = 0;
  double hello_seconds = 0;  // until every Hello was acknowledged
  uint64_t batches_sent = 0;
  uint64_t batches_acked = 0;
  uint64_t samples_acked = 0;
  uint64_t refused = 0;
  double seconds = 0;  // of the measured phase (sending, then waiting for acks)
  double ack_p50_ms = 0;
  double ack_p99_ms = 0;
  double ack_max_ms = 0;
};

absl::StatusOr<FleetResult> RunFleetStreams(const FleetOptions& options);

}  // namespace spintune

#endif  // SPINTUNE_BENCH_FLEET_STREAMS_H_
