// RatioReporter: Google Benchmark's console output, plus the CPU time of
// every run kept by name so that a benchmark's main() can print, after all
// runs, the ratios that the performance targets are stated in (they travel
// between machines; absolute times do not). BM_ClockGettime is the
// reference most targets are stated against. With --benchmark_repetitions
// a benchmark's CPU time is the median of its repetitions; add
// --benchmark_enable_random_interleaving=true so that load changing during
// a run (a shared machine) falls on every benchmark alike.
//
// Thread-compatible (Google Benchmark reports from one thread).
#ifndef SPINTUNE_BENCH_RATIO_REPORTER_H_
#define SPINTUNE_BENCH_RATIO_REPORTER_H_

#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"

namespace spintune {

class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      if (r.run_type == Run::RT_Iteration && !r.error_occurred && r.iterations > 0) {
        cpu_ns_[r.benchmark_name()].push_back(r.cpu_accumulated_time * 1e9 /
                                              static_cast<double>(r.iterations));
      }
    }
    benchmark::ConsoleReporter::ReportRuns(runs);
  }

  // CPU ns per iteration of the run called `name` (as printed; the median
  // of its repetitions with --benchmark_repetitions), NaN when it did not
  // run (filtered out).
  double CpuNs(const std::string& name) const {
    auto it = cpu_ns_.find(name);
    if (it == cpu_ns_.end()) return std::nan("");
    std::vector<double> v = it->second;
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  }

  // Prints "label  a / b  (target <= limit) ok|MISSED"; no target when
  // limit is 0.
  void PrintRatio(const char* label, double a, double b, double limit) const {
    const double ratio = a / b;
    if (limit <= 0) {
      std::printf("%-58s %8.3f\n", label, ratio);
      return;
    }
    std::printf("%-58s %8.3f  (target <= %.2f) %s\n", label, ratio, limit,
                std::isnan(ratio) ? "n/a" : (ratio <= limit ? "ok" : "MISSED"));
  }

 private:
  std::map<std::string, std::vector<double>> cpu_ns_;
};

// One clock_gettime(CLOCK_MONOTONIC); register with BENCHMARK(BM_ClockGettime).
inline void BM_ClockGettime(benchmark::State& state) {
  for (auto _ : state) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    benchmark::DoNotOptimize(ts);
  }
}

// Runs the benchmarks selected on the command line through `reporter`.
inline void RunBenchmarks(int argc, char** argv, RatioReporter* reporter) {
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks(reporter);
  std::fflush(stdout);
}

}  // namespace spintune

#endif  // SPINTUNE_BENCH_RATIO_REPORTER_H_
