#include "models/cost_moments.h"

#include <random>

#include "gtest/gtest.h"

namespace spintune {
namespace {

constexpr double kExact = 1e-9;

// Two requests (cpu, latency) = (10, 100) and (30, 300), lambda = 2:
// J = 210 and 630, mean 420, population variance ((210-420)^2 +
// (630-420)^2) / 2 = 44100.
TEST(CostMoments, MeanAndVarianceOfJAreExact) {
  CostMoments m;
  m.Add(10, 100);
  m.Add(30, 300);
  EXPECT_NEAR(m.MeanCostNs(2), 420, kExact);
  EXPECT_NEAR(m.CostVariance(2), 44100, 1e-6);
  const CostInterval i = m.Interval(2, 1.0);
  EXPECT_NEAR(i.low_ns, 420 - std::sqrt(44100.0 / 2), 1e-6);
  EXPECT_NEAR(i.high_ns, 420 + std::sqrt(44100.0 / 2), 1e-6);
}

TEST(CostMoments, MergeEqualsAddingEverything) {
  CostMoments a, b, all;
  for (int i = 0; i < 10; ++i) {
    a.Add(i, 2 * i + 1);
    all.Add(i, 2 * i + 1);
  }
  for (int i = 0; i < 7; ++i) {
    b.Add(3 * i, i);
    all.Add(3 * i, i);
  }
  a.Merge(b);
  EXPECT_EQ(a.requests, all.requests);
  EXPECT_NEAR(a.MeanCostNs(0.5), all.MeanCostNs(0.5), kExact);
  EXPECT_NEAR(a.CostVariance(0.5), all.CostVariance(0.5), 1e-9);
}

// The 95% interval covers the true mean about 95% of the time.
TEST(CostMoments, IntervalCoversTheTrueMean) {
  std::mt19937_64 rng(3);
  std::exponential_distribution<double> cpu(1 / 20e3), extra(1 / 50e3);
  const double truth = 20e3 + 1.0 * (20e3 + 50e3);  // latency = cpu + extra
  int covered = 0;
  for (int trial = 0; trial < 400; ++trial) {
    CostMoments m;
    for (int i = 0; i < 500; ++i) {
      const double c = cpu(rng);
      m.Add(c, c + extra(rng));
    }
    const CostInterval ci = m.Interval(1.0);
    covered += ci.low_ns <= truth && truth <= ci.high_ns;
  }
  EXPECT_GT(covered, 400 * 0.92);
  EXPECT_LT(covered, 400 * 0.98);
}

}  // namespace
}  // namespace spintune
