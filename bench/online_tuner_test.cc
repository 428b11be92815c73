#include "bench/online_tuner.h"

#include <random>

#include "gtest/gtest.h"

namespace spintune {
namespace {

const PlatformCosts kCosts{20'000, 30'000, 100, 2'000, 50'000};

OnlineTunerOptions Options() {
  OnlineTunerOptions o;
  o.optimizer.max_spin_ns = 10'000'000;
  return o;
}

void Feed(OnlineTuner* t, std::mt19937_64& rng, double median, int n) {
  std::lognormal_distribution<double> d(std::log(median), 0.2);
  for (int i = 0; i < n; ++i) t->Observe(d(rng), t->current(), {}, 0);
}

TEST(OnlineTuner, FollowsAShiftAndStaysPutOtherwise) {
  std::mt19937_64 rng(4);
  OnlineTuner t(kCosts, Options());
  // Before any fit: Karlin's T = B = 20 + 30 us.
  EXPECT_EQ(t.current(), WaitParams::SpinThenIrq(50'000));
  // Waits around 5 us: much cheaper than B = 50 us: spin them.
  Feed(&t, rng, 5'000, 4000);
  EXPECT_EQ(t.current().strategy, Strategy::kSpinThenIrq);
  const WaitParams settled = t.current();
  // More of the same: hysteresis keeps the decision.
  Feed(&t, rng, 5'000, 4000);
  EXPECT_EQ(t.changes_detected(), 0);
  EXPECT_LE(std::abs(static_cast<double>(t.current().spin_ns) -
                     static_cast<double>(settled.spin_ns)),
            0.2 * static_cast<double>(settled.spin_ns));
  // The device slows down to ~2 ms: block instead, within ~1,000 requests.
  Feed(&t, rng, 2'000'000, 1000);
  EXPECT_GE(t.changes_detected(), 1);
  EXPECT_NE(t.current().strategy, Strategy::kSpinThenIrq);
}

}  // namespace
}  // namespace spintune
