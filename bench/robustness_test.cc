// The robustness clamp: whatever the training data said, J(X) <=
// (1 + 1/rho) * OPT_sb(X) for every request, checked on adversarial streams
// (X just above the threshold, X just below, X huge).
#include <random>

#include "gtest/gtest.h"
#include "bench/references.h"
#include "models/wait_optimizer.h"

namespace spintune {
namespace {

const PlatformCosts kCosts{20'000, 30'000, 100, 2'000, 50'000};

// Worst ratio J/OPT_sb of `params` over adversarial completion times.
double WorstRatio(const WaitParams& params, double lambda) {
  const double t = static_cast<double>(params.spin_ns);
  double worst = 0;
  for (double x : {t + 1, t, t > 1 ? t - 1 : 0.0, 1.0, 1e3, 1e5, 1e7, 1e9}) {
    const RequestCost c = CostOfRequest(x, params, kCosts);
    const double j = c.cpu_ns + lambda * c.latency_ns;
    worst = std::max(worst, j / SpinBlockClairvoyantCost(x, kCosts, lambda));
  }
  return worst;
}

TEST(Robustness, ClampBoundsTheWorstCaseForEveryTrainingDistribution) {
  std::mt19937_64 rng(3);
  for (double lambda : {0.0, 1.0, 10.0}) {
    const double b = kCosts.irq_cpu_ns + lambda * kCosts.irq_wake_ns;
    for (double rho : {0.2, 0.5, 1.0}) {
      // Training sets that push the learned threshold to either extreme: all
      // tiny waits (spin everything) or all huge waits (block at once).
      for (double scale : {0.01, 1.0, 100.0}) {
        std::exponential_distribution<double> e(1.0 / (scale * b));
        std::vector<uint64_t> x;
        for (int i = 0; i < 5000; ++i) x.push_back(static_cast<uint64_t>(e(rng)) + 1);
        OptimizerOptions o;
        o.objective = {lambda, false};
        o.max_spin_ns = 10'000'000;
        o.robustness_rho = rho;
        auto r = OptimizeWait(WaitDistribution::FromSamples(x), kCosts, o);
        ASSERT_TRUE(r.ok()) << r.status();
        ASSERT_EQ(r->params.strategy, Strategy::kSpinThenIrq);
        const double t = static_cast<double>(r->params.spin_ns);
        EXPECT_GE(t, rho * b - 1);
        EXPECT_LE(t, b / rho + 1);
        // The bound, with a relative slack for the integer rounding of T.
        EXPECT_LE(WorstRatio(r->params, lambda), (1 + 1 / rho) * (1 + 1e-6))
            << "lambda " << lambda << " rho " << rho << " scale " << scale;
      }
    }
  }
}

TEST(Robustness, WithoutTheClampTheWorstCaseIsUnbounded) {
  // 90% of the training waits are 1 us and 10% are 1 s, so the unclamped fit
  // spins 1 us: an adversary answering just after that makes the ratio
  // (T + B) / T huge.
  std::vector<uint64_t> x(900, 1'000);
  x.insert(x.end(), 100, 1'000'000'000);
  OptimizerOptions o;
  o.Disallow(Strategy::kSpin);
  o.Disallow(Strategy::kSleepThenSpin);
  o.Disallow(Strategy::kPollSleep);
  auto r = OptimizeWait(WaitDistribution::FromSamples(x), kCosts, o);
  ASSERT_TRUE(r.ok());
  EXPECT_GT(WorstRatio(r->params, 1.0), 10);
}

TEST(Robustness, RejectsRhoOutsideTheUnitInterval) {
  OptimizerOptions o;
  o.robustness_rho = 1.5;
  EXPECT_FALSE(OptimizeWait(WaitDistribution::FromSamples({100}), kCosts, o).ok());
}

}  // namespace
}  // namespace spintune
