#include "policy/policy_bounds.h"

#include "gtest/gtest.h"

namespace spintune {
namespace {

PolicyTable Table(std::vector<WaitParams> waits) {
  PolicyTable t;
  uint32_t op = 0;
  for (const auto& w : waits) {
    PolicyEntry e;
    e.key = {"cpu", "mmc0", op++, 12};
    e.wait = w;
    t.entries.push_back(e);
  }
  return t;
}

TEST(PolicyBoundsTest, NoBoundsAllowEverything) {
  EXPECT_TRUE(CheckPolicyBounds(Table({WaitParams::Spin(0), WaitParams::SpinThenIrq(5'000'000)}),
                                {})
                  .ok());
}

TEST(PolicyBoundsTest, SpinLimitCoversEverySpinningStrategy) {
  PolicyBounds b;
  b.max_spin_ns = 100'000;
  EXPECT_TRUE(CheckPolicyBounds(Table({WaitParams::SpinThenIrq(100'000), WaitParams::Irq(),
                                       WaitParams::Spin(50'000)}),
                                b)
                  .ok());
  auto over = CheckPolicyBounds(Table({WaitParams::Irq(), WaitParams::SpinThenIrq(100'001)}), b);
  EXPECT_EQ(over.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(over.message().find("entries[1]"), std::string::npos) << over.message();
  EXPECT_NE(over.message().find("--max-spin-ns 100000"), std::string::npos);
  // An unbounded spin (timeout 0) breaks any finite limit.
  EXPECT_FALSE(CheckPolicyBounds(Table({WaitParams::Spin(0)}), b).ok());
  WaitParams sleep_spin{Strategy::kSleepThenSpin, 0, 20'000, 0};
  EXPECT_FALSE(CheckPolicyBounds(Table({sleep_spin}), b).ok());
  sleep_spin.spin_ns = 80'000;
  EXPECT_TRUE(CheckPolicyBounds(Table({sleep_spin}), b).ok());
}

TEST(PolicyBoundsTest, AllowedStrategies) {
  auto allowed = ParseStrategyList("irq, spin_then_irq");
  ASSERT_TRUE(allowed.ok());
  PolicyBounds b;
  b.allowed = *allowed;
  EXPECT_TRUE(CheckPolicyBounds(Table({WaitParams::Irq(), WaitParams::SpinThenIrq(1)}), b).ok());
  auto refused = CheckPolicyBounds(Table({WaitParams::Irq(), WaitParams::Spin(10)}), b);
  EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(refused.message().find("strategy spin is not allowed"), std::string::npos);
  EXPECT_FALSE(ParseStrategyList("irq,busywait").ok());
  EXPECT_FALSE(ParseStrategyList("").ok());
}

}  // namespace
}  // namespace spintune
