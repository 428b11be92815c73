#include "tuner/fit_inputs.h"

#include "gtest/gtest.h"

namespace spintune {
namespace {

// Means of a few exact terms: only rounding separates the answers.
constexpr double kExact = 1e-9;

TEST(FitInputs, DispatchHistogramsOfEveryDeviceReachTheirCpuClass) {
  TargetRecord target;
  target.board = "b";
  CpuClassRecord big{"big", 1'000'000, {40, 20, 1, 5, 60}, 30};
  CpuClassRecord little{"little", 500'000, {80, 50, 2, 9, 70}, 0};
  target.cpu_classes = {big, little};
  // "big": handler 10 ns on mmc0 and 30 ns on spi0 (mean 20), wake 100 ns.
  // "little": handler only, overhead unknown: irq_cpu stays declared.
  DispatchRecord mmc{"big", "mmc0", {}, {}}, spi{"big", "spi0", {}, {}},
      other{"little", "mmc0", {}, {}};
  mmc.handler.Record(10, 5);
  spi.handler.Record(30, 5);
  mmc.wake.Record(100, 4);
  other.handler.Record(200, 3);
  const FitInputs in = BuildFitInputs(target, {}, {mmc, spi, other});

  ASSERT_EQ(in.cpu_classes.size(), 2u);
  EXPECT_EQ(in.measured_costs.at("big").irq_handler.total_count(), 10u);
  EXPECT_EQ(in.measured_costs.at("big").irq_wake.total_count(), 4u);
  EXPECT_EQ(in.measured_costs.at("big").irq_overhead_cpu_ns, 30);
  EXPECT_EQ(in.measured_costs.at("little").irq_handler.total_count(), 3u);
  // Means for the callers that read the costs directly: 30 + 20, 100.
  EXPECT_NEAR(in.cpu_classes[0].costs.irq_cpu_ns, 50, kExact);
  EXPECT_NEAR(in.cpu_classes[0].costs.irq_wake_ns, 100, kExact);
  EXPECT_EQ(in.cpu_classes[0].costs.timer_wake_ns, 60);
  EXPECT_EQ(in.cpu_classes[1].costs.irq_cpu_ns, 80);
  EXPECT_EQ(in.cpu_classes[1].costs.irq_wake_ns, 50);
}

}  // namespace
}  // namespace spintune
