#include "models/bootstrap.h"

#include <random>

#include "gtest/gtest.h"

namespace spintune {
namespace {

const PlatformCosts kCosts{20'000, 30'000, 100, 2'000, 50'000};

TEST(Bootstrap, DeterministicWaitsHaveAnExactGain) {
  // X = 5 us always: IRQ costs 20 + (5 + 30) = 55 us, spinning 10 us: gain 45
  // us for every resample.
  auto g = BootstrapGain(WaitDistribution::FromSamples(std::vector<uint64_t>(500, 5'000)),
                         WaitParams::SpinThenIrq(5'000), WaitParams::Irq(), kCosts, 1.0);
  EXPECT_NEAR(g.gain_ns, 45'000, 1e-6);
  EXPECT_NEAR(g.low_ns, 45'000, 1e-6);
  EXPECT_NEAR(g.high_ns, 45'000, 1e-6);
}

TEST(Bootstrap, IntervalCoversTheTrueGain) {
  // A bimodal wait; the true gain of SPIN_THEN_IRQ(10 us) over IRQ from a
  // large sample; intervals from 2,000-sample draws must cover it in at
  // least 85% of 40 trials (nominal 95%).
  std::mt19937_64 rng(21);
  auto draw = [&](int n) {
    std::uniform_real_distribution<double> u(0, 1);
    std::lognormal_distribution<double> fast(std::log(4'000), 0.3), slow(std::log(400'000), 0.5);
    std::vector<uint64_t> x;
    for (int i = 0; i < n; ++i) x.push_back(static_cast<uint64_t>(u(rng) < 0.7 ? fast(rng) : slow(rng)));
    return x;
  };
  const WaitParams chosen = WaitParams::SpinThenIrq(10'000);
  const double truth = BootstrapGain(WaitDistribution::FromSamples(draw(400'000)), chosen,
                                     WaitParams::Irq(), kCosts, 1.0, 10)
                           .gain_ns;
  int covered = 0;
  for (int trial = 0; trial < 40; ++trial) {
    auto g = BootstrapGain(WaitDistribution::FromSamples(draw(2000)), chosen, WaitParams::Irq(),
                           kCosts, 1.0, 200, 0.95, trial + 1);
    EXPECT_LE(g.low_ns, g.gain_ns);
    EXPECT_GE(g.high_ns, g.gain_ns);
    if (g.low_ns <= truth && truth <= g.high_ns) ++covered;
  }
  EXPECT_GE(covered, 34);
}

TEST(Bootstrap, IsDeterministicForASeed) {
  std::vector<uint64_t> x;
  for (int i = 1; i <= 300; ++i) x.push_back(i * 1000);
  const auto d = WaitDistribution::FromSamples(x);
  auto a = BootstrapGain(d, WaitParams::SpinThenIrq(50'000), WaitParams::Irq(), kCosts, 1, 200, 0.95, 7);
  auto b = BootstrapGain(d, WaitParams::SpinThenIrq(50'000), WaitParams::Irq(), kCosts, 1, 200, 0.95, 7);
  EXPECT_EQ(a.low_ns, b.low_ns);
  EXPECT_EQ(a.high_ns, b.high_ns);
}

}  // namespace
}  // namespace spintune
