#include "agent/sim_driver.h"

#include <algorithm>
#include <cmath>

namespace spintune {
namespace {

// Relative spread of the IRQ handler, wake and timer CPU costs.
constexpr double kCostSigma = 0.15;

}  // namespace

SimDriver::SimDriver(const BoardModel& board, double timer_wake_factor, uint64_t seed)
    : board_(board), timer_wake_ns_(board.timer_wake_ns * timer_wake_factor), rng_(seed) {}

double SimDriver::Noisy(double mean_ns) {
  // Lognormal with mean 1 (not median 1): means stay unbiased.
  std::lognormal_distribution<double> d(-0.5 * kCostSigma * kCostSigma, kCostSigma);
  return mean_ns * d(rng_);
}

double SimDriver::Oversleep() {
  if (timer_wake_ns_ <= 0) return 0;
  return std::exponential_distribution<double>(1 / timer_wake_ns_)(rng_);
}

SimWait SimDriver::Wait(const WaitParams& wait, double x_ns) {
  SimWait w;
  const double poll = board_.CyclesToNs(board_.poll_read_cycles);
  const double timer_cpu = board_.CyclesToNs(board_.timer_cpu_cycles);
  // Arms the IRQ at `armed_ns` and sleeps until it wakes the waiter.
  auto irq_after = [&](double armed_ns) {
    w.irq = true;
    w.handler_ns = Noisy(board_.CyclesToNs(board_.irq_handler_cycles));
    w.wake_ns = Noisy(board_.CyclesToNs(board_.irq_wake_cycles));
    w.cpu_ns += Noisy(board_.IrqOverheadNs()) + w.handler_ns;
    w.latency_ns = std::max(armed_ns, x_ns) + w.wake_ns;
  };
  switch (wait.strategy) {
    case Strategy::kIrq:
      irq_after(0);
      break;
    case Strategy::kSpin:
      w.cpu_ns = std::min(x_ns, static_cast<double>(wait.spin_ns)) + poll;
      w.latency_ns = x_ns;
      break;
    case Strategy::kSpinThenIrq:
      if (x_ns <= static_cast<double>(wait.spin_ns)) {
        w.cpu_ns = x_ns + poll;
        w.latency_ns = x_ns;
      } else {
        w.cpu_ns = static_cast<double>(wait.spin_ns);
        irq_after(static_cast<double>(wait.spin_ns));
      }
      break;
    case Strategy::kSleepThenSpin: {
      const double tw = Oversleep();
      w.oversleep_ns.push_back(tw);
      const double woke = static_cast<double>(wait.sleep_ns) + tw;
      w.cpu_ns = Noisy(timer_cpu);
      if (x_ns <= woke) {
        w.latency_ns = woke;
        w.cpu_ns += poll;
      } else if (wait.spin_ns == 0 || x_ns - woke <= static_cast<double>(wait.spin_ns)) {
        w.cpu_ns += x_ns - woke + poll;
        w.latency_ns = x_ns;
      } else {
        w.cpu_ns += static_cast<double>(wait.spin_ns);
        irq_after(woke + static_cast<double>(wait.spin_ns));
      }
      break;
    }
    case Strategy::kPollSleep: {
      // Poll; until done, sleep the interval (plus oversleep) and poll again.
      double t = 0;
      w.cpu_ns = poll;
      for (int sleeps = 0; t < x_ns && sleeps < 1'000'000; ++sleeps) {
        const double tw = Oversleep();
        w.oversleep_ns.push_back(tw);
        t += static_cast<double>(wait.poll_interval_ns) + tw;
        w.cpu_ns += Noisy(timer_cpu) + poll;
      }
      w.latency_ns = std::max(t, x_ns);
      break;
    }
  }
  return w;
}

}  // namespace spintune
