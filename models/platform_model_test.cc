// Known-answer tests of the platform model. Durations are in the exact range
// of the histogram layout (0..255 ns have a bucket each), so every atom and
// mean below is exact and derived by hand in the comment beside it.
#include "models/platform_model.h"

#include "gtest/gtest.h"

namespace spintune {
namespace {

// Sums of a handful of exact terms: only rounding separates the answers.
constexpr double kExact = 1e-9;

PlatformCosts Declared() {
  PlatformCosts c;
  c.irq_cpu_ns = 40;
  c.irq_wake_ns = 20;
  c.poll_read_ns = 1;
  c.timer_cpu_ns = 5;
  c.timer_wake_ns = 150;
  return c;
}

// Oversleep 100 ns or 200 ns, one half each: mean 150 ns, the declared value.
PlatformModel TwoAtomTimer() {
  MeasuredCosts m;
  m.timer_wake.Record(100, 2);
  m.timer_wake.Record(200, 2);
  return PlatformModel::Measured(Declared(), m);
}

TEST(PlatformModel, ConstantsAreOneAtom) {
  const PlatformModel model(Declared());
  ASSERT_EQ(model.timer_wake().size(), 1u);
  EXPECT_EQ(model.timer_wake()[0].value_ns, 150);
  EXPECT_EQ(model.timer_wake()[0].probability, 1);
}

TEST(PlatformModel, MeasuredDistributionsReplaceTheirConstants) {
  // Handler 10 ns x3 and 30 ns x1 (mean 15) after a 50 ns overhead: irq_cpu
  // 65. Wake 12 ns x1, 24 ns x2: mean 20. Oversleep 100 ns x3, 200 ns x1:
  // atoms {100: 0.75, 200: 0.25}, mean 125.
  MeasuredCosts m;
  m.irq_handler.Record(10, 3);
  m.irq_handler.Record(30, 1);
  m.irq_overhead_cpu_ns = 50;
  m.irq_wake.Record(12, 1);
  m.irq_wake.Record(24, 2);
  m.timer_wake.Record(100, 3);
  m.timer_wake.Record(200, 1);
  const PlatformModel model = PlatformModel::Measured(Declared(), m);
  EXPECT_NEAR(model.means().irq_cpu_ns, 65, kExact);
  EXPECT_NEAR(model.means().irq_wake_ns, 20, kExact);
  EXPECT_NEAR(model.means().timer_wake_ns, 125, kExact);
  EXPECT_EQ(model.means().timer_cpu_ns, 5);  // not measured: declared
  ASSERT_EQ(model.timer_wake().size(), 2u);
  EXPECT_EQ(model.timer_wake()[0].value_ns, 100);
  EXPECT_NEAR(model.timer_wake()[0].probability, 0.75, kExact);
  EXPECT_EQ(model.timer_wake()[1].value_ns, 200);
  EXPECT_NEAR(model.timer_wake()[1].probability, 0.25, kExact);
}

TEST(PlatformModel, HandlerWithoutKnownOverheadKeepsTheDeclaredIrqCpu) {
  MeasuredCosts m;
  m.irq_handler.Record(10, 3);
  const PlatformModel model = PlatformModel::Measured(Declared(), m);
  EXPECT_EQ(model.means().irq_cpu_ns, 40);
  EXPECT_EQ(model.timer_wake().size(), 1u);
}

TEST(ExpectedRequestCost, PollSleepTakesTheFirstPollAtOrAfterXPerOversleep) {
  // POLL_SLEEP(I = 1000), X = 2300, one oversleep per request:
  //   tw = 100: period 1100, k = ceil(2300 / 1100) = 3, latency 3300
  //   tw = 200: period 1200, k = ceil(2300 / 1200) = 2, latency 2400
  // E[k] = 2.5: cpu 2.5 (poll_read + timer_cpu) = 15; latency 2850. The mean
  // oversleep alone (period 1150) would give k = 2 exactly, latency 2300.
  const WaitParams poll = WaitParams::PollSleep(1000);
  const RequestCost c = ExpectedRequestCost(2300, poll, TwoAtomTimer());
  EXPECT_NEAR(c.cpu_ns, 15, kExact);
  EXPECT_NEAR(c.latency_ns, 2850, kExact);
  const RequestCost constant = ExpectedRequestCost(2300, poll, PlatformModel(Declared()));
  EXPECT_NEAR(constant.cpu_ns, 12, kExact);
  EXPECT_NEAR(constant.latency_ns, 2300, kExact);
}

TEST(ExpectedRequestCost, SleepThenSpinWaitsForTheLaterOfXAndTheWake) {
  // SLEEP_THEN_SPIN(S = 50, spin bound 1000), X = 230: D = S + tw.
  //   tw = 100: D = 150 < X, spin 80: cpu 5 + 80 = 85, latency 230
  //   tw = 200: D = 250 >= X:        cpu 5,           latency 250
  // Expectation: cpu 45, latency 240 (latency max(X, D)).
  const RequestCost c =
      ExpectedRequestCost(230, WaitParams::SleepThenSpin(50, 1000), TwoAtomTimer());
  EXPECT_NEAR(c.cpu_ns, 45, kExact);
  EXPECT_NEAR(c.latency_ns, 240, kExact);
}

TEST(ExpectedRequestCost, IrqCostsEnterThroughTheirMeans) {
  // IRQ: cpu irq_cpu, latency X + irq_wake, whatever the oversleep.
  const RequestCost c = ExpectedRequestCost(230, WaitParams::Irq(), TwoAtomTimer());
  EXPECT_EQ(c.cpu_ns, 40);
  EXPECT_EQ(c.latency_ns, 250);
}

}  // namespace
}  // namespace spintune
