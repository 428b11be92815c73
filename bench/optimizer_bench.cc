// Speed of the models' hot paths, Google Benchmark; ratios within one run are
// what count (docs/benchmarks.md, "Optimizer over histograms"):
//  - the exact optimizer on 10,000 keys x 4,096 buckets (issue 3: under one
//    second on one core);
//  - the optimizer's time per bucket at 64 .. 32,768 buckets, whose largest /
//    smallest ratio says whether it is linear (issue 18: <= 1.5), with
//    constant costs and with a measured timer oversleep distribution;
//  - recording one sample, against one clock_gettime(CLOCK_MONOTONIC)
//    (issue 18: <= 0.25x).
#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "bench/ratio_reporter.h"
#include "benchmark/benchmark.h"
#include "models/latency_recorder.h"
#include "models/wait_optimizer.h"

namespace spintune {
namespace {

// A histogram with exactly `buckets` consecutive non-empty buckets from 1 us
// up, random counts. The shape changes with the size: 512 buckets end at
// 16 us (below the timer oversleep, so SLEEP_THEN_SPIN has one candidate),
// 4,096 reach 37 minutes. Per-key times across sizes are therefore not a
// scaling measure; BM_OptimizePerBucket is.
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

// The per-bucket sizes of issue 18. A histogram has at most
// LatencyHistogram::kBucketCount (4,608) buckets, so these distributions are
// built from samples instead: `points` distinct values on a geometric grid
// from 1 us to 100 ms (the same shape at every size, so every size takes the
// same branches in the same proportions), each repeated 1..50 times.
constexpr int kPerBucketSizes[] = {64, 512, 4096, 32768};
constexpr int kKeysPerSize = 8;  // distinct distributions, visited in turn

WaitDistribution MakeGridDistribution(int points, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> samples;
  uint64_t previous = 0;
  for (int i = 0; i < points; ++i) {
    const double grid = 1e3 * std::pow(1e5, static_cast<double>(i) / (points - 1));
    const uint64_t value = std::max(previous + 1, static_cast<uint64_t>(grid));
    samples.insert(samples.end(), 1 + rng() % 50, value);
    previous = value;
  }
  return WaitDistribution::FromSamples(std::move(samples));
}

void BM_OptimizePerBucket(benchmark::State& state) {
  const int points = static_cast<int>(state.range(0));
  std::vector<WaitDistribution> dists;
  for (int k = 0; k < kKeysPerSize; ++k) dists.push_back(MakeGridDistribution(points, k));
  OptimizerOptions options;  // the tuner's defaults: every family, 1 ms spin cap
  size_t k = 0;
  for (auto _ : state) {
    auto r = OptimizeWait(dists[k++ % dists.size()], Costs(), options);
    benchmark::DoNotOptimize(r);
  }
  state.counters["ns_per_bucket"] = benchmark::Counter(
      static_cast<double>(points),
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_OptimizePerBucket)->ArgName("buckets")->Arg(64)->Arg(512)->Arg(4096)->Arg(32768);

// The same over a measured timer oversleep of kOversleepAtoms atoms (40 to
// 102 us, 2 us apart): O(n m log m), still linear in the buckets n.
constexpr int kOversleepAtoms = 32;

void BM_OptimizePerBucketMeasured(benchmark::State& state) {
  const int points = static_cast<int>(state.range(0));
  std::vector<WaitDistribution> dists;
  for (int k = 0; k < kKeysPerSize; ++k) dists.push_back(MakeGridDistribution(points, k));
  MeasuredCosts measured;
  for (int a = 0; a < kOversleepAtoms; ++a) measured.timer_wake.Record(40'000 + 2'000 * a);
  const PlatformModel model = PlatformModel::Measured(Costs(), measured);
  OptimizerOptions options;
  size_t k = 0;
  for (auto _ : state) {
    auto r = OptimizeWait(dists[k++ % dists.size()], model, options);
    benchmark::DoNotOptimize(r);
  }
  state.counters["ns_per_bucket"] = benchmark::Counter(
      static_cast<double>(points),
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_OptimizePerBucketMeasured)
    ->ArgName("buckets")
    ->Arg(64)
    ->Arg(512)
    ->Arg(4096)
    ->Arg(32768)
    ->Unit(benchmark::kMicrosecond);

void BM_HistogramToDistribution(benchmark::State& state) {
  const LatencyHistogram h = MakeHistogram(static_cast<int>(state.range(0)), 1);
  for (auto _ : state) benchmark::DoNotOptimize(WaitDistribution::FromHistogram(h));
}
BENCHMARK(BM_HistogramToDistribution)->Arg(4096)->Arg(512);

// Completion times as a recorder sees them: lognormal around 60 us, spread
// over ~10 octaves (hundreds of distinct buckets).
std::vector<uint64_t> RecordedValues() {
  std::mt19937_64 rng(1);
  std::lognormal_distribution<double> d(11, 2);
  std::vector<uint64_t> values(4096);
  for (auto& v : values) v = static_cast<uint64_t>(d(rng));
  return values;
}

// The hot path: a dense recorder (flushed to the sparse form per batch).
void BM_HistogramRecord(benchmark::State& state) {
  const std::vector<uint64_t> values = RecordedValues();
  LatencyRecorder recorder;
  size_t i = 0;
  for (auto _ : state) {
    recorder.Record(values[i++ & 4095]);
    benchmark::ClobberMemory();  // the count must reach memory every time
  }
}
BENCHMARK(BM_HistogramRecord);

// The sparse sorted form directly: a binary search per sample.
void BM_SparseHistogramRecord(benchmark::State& state) {
  const std::vector<uint64_t> values = RecordedValues();
  LatencyHistogram h;
  size_t i = 0;
  for (auto _ : state) h.Record(values[i++ & 4095]);
}
BENCHMARK(BM_SparseHistogramRecord);

// Flushing a recorder that holds a batch of 4,096 samples.
void BM_RecorderFlush(benchmark::State& state) {
  const std::vector<uint64_t> values = RecordedValues();
  LatencyRecorder recorder;
  LatencyHistogram h;
  for (auto _ : state) {
    state.PauseTiming();
    for (uint64_t v : values) recorder.Record(v);
    state.ResumeTiming();
    recorder.FlushTo(&h);
  }
}
BENCHMARK(BM_RecorderFlush);

// The reference of issue 18's targets: one clock read.
BENCHMARK(BM_ClockGettime);

// Prints the per-bucket table of one BM_OptimizePerBucket* family and its
// linearity ratios, against `limit` (0: no target).
void PrintPerBucket(const RatioReporter& r, const std::string& family, const char* title,
                    double limit) {
  std::printf("\n%s:\n%8s %12s %12s\n", title, "buckets", "ns/key", "ns/bucket");
  std::vector<double> per_bucket;
  for (int points : kPerBucketSizes) {
    const double ns = r.CpuNs(family + "/buckets:" + std::to_string(points));
    std::printf("%8d %12.0f %12.2f\n", points, ns, ns / points);
    per_bucket.push_back(ns / points);
  }
  r.PrintRatio("ns/bucket at 32,768 buckets / at 64", per_bucket.back(), per_bucket.front(),
               limit);
  r.PrintRatio("ns/bucket, largest / smallest of the four sizes",
               *std::max_element(per_bucket.begin(), per_bucket.end()),
               *std::min_element(per_bucket.begin(), per_bucket.end()), limit);
}

void PrintSummary(const RatioReporter& r) {
  PrintPerBucket(r, "BM_OptimizePerBucket",
                 "Optimizer time per bucket (one key, every family, constant costs)", 1.5);
  // With m atoms the sweep merges m event sequences: when the points are
  // sparse (64 over five decades) one point's m events come out in a row,
  // when they are dense the sequences interleave and every event sifts the
  // heap, so the smallest size is cheaper per bucket. No target here.
  PrintPerBucket(r, "BM_OptimizePerBucketMeasured",
                 "The same with a 32-atom measured timer oversleep", 0);
  std::printf("\n");
  r.PrintRatio("BM_HistogramRecord / BM_ClockGettime", r.CpuNs("BM_HistogramRecord"),
               r.CpuNs("BM_ClockGettime"), 0.25);
}

}  // namespace
}  // namespace spintune

int main(int argc, char** argv) {
  spintune::RatioReporter reporter;
  spintune::RunBenchmarks(argc, argv, &reporter);
  spintune::PrintSummary(reporter);
  return 0;
}
