#include "models/inverse_clock_sums.h"

#include <random>

#include "gtest/gtest.h"

namespace spintune {
namespace {

Eigen::VectorXd Outputs(double khz) {
  // 100 ns of device time plus 3,000 and 9,000 cycles.
  const double ns_per_cycle = 1e6 / khz;
  Eigen::VectorXd y(2);
  y << 100 + 3000 * ns_per_cycle, 100 + 9000 * ns_per_cycle;
  return y;
}

TEST(InverseClockSums, RecoversTheDeviceTimeAndTheCycles) {
  InverseClockSums sums(2);
  for (double khz : {50'000.0, 100'000.0, 454'000.0}) sums.Add(khz, 10, Outputs(khz));
  const auto coef = sums.Solve();
  EXPECT_NEAR(coef(0, 0), 100, 1e-6);
  EXPECT_NEAR(coef(0, 1), 100, 1e-6);
  EXPECT_NEAR(coef(1, 0), 3000, 1e-6);
  EXPECT_NEAR(coef(1, 1), 9000, 1e-6);
}

TEST(InverseClockSums, OneClockGivesTheWeightedMean) {
  InverseClockSums sums(1);
  sums.Add(100'000, 1, Eigen::VectorXd::Constant(1, 10));
  sums.Add(100'000, 3, Eigen::VectorXd::Constant(1, 30));
  const auto coef = sums.Solve();
  EXPECT_DOUBLE_EQ(coef(0, 0), 25);
  EXPECT_EQ(coef(1, 0), 0);
}

// Taking an observation out leaves the fit of the others, whatever order
// they came in.
TEST(InverseClockSums, RemovingAnObservationLeavesTheFitOfTheRest) {
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> khz(20'000, 2'000'000), noise(-50, 50), w(1, 1000);
  struct Obs {
    double khz, weight;
    Eigen::VectorXd y;
  };
  std::vector<Obs> all;
  for (int i = 0; i < 200; ++i) {
    const double f = khz(rng);
    Eigen::VectorXd y = Outputs(f);
    y.array() += noise(rng);
    all.push_back({f, w(rng), y});
  }
  InverseClockSums with_all(2), without(2);
  for (size_t i = 0; i < all.size(); ++i) {
    with_all.Add(all[i].khz, all[i].weight, all[i].y);
    if (i != 17) without.Add(all[i].khz, all[i].weight, all[i].y);
  }
  with_all.Remove(all[17].khz, all[17].weight, all[17].y);
  EXPECT_EQ(with_all.observations(), without.observations());
  const auto a = with_all.Solve(), b = without.Solve();
  for (int j = 0; j < 2; ++j) {
    EXPECT_NEAR(a(0, j), b(0, j), 1e-6 * std::abs(b(0, j)));
    EXPECT_NEAR(a(1, j), b(1, j), 1e-6 * std::abs(b(1, j)));
  }
  // Down to one clock: the other board's mean again, not a slope.
  InverseClockSums two(2);
  two.Add(50'000, 5, Outputs(50'000));
  two.Add(100'000, 5, Outputs(100'000));
  two.Remove(100'000, 5, Outputs(100'000));
  const auto one = two.Solve();
  EXPECT_NEAR(one(0, 0), Outputs(50'000)(0), 1e-9);
  EXPECT_EQ(one(1, 0), 0);
}

}  // namespace
}  // namespace spintune
