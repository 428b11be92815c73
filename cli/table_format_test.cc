#include "cli/table_format.h"

#include "gtest/gtest.h"
#include "tests/testing/policy_fixtures.h"

namespace spintune {
namespace {

TEST(TableFormat, DurationsSizesAndWaitsForPeople) {
  EXPECT_EQ(FormatDurationNs(850), "850ns");
  EXPECT_EQ(FormatDurationNs(12'500), "12.5us");
  EXPECT_EQ(FormatDurationNs(3'200'000), "3.20ms");
  EXPECT_EQ(FormatDurationNs(1.5e9), "1.50s");
  EXPECT_EQ(FormatSigned(-12'500), "-12.5us");
  EXPECT_EQ(FormatSigned(12'500), "12.5us");
  EXPECT_EQ(FormatSizeClass(0), "0");
  EXPECT_EQ(FormatSizeClass(10), "512B");
  EXPECT_EQ(FormatSizeClass(13), "4KiB");
  EXPECT_EQ(DescribeWait(WaitParams::Irq()), "irq");
  EXPECT_EQ(DescribeWait(WaitParams::SpinThenIrq(12'500)), "spin_then_irq T=12.5us");
  EXPECT_EQ(DescribeWait(WaitParams::Spin(1'000'000)), "spin timeout=1.00ms");
  EXPECT_EQ(DescribeWait(WaitParams::PollSleep(5'000)), "poll_sleep I=5.0us");
  EXPECT_EQ(DescribeWait(WaitParams::SleepThenSpin(150'000, 1'000'000)),
            "sleep_then_spin S=150.0us");
}

TEST(TableFormat, ColumnsAreAlignedUnderTheHeader) {
  const std::string out = RenderColumns({{"KEY", "WAIT"}, {"mmc0/18", "irq"}, {"spi0", "x"}});
  EXPECT_EQ(out, "KEY      WAIT\nmmc0/18  irq\nspi0     x\n");
}

TEST(TableFormat, APolicyTableHasALinePerEntryWithItsWait) {
  const PolicyTable t = testing::SampleTable();
  const std::string out = RenderPolicyTable(t);
  size_t lines = 0;
  for (char c : out) lines += c == '\n';
  EXPECT_GE(lines, t.entries.size() + 1) << out;
  EXPECT_NE(out.find("spin_then_irq T=12.0us"), std::string::npos) << out;
  EXPECT_NE(out.find("poll_sleep I=5.0us"), std::string::npos) << out;
  EXPECT_NE(out.find("litex-rocket-50mhz"), std::string::npos) << out;
}

}  // namespace
}  // namespace spintune
