// The simulated ahci_sunxi board against the numbers of field report 003.
#include "agent/knobs/ahci_sunxi_sim.h"

#include <cmath>

#include "gtest/gtest.h"
#include "models/knob_statistics.h"

namespace spintune {
namespace {

// The seed prints whole MB/s.
constexpr double kSeedRounding = 1.0;

TEST(AhciSunxiSim, MatchesTheSeedsThroughputs) {
  // "bs=12K ... 128, 129, 129 MB/s" with TXTS = RXTS = 3.
  EXPECT_NEAR(AhciSunxiWriteMbps(3, 3, 12 * 1024), 129, kSeedRounding);
  // "bs=8K ... 127, 126, 126"; "bs=16K ... 125, 127, 127".
  EXPECT_NEAR(AhciSunxiWriteMbps(3, 3, 8 * 1024), 126.3, kSeedRounding);
  EXPECT_NEAR(AhciSunxiWriteMbps(3, 3, 16 * 1024), 126.3, kSeedRounding);
  // "120MB/s ... tested on SSD using dd bs=4K".
  EXPECT_NEAR(AhciSunxiWriteMbps(3, 3, 4 * 1024), 120, kSeedRounding);
  // "from lame 36MB/s to 45MB/s previously", with the leftovers 5/6, 4/4, 0/0.
  for (const auto& b : AhciSunxiBoards()) {
    for (uint64_t bs : {4 * 1024, 12 * 1024}) {
      const double mbps = AhciSunxiWriteMbps(b.txts, b.rxts, bs);
      EXPECT_GE(mbps, 36 - kSeedRounding) << b.name;
      EXPECT_LE(mbps, 45 + kSeedRounding) << b.name;
    }
  }
  // "Read performance is about 200MB/s".
  EXPECT_NEAR(AhciSunxiReadMbps(3), 200, 5);
}

TEST(AhciSunxiSim, TheLeftoversAreTheSeeds) {
  ASSERT_EQ(AhciSunxiBoards().size(), 3u);
  EXPECT_EQ(AhciSunxiBoards()[0].txts, 5u);
  EXPECT_EQ(AhciSunxiBoards()[0].rxts, 6u);
  EXPECT_EQ(AhciSunxiBoards()[1].txts, 4u);
  EXPECT_EQ(AhciSunxiBoards()[2].rxts, 0u);
  // The register keeps the driver's TXABL/RXABL = 4/4.
  AhciSunxiSim sim(AhciSunxiBoards()[0], 1);
  EXPECT_EQ(sim.ReadP0dmacr(), 0x4465u);
  EXPECT_EQ(FindAhciSunxiBoard("nope"), nullptr);
}

TEST(AhciSunxiSim, TheBestIsTxts3AndItsPlateauIsNarrow) {
  double best = 0;
  for (uint32_t t = 0; t < 16; ++t) {
    for (uint32_t r = 0; r < 16; ++r) best = std::max(best, AhciSunxiWriteMbps(t, r, 12 * 1024));
  }
  EXPECT_DOUBLE_EQ(best, AhciSunxiWriteMbps(3, 3, 12 * 1024));
  int plateau = 0;
  for (uint32_t t = 0; t < 16; ++t) {
    for (uint32_t r = 0; r < 16; ++r) {
      if (AhciSunxiWriteMbps(t, r, 12 * 1024) >= 0.95 * best) {
        ++plateau;
        EXPECT_EQ(t, 3u);
      }
    }
  }
  // Blind search hits it with a chance of about 2%.
  EXPECT_EQ(plateau, 7);  // RXTS 0..6
}

TEST(AhciSunxiSim, NoiseIsLikeTheSeedsRepeats) {
  AhciSunxiSim sim(AhciSunxiBoards()[2], 5);
  sim.WriteP0dmacr(0x4433);
  RunningMoments logs;
  for (int i = 0; i < 4000; ++i) logs.Add(std::log(sim.Measure(12 * 1024).write_mbps));
  // sigma 0.7% plus the rare slow runs.
  EXPECT_GT(std::sqrt(logs.Variance()), 0.007);
  EXPECT_LT(std::sqrt(logs.Variance()), 0.025);
  EXPECT_NEAR(std::exp(logs.mean), 129 * 0.997, 1.5);
}

TEST(AhciSunxiSim, OutOfRangeFieldsMakeDmaErrors) {
  AhciSunxiSim sim(AhciSunxiBoards()[0], 1);
  sim.WriteP0dmacr(0x44c3);  // RXTS = 12
  EXPECT_GT(sim.Measure(12 * 1024).errors, 0u);
  sim.WriteP0dmacr(0x4433);
  EXPECT_EQ(sim.Measure(12 * 1024).errors, 0u);
}

}  // namespace
}  // namespace spintune
