// What the live tests of --capture-windows share: a capture with windows of
// 400 ms in 1 s and the same mode capturing all the time read one load side
// by side, and inside the windows the windowed one must see what the other
// sees.
#ifndef SPINTUNE_TESTS_TESTING_CAPTURE_WINDOWS_H_
#define SPINTUNE_TESTS_TESTING_CAPTURE_WINDOWS_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <thread>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "agent/capture/capture.h"
#include "agent/io_load.h"
#include "gtest/gtest.h"
#include "models/latency_histogram.h"

namespace spintune::testing {

// How late a thread of this process wakes from a 5 ms sleep, at most, from
// its start to its end: the lateness a capture's window turns (made by a
// reader thread at the same priority, or in Take) may have on a loaded
// host, for tests that place completions in the windows by the wall clock
// and must not take a turn the host held back for one the capture missed.
class WakeLatenessProbe {
 public:
  WakeLatenessProbe()
      : thread_([this] {
          while (!stop_) {
            const auto asked = std::chrono::milliseconds(5);
            const auto before = std::chrono::steady_clock::now();
            std::this_thread::sleep_for(asked);
            const auto late = std::chrono::steady_clock::now() - before - asked;
            const int64_t late_ns = std::chrono::nanoseconds(late).count();
            if (late_ns > max_late_ns_) max_late_ns_ = late_ns;
          }
        }) {}
  ~WakeLatenessProbe() {
    stop_ = true;
    thread_.join();
  }
  absl::Duration max_late() const { return absl::Nanoseconds(max_late_ns_.load()); }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> max_late_ns_{0};
  std::thread thread_;
};

// A few reads (about 10, on `load`'s file) that a test runs after the
// load it measures, so that every capture sees an event after the load's
// end (TakePast) even where the disk is otherwise idle.
inline absl::Status RunMarkerIo(IoLoadOptions load) {
  load.threads = 1;
  load.requests_per_second = 200;
  load.duration = absl::Milliseconds(50);
  return RunIoLoad(load).status();
}

// A capture's reader lags a load on a loaded host: takes from `c` into `out`
// until it has counted an event past CLOCK_MONOTONIC `t_ns` (it reads in
// timestamp order, so everything before is in; RunMarkerIo makes one come).
// False after kEventDeadline-like 30 s without one, or when Take fails.
inline bool TakePast(Capture* c, CaptureOutput* out, uint64_t t_ns) {
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (true) {
    if (!c->Take(out, absl::Milliseconds(20)).ok()) return false;
    if (c->stats().last_event_ns > t_ns) return true;
    if (absl::Now() >= deadline) return false;
  }
}

// One capture's completion times and how many took the IRQ path.
struct WaitSums {
  LatencyHistogram wait;
  uint64_t irq_path = 0;
};

// Runs `load`, calling `take` every 20 ms on another thread meanwhile and
// for a second after it (readers on loaded CPUs lag; a lagging full
// capture would miss its last completions); a failed load or take fails
// the test.
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
  std::this_thread::sleep_for(std::chrono::seconds(1));
  loading = false;
  taker.join();
  ASSERT_TRUE(ran.ok()) << ran.status();
  ASSERT_TRUE(taking.ok()) << taking;
  ASSERT_TRUE(take().ok());
}

// The windowed capture (`some`) against the full one (`all`) inside the
// windows: the same count within `in_tolerance` (a share), the same p50 and
// p90 within 5% and the same IRQ-path share within 0.03. (Not the share
// over the run: other tests' I/O on the disk comes in bursts, so a few
// seconds' share is not the time's.)
inline void ExpectWindowedLikeAll(const WaitSums& all_run, const WaitSums& all_in,
                                  const WaitSums& some_in, double in_tolerance) {
  ASSERT_GT(all_run.wait.total_count(), 2000u) << "the load's requests were captured";
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
