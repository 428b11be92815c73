#include "models/knob_statistics.h"

#include <cmath>
#include <random>

#include "gtest/gtest.h"

namespace spintune {
namespace {

// Printed tables give 4 decimals.
constexpr double kTableTolerance = 1e-4;

TEST(KnobStatistics, TQuantilesMatchPrintedTables) {
  EXPECT_NEAR(StudentTQuantile(0.975, 1), 12.7062, kTableTolerance);
  EXPECT_NEAR(StudentTQuantile(0.975, 2), 4.3027, kTableTolerance);
  EXPECT_NEAR(StudentTQuantile(0.975, 10), 2.2281, kTableTolerance);
  EXPECT_NEAR(StudentTQuantile(0.975, 30), 2.0423, kTableTolerance);
  EXPECT_NEAR(StudentTQuantile(0.995, 5), 4.0321, kTableTolerance);
  EXPECT_NEAR(StudentTQuantile(0.975, 1e7), 1.95996, kTableTolerance);
  EXPECT_NEAR(StudentTQuantile(0.025, 10), -2.2281, kTableTolerance);
}

TEST(KnobStatistics, TCdfIsSymmetricAndInvertsTheQuantile) {
  EXPECT_DOUBLE_EQ(StudentTCdf(0, 3.5), 0.5);
  for (double df : {1.0, 2.5, 7.0, 40.0}) {
    for (double t : {0.3, 1.0, 2.0, 6.0}) {
      EXPECT_NEAR(StudentTCdf(t, df) + StudentTCdf(-t, df), 1.0, 1e-12);
      EXPECT_NEAR(StudentTQuantile(StudentTCdf(t, df), df), t, 1e-8 * t);
    }
  }
}

TEST(KnobStatistics, PooledSigmaWeighsGroupsByTheirDegreesOfFreedom) {
  RunningMoments a, b, single;
  for (double x : {1.0, 3.0}) a.Add(x);          // m2 = 2
  for (double x : {2.0, 4.0, 6.0}) b.Add(x);     // m2 = 8
  single.Add(100);                               // no spread information
  const PooledNoise noise = PoolNoise({a, b, single});
  EXPECT_DOUBLE_EQ(noise.df, 3);
  EXPECT_NEAR(noise.sigma, std::sqrt(10.0 / 3), 1e-12);
  EXPECT_EQ(PoolNoise({single}).df, 0);
}

TEST(KnobStatistics, RatioIntervalsCoverTheTrueRatio) {
  // a / b = 1.25 exactly in geometric mean, 3% lognormal noise, 5 runs each:
  // the 95% interval must cover 1.25 in at least 90% of 300 draws.
  std::mt19937_64 rng(7);
  std::normal_distribution<double> noise(0, 0.03);
  int covered = 0;
  for (int i = 0; i < 300; ++i) {
    std::vector<double> a, b;
    for (int k = 0; k < 5; ++k) {
      a.push_back(std::log(125.0) + noise(rng));
      b.push_back(std::log(100.0) + noise(rng));
    }
    const RatioInterval r = CompareLogMeans(a, b, 0.95);
    EXPECT_LE(r.low, r.ratio);
    EXPECT_GE(r.high, r.ratio);
    if (r.low <= 1.25 && 1.25 <= r.high) ++covered;
    EXPECT_LT(r.p_value, 0.05) << "a 25% effect in 3% noise is always significant";
  }
  EXPECT_GE(covered, 270);
}

TEST(KnobStatistics, IdenticalValuesGiveAnExactRatio) {
  const RatioInterval r = CompareLogMeans({std::log(3.0), std::log(3.0)},
                                         {std::log(1.0), std::log(1.0)}, 0.95);
  EXPECT_NEAR(r.ratio, 3, 1e-12);
  EXPECT_NEAR(r.low, 3, 1e-12);
  EXPECT_NEAR(r.high, 3, 1e-12);
  EXPECT_EQ(r.p_value, 0);
}

TEST(KnobStatistics, ASingleValueBorrowsThePooledNoise) {
  const MeanInterval alone = GeometricMeanInterval({std::log(50.0)}, 0.95, PooledNoise{});
  EXPECT_DOUBLE_EQ(alone.low, alone.high);
  const MeanInterval pooled = GeometricMeanInterval({std::log(50.0)}, 0.95, PooledNoise{0.1, 10});
  EXPECT_NEAR(pooled.mean, 50, 1e-9);
  EXPECT_NEAR(std::log(pooled.high / pooled.mean), 2.2281 * 0.1, 1e-4);
  EXPECT_NEAR(std::log(pooled.mean / pooled.low), 2.2281 * 0.1, 1e-4);
}

}  // namespace
}  // namespace spintune
