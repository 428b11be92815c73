#include "agent/sim_source.h"

#include <map>

#include "gtest/gtest.h"

namespace spintune {
namespace {

TEST(SimSource, EverySeedBoardIsInTheCatalog) {
  // The systems of the seed reports (issue 2, item 5).
  for (const char* name :
       {"litex-rocket-50mhz-slowcard", "litex-rocket-50mhz-fastcard",
        "litex-rocket-100mhz-slowcard", "litex-rocket-100mhz-fastcard", "litex-naxriscv-100mhz",
        "microwatt-100mhz", "imx28-mxs-mmc", "bcm2835-spi-20mhz", "ls1021a-dspi-12mhz"}) {
    const BoardModel* b = FindBoard(name);
    ASSERT_NE(b, nullptr) << name;
    EXPECT_TRUE(b->Costs().Validate().ok()) << name;
    EXPECT_FALSE(b->default_rules.empty()) << name;
    EXPECT_FALSE(b->sources.empty()) << name;
  }
  EXPECT_EQ(FindBoard("nope"), nullptr);
}

TEST(SimSource, PlatformCostsScaleWithTheClock) {
  // Microwatt: IRQ -> task >= 120 us at 100 MHz (seed 000).
  EXPECT_NEAR(FindBoard("microwatt-100mhz")->Costs().irq_wake_ns, 120'000, 1);
  // Same Rocket cycles at half the clock take twice as long.
  EXPECT_NEAR(FindBoard("litex-rocket-50mhz-fastcard")->Costs().irq_cpu_ns,
              2 * FindBoard("litex-rocket-100mhz-fastcard")->Costs().irq_cpu_ns, 1);
}

TEST(SimSource, IsDeterministicPerSeed) {
  const BoardModel& b = *FindBoard("litex-rocket-50mhz-slowcard");
  SimSource a(b, 42), c(b, 42), d(b, 43);
  v1::SampleBatch ba, bc, bd;
  ASSERT_EQ(*a.Fill(1000, &ba), 1000u);
  ASSERT_EQ(*c.Fill(1000, &bc), 1000u);
  ASSERT_EQ(*d.Fill(1000, &bd), 1000u);
  EXPECT_EQ(ba.SerializeAsString(), bc.SerializeAsString());
  EXPECT_NE(ba.SerializeAsString(), bd.SerializeAsString());
}

TEST(SimSource, CompletionTimesFollowTheCalibration) {
  // Rocket 50 MHz, fast card: CMD18 of 4 KiB = 60 us access + 4096 bytes at
  // 80 ns/byte (sd_clk 25 MHz, 4 bits) + 400 cycles = ~396 us median; CMD23
  // = 0.5 us + 400 cycles = 8.5 us. The stock driver waits on the IRQ for
  // data commands and polls the others.
  SimSource s(*FindBoard("litex-rocket-50mhz-fastcard"), 1);
  v1::SampleBatch batch;
  ASSERT_TRUE(s.Fill(20000, &batch).ok());
  std::map<uint32_t, std::vector<uint64_t>> by_opcode;
  const auto& c = batch.completions();
  size_t irq = 0;
  for (int i = 0; i < c.wait_ns_size(); ++i) {
    by_opcode[c.opcode(i)].push_back(c.wait_ns(i));
    if (c.path(i) == v1::WAIT_PATH_IRQ) {
      ++irq;
      EXPECT_GT(c.bytes(i), 0u);
    }
  }
  EXPECT_EQ(static_cast<int>(irq), batch.dispatches().handler_ns_size());
  auto median = [](std::vector<uint64_t> v) {
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return static_cast<double>(v[v.size() / 2]);
  };
  EXPECT_NEAR(median(by_opcode[18]), 396'000, 396'000 * 0.05);
  EXPECT_NEAR(median(by_opcode[23]), 8'500, 8'500 * 0.05);
  EXPECT_NEAR(static_cast<double>(by_opcode[23].size()) / 20000, 0.40, 0.02);
}

TEST(SimSource, MakeSampleSourceRejectsUnknownSpecs) {
  EXPECT_TRUE(MakeSampleSource("sim:microwatt-100mhz", 1).ok());
  EXPECT_EQ(MakeSampleSource("sim:nope", 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeSampleSource("ftrace:vda", 1).status().code(), absl::StatusCode::kInvalidArgument);
  // File sources need platform costs.
  EXPECT_EQ(MakeSampleSource("csv:x.csv", 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeSampleSource("replay:x.txt", 1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace spintune
