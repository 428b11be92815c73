#include "policy/cold_start.h"

#include <cmath>
#include <random>

#include "gtest/gtest.h"

namespace spintune {
namespace {

// A board whose CMD18 takes 100 us on the card plus 30,000 CPU cycles.
BoardEvidence Board(uint64_t khz, std::mt19937_64& rng) {
  BoardEvidence b;
  const double ns_per_cycle = 1e6 / static_cast<double>(khz);
  b.cpu_classes = {{"cpu", khz, {8'000 * ns_per_cycle, 12'000 * ns_per_cycle, 30 * ns_per_cycle,
                                 5'000 * ns_per_cycle, 2e6}}};
  b.devices = {{"mmc0", "litex-mmc", "card A", {}}};
  KeyEvidence k;
  k.key = {"cpu", "mmc0", 18, 13};
  std::lognormal_distribution<double> device(std::log(100e3), 0.2);
  for (int i = 0; i < 5000; ++i) {
    k.histogram.Record(static_cast<uint64_t>(device(rng) + 30'000 * ns_per_cycle));
  }
  b.keys.push_back(k);
  return b;
}

TEST(ColdStart, PredictsTheTableOfAHeldBackClock) {
  std::mt19937_64 rng(1);
  const std::vector<BoardEvidence> others = {Board(50'000, rng), Board(200'000, rng)};
  const BoardEvidence held_back = Board(100'000, rng);
  FitInputs target;
  target.board = "new";
  target.cpu_classes = held_back.cpu_classes;
  target.devices = held_back.devices;
  auto predicted = PredictPolicyTable(others, target, FitConfig());
  ASSERT_TRUE(predicted.ok()) << predicted.status();
  EXPECT_EQ(predicted->origin, "predicted");
  FitInputs real = target;
  real.keys = held_back.keys;
  auto fitted = BuildPolicyTable(real, FitConfig());
  ASSERT_TRUE(fitted.ok());
  // Same decision, and the predicted median within 5% of the real one
  // (400 us at 100 MHz: 100 us of card plus 300 us of CPU cycles).
  EXPECT_EQ(predicted->entries[0].wait.strategy, fitted->entries[0].wait.strategy);
  EXPECT_NEAR(predicted->entries[0].p50_ns, fitted->entries[0].p50_ns,
              0.05 * fitted->entries[0].p50_ns);
}

TEST(ColdStart, NeedsABoardWithTheSameDevice) {
  std::mt19937_64 rng(2);
  BoardEvidence other = Board(50'000, rng);
  other.devices[0].model = "card B";
  FitInputs target;
  target.cpu_classes = other.cpu_classes;
  target.devices = {{"mmc0", "litex-mmc", "card A", {}}};
  EXPECT_EQ(PredictPolicyTable({other}, target, FitConfig()).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace spintune
