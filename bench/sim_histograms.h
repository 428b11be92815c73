// One interval of a simulated board with in-kernel aggregation, as
// histogram deltas: keys (opcodes 0..keys-1 of the hello's first device),
// each with `samples_per_key` log-normal completion times around a per-key
// median. Shared by spintune-loadgen --histograms and the ingest core bench.
#ifndef SPINTUNE_BENCH_SIM_HISTOGRAMS_H_
#define SPINTUNE_BENCH_SIM_HISTOGRAMS_H_

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "agent/capture/histogram_batch.h"
#include "models/latency_histogram.h"
#include "spintune/v1/spintune.pb.h"

namespace spintune {

// Appends the interval to `batch`; returns the completions it holds. The
// first `slow_keys` keys take `slowdown` times as long (a drift).
inline uint64_t AppendSimHistograms(const v1::Hello& hello, uint32_t keys,
                                    uint32_t samples_per_key, std::mt19937_64& rng,
                                    v1::SampleBatch* batch, uint32_t slow_keys = 0,
                                    double slowdown = 1) {
  std::vector<KeyHistogramDelta> deltas;
  for (uint32_t k = 0; k < keys; ++k) {
    const double median_ns = 20'000.0 * (1 + k % 7) * (k < slow_keys ? slowdown : 1);
    std::lognormal_distribution<double> wait(std::log(median_ns), 0.5);
    LatencyHistogram h;
    KeyHistogramDelta d;
    d.device = hello.devices(0).name();
    d.opcode = k;
    d.size_class = 13;
    for (uint32_t i = 0; i < samples_per_key; ++i) {
      const auto ns = static_cast<uint64_t>(wait(rng));
      h.Record(ns);
      d.wait.sum_ns += ns;
    }
    d.wait.buckets = h.buckets();
    d.wait.count = h.total_count();
    d.irq_path = d.wait.count;
    deltas.push_back(std::move(d));
  }
  uint64_t dropped = 0;
  return AppendHistograms(deltas, {}, {{hello.devices(0).name(), 0}}, batch, &dropped);
}

}  // namespace spintune

#endif  // SPINTUNE_BENCH_SIM_HISTOGRAMS_H_
