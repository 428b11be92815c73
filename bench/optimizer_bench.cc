// Speed of the exact optimizer over histograms: 10,000 keys x 4,096 buckets
// (issue 3's target: under one second on one core), and per-key cost for
// smaller histograms. Google Benchmark; ratios within one run are what count.
#include <random>

#include "benchmark/benchmark.h"
#include "models/wait_optimizer.h"

namespace spintune {
namespace {

// A histogram with exactly `buckets` non-empty buckets spread over 1 us..
// ~3 s, shaped like a lognormal mixture.
LatencyHistogram MakeHistogram(int buckets, uint64_t seed) {
  std::mt19937_64 rng(seed);
  LatencyHistogram h;
  const int first = LatencyHistogram::BucketIndex(1000);
  for (int i = 0; i < buckets; ++i) h.AddToBucket(first + i, 1 + rng() % 50);
  return h;
}

PlatformCosts Costs() { return {20'000, 30'000, 100, 2'000, 50'000}; }

void BM_OptimizeKeys(benchmark::State& state) {
  const int buckets = static_cast<int>(state.range(0));
  const int keys = static_cast<int>(state.range(1));
  std::vector<WaitDistribution> dists;
  for (int k = 0; k < std::min(keys, 64); ++k) {
    dists.push_back(WaitDistribution::FromHistogram(MakeHistogram(buckets, k)));
  }
  OptimizerOptions options;
  options.max_spin_ns = 10'000'000;
  if (state.range(2) == 1) {
    // Worst case: POLL_SLEEP alone, so no candidate can be pruned.
    for (Strategy s : {Strategy::kIrq, Strategy::kSpin, Strategy::kSpinThenIrq,
                       Strategy::kSleepThenSpin}) {
      options.Disallow(s);
    }
  }
  for (auto _ : state) {
    for (int k = 0; k < keys; ++k) {
      auto r = OptimizeWait(dists[k % dists.size()], Costs(), options);
      benchmark::DoNotOptimize(r);
    }
  }
  state.counters["keys"] = keys;
  state.counters["buckets"] = buckets;
  state.counters["ns_per_key"] = benchmark::Counter(
      static_cast<double>(keys), benchmark::Counter::kIsIterationInvariantRate |
                                     benchmark::Counter::kInvert);
}
BENCHMARK(BM_OptimizeKeys)
    ->ArgNames({"buckets", "keys", "poll_only"})
    ->Args({4096, 10000, 0})
    ->Args({4096, 10000, 1})
    ->Args({512, 10000, 0})
    ->Args({64, 10000, 0})
    ->Unit(benchmark::kMillisecond);

void BM_HistogramToDistribution(benchmark::State& state) {
  const LatencyHistogram h = MakeHistogram(static_cast<int>(state.range(0)), 1);
  for (auto _ : state) benchmark::DoNotOptimize(WaitDistribution::FromHistogram(h));
}
BENCHMARK(BM_HistogramToDistribution)->Arg(4096)->Arg(512);

void BM_HistogramRecord(benchmark::State& state) {
  std::mt19937_64 rng(1);
  std::lognormal_distribution<double> d(11, 2);
  std::vector<uint64_t> values(4096);
  for (auto& v : values) v = static_cast<uint64_t>(d(rng));
  LatencyHistogram h;
  size_t i = 0;
  for (auto _ : state) h.Record(values[i++ & 4095]);
}
BENCHMARK(BM_HistogramRecord);

}  // namespace
}  // namespace spintune

BENCHMARK_MAIN();
