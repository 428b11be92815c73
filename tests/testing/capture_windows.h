// What the live tests of --capture-windows share: a capture with windows of
// 400 ms in 1 s and the same mode capturing all the time read one load side
// by side, and the windowed one must measure its share of the requests,
// trace nothing between windows and, inside them, see what the other sees.
#ifndef SPINTUNE_TESTS_TESTING_CAPTURE_WINDOWS_H_
#define SPINTUNE_TESTS_TESTING_CAPTURE_WINDOWS_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "agent/capture/capture.h"
#include "agent/io_load.h"
#include "gtest/gtest.h"
#include "models/latency_histogram.h"

namespace spintune::testing {

// One capture's completion times and how many took the IRQ path.
struct WaitSums {
  LatencyHistogram wait;
  uint64_t irq_path = 0;
};

// What the windowed capture traced so far (completions + dispatches),
// read between windows: after the drain (600 ms into a second) and the
// readers' next poll, before the next window.
class BetweenWindows {
 public:
  void Read(const Capture& capture) {
    const int64_t ms = absl::ToUnixMillis(absl::Now());
    if (ms % 1000 < 720 || ms % 1000 > 980) return;
    const CaptureStats st = capture.stats();
    reads_.emplace_back(ms / 1000, st.completions + st.dispatches);
  }
  // Within one second between windows the count does not move; returns
  // the pairs of reads compared.
  int ExpectQuiet() const {
    int pairs = 0;
    for (size_t i = 1; i < reads_.size(); ++i) {
      if (reads_[i].first != reads_[i - 1].first) continue;
      ++pairs;
      EXPECT_EQ(reads_[i].second, reads_[i - 1].second)
          << "traced between windows, in second " << reads_[i].first;
    }
    EXPECT_GE(pairs, 10) << "reads between windows";
    return pairs;
  }

 private:
  std::vector<std::pair<int64_t, uint64_t>> reads_;  // (second, count)
};

// Runs `load`, calling `take` every 20 ms on another thread meanwhile and
// once more 300 ms after it; a failed load or take fails the test.
inline void TakeWhileLoading(const std::function<absl::Status()>& take, const IoLoadOptions& load) {
  std::atomic<bool> loading{true};
  absl::Status taking;
  std::thread taker([&] {
    while (loading && taking.ok()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      taking = take();
    }
  });
  const auto ran = RunIoLoad(load);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  loading = false;
  taker.join();
  ASSERT_TRUE(ran.ok()) << ran.status();
  ASSERT_TRUE(taking.ok()) << taking;
  ASSERT_TRUE(take().ok());
}

// The windowed capture (`some`) against the full one (`all`): over the run
// 30-50% of the completions (windows of 400 ms in 1 s); inside the windows
// the same count within `in_tolerance` (a share), the same p50 and p90
// within 5% and the same IRQ-path share within 0.03.
inline void ExpectWindowedLikeAll(const WaitSums& all_run, const WaitSums& some_run,
                                  const WaitSums& all_in, const WaitSums& some_in,
                                  double in_tolerance) {
  const double completions = static_cast<double>(all_run.wait.total_count());
  ASSERT_GT(completions, 2000) << "the load's requests were captured";
  const double share = static_cast<double>(some_run.wait.total_count()) / completions;
  EXPECT_GT(share, 0.3) << "windows of 400 ms in 1 s";
  EXPECT_LT(share, 0.5) << "windows of 400 ms in 1 s";
  const double in = static_cast<double>(all_in.wait.total_count());
  ASSERT_GT(in, 500) << "completions inside the windows";
  const double some_in_n = static_cast<double>(some_in.wait.total_count());
  EXPECT_NEAR(some_in_n, in, 5 + in_tolerance * in);
  for (double q : {0.5, 0.9}) {
    EXPECT_NEAR(some_in.wait.QuantileNs(q), all_in.wait.QuantileNs(q),
                0.05 * all_in.wait.QuantileNs(q))
        << "quantile " << q;
  }
  EXPECT_NEAR(static_cast<double>(some_in.irq_path) / some_in_n,
              static_cast<double>(all_in.irq_path) / in, 0.03)
      << "the IRQ path's share";
}

}  // namespace spintune::testing

#endif  // SPINTUNE_TESTS_TESTING_CAPTURE_WINDOWS_H_
