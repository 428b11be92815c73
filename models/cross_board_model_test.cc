#include "models/cross_board_model.h"

#include <random>

#include "gtest/gtest.h"

namespace spintune {
namespace {

// Quantiles built as device_ns + cycles / f exactly.
std::vector<double> Quantiles(double cpu_khz) {
  std::vector<double> q;
  for (double p : QuantileGrid()) {
    const double device_ns = 50'000 + 100'000 * p;
    const double cycles = 10'000 + 20'000 * p;
    q.push_back(device_ns + cycles * 1e6 / cpu_khz);
  }
  return q;
}

TEST(CrossBoardModel, RecoversDeviceTimeAndCyclesFromSeveralClocks) {
  auto model = CrossBoardModel::Fit({{50'000, Quantiles(50'000), 1000},
                                     {100'000, Quantiles(100'000), 500},
                                     {200'000, Quantiles(200'000), 800}});
  ASSERT_TRUE(model.ok()) << model.status();
  // Relative tolerance: a 3x2 least-squares solve in doubles.
  constexpr double kTol = 1e-9;
  const auto predicted = model->PredictQuantiles(75'000);
  const auto truth = Quantiles(75'000);
  for (size_t i = 0; i < truth.size(); ++i) {
    EXPECT_NEAR(predicted[i], truth[i], kTol * truth[i]) << i;
  }
  EXPECT_NEAR(model->coefficients()(1, 0), 10'000 + 20'000 * 0.005, 1e-6);
}

TEST(CrossBoardModel, OneClockKeepsTheObservedQuantiles) {
  auto model = CrossBoardModel::Fit({{100'000, Quantiles(100'000), 10}});
  ASSERT_TRUE(model.ok());
  const auto q = model->PredictQuantiles(50'000);
  EXPECT_NEAR(q[50], Quantiles(100'000)[50], 1e-6);
}

TEST(CrossBoardModel, CostsScaleWithTheClock) {
  // IRQ path of 10,000 cycles: 200 us at 50 MHz, 100 us at 100 MHz.
  auto c = PredictCosts({{50'000, {200'000, 400'000, 600, 100'000, 2e6}},
                         {100'000, {100'000, 200'000, 300, 50'000, 2e6}}},
                        200'000);
  ASSERT_TRUE(c.ok());
  EXPECT_NEAR(c->irq_cpu_ns, 50'000, 1e-3);
  EXPECT_NEAR(c->irq_wake_ns, 100'000, 1e-3);
  EXPECT_NEAR(c->timer_wake_ns, 2e6, 1e-3);  // tick-bound: no clock dependence
}

TEST(CrossBoardModel, RejectsBadInput) {
  EXPECT_FALSE(CrossBoardModel::Fit({}).ok());
  EXPECT_FALSE(CrossBoardModel::Fit({{0, Quantiles(1), 1}}).ok());
  EXPECT_FALSE(CrossBoardModel::Fit({{1000, {1, 2, 3}, 1}}).ok());
}

// The one-pass grid quantiles are LatencyHistogram::QuantileNs at every
// grid point, for small and skewed histograms as well.
TEST(CrossBoardModel, GridQuantilesAreTheHistogramsQuantiles) {
  std::mt19937_64 rng(5);
  std::lognormal_distribution<double> ns(std::log(200e3), 1.0);
  for (int samples : {1, 2, 7, 99, 100, 101, 5000}) {
    LatencyHistogram h;
    for (int i = 0; i < samples; ++i) h.Record(static_cast<uint64_t>(ns(rng)), 1 + i % 3);
    const std::vector<double> q = GridQuantiles(h);
    ASSERT_EQ(q.size(), QuantileGrid().size());
    for (size_t i = 0; i < q.size(); ++i) {
      EXPECT_EQ(q[i], h.QuantileNs(QuantileGrid()[i])) << samples << " samples, point " << i;
    }
  }
  EXPECT_EQ(GridQuantiles(LatencyHistogram()), std::vector<double>(kQuantileGridPoints, 0.0));
}

}  // namespace
}  // namespace spintune
