#include "policy/cold_start_evidence.h"

#include <cmath>
#include <random>

#include "gtest/gtest.h"

namespace spintune {
namespace {

// A board whose CMD18 takes `card_us` on the card plus 30,000 CPU cycles,
// and whose CMD17 takes a quarter of that.
BoardEvidence Board(uint64_t khz, double card_us, std::mt19937_64& rng) {
  BoardEvidence b;
  const double ns_per_cycle = 1e6 / static_cast<double>(khz);
  b.cpu_classes = {{"cpu", khz, {8'000 * ns_per_cycle, 12'000 * ns_per_cycle, 30 * ns_per_cycle,
                                 5'000 * ns_per_cycle, 2e6}}};
  b.devices = {{"mmc0", "litex-mmc", "card A", {}}};
  std::lognormal_distribution<double> device(std::log(card_us * 1e3), 0.2);
  for (uint32_t opcode : {17u, 18u}) {
    KeyEvidence k;
    k.key = {"cpu", "mmc0", opcode, 13};
    const double scale = opcode == 17 ? 0.25 : 1.0;
    for (int i = 0; i < 2000; ++i) {
      k.histogram.Record(static_cast<uint64_t>(scale * (device(rng) + 30'000 * ns_per_cycle)));
    }
    b.keys.push_back(k);
  }
  return b;
}

FitInputs Target(uint64_t khz) {
  FitInputs t;
  t.board = "new";
  t.cpu_classes = {{"cpu", khz, {}}};  // no declared costs: predicted
  t.devices = {{"mmc0", "litex-mmc", "card A", {}}};
  return t;
}

// Same decisions, and the figures equal but for the rounding of sums taken
// in another order.
void ExpectSameTable(const PolicyTable& a, const PolicyTable& b) {
  ASSERT_EQ(a.entries.size(), b.entries.size());
  EXPECT_EQ(a.origin, b.origin);
  for (size_t i = 0; i < a.entries.size(); ++i) {
    const PolicyEntry& x = a.entries[i];
    const PolicyEntry& y = b.entries[i];
    EXPECT_EQ(x.key.opcode, y.key.opcode) << i;
    EXPECT_EQ(x.fallback, y.fallback) << i;
    EXPECT_EQ(x.wait.strategy, y.wait.strategy) << i;
    EXPECT_NEAR(static_cast<double>(x.wait.spin_ns), static_cast<double>(y.wait.spin_ns),
                1e-3 * static_cast<double>(y.wait.spin_ns) + 1)
        << i;
    EXPECT_NEAR(x.p50_ns, y.p50_ns, 1e-3 * y.p50_ns) << i;
    EXPECT_NEAR(x.expected_cost_ns, y.expected_cost_ns, 1e-6 * y.expected_cost_ns) << i;
  }
}

std::vector<BoardEvidence> Fleet(int boards, std::mt19937_64& rng) {
  std::uniform_int_distribution<uint64_t> khz(40'000, 1'200'000);
  std::uniform_real_distribution<double> card_us(60, 140);
  std::vector<BoardEvidence> out;
  for (int i = 0; i < boards; ++i) out.push_back(Board(khz(rng), card_us(rng), rng));
  return out;
}

// Leaving the requester out is the prediction from the others alone.
TEST(ColdStartEvidence, LeavingABoardOutPredictsFromTheOthers) {
  std::mt19937_64 rng(11);
  const std::vector<BoardEvidence> fleet = Fleet(40, rng);
  ColdStartEvidence evidence{FitConfig()};
  for (size_t i = 0; i < fleet.size(); ++i) evidence.Set(static_cast<int64_t>(i), fleet[i]);
  EXPECT_EQ(evidence.boards(), fleet.size());
  std::vector<BoardEvidence> others = fleet;
  others.erase(others.begin() + 7);
  auto without = PredictPolicyTable(others, Target(100'000), FitConfig());
  ASSERT_TRUE(without.ok()) << without.status();
  auto left_out = evidence.Predict(Target(100'000), 7);
  ASSERT_TRUE(left_out.ok()) << left_out.status();
  ExpectSameTable(*left_out, *without);
  // And it is a different table from the one with board 7 in (a board at
  // the target's clock whose card is much slower moves it).
  ColdStartEvidence with_slow{FitConfig()};
  for (size_t i = 0; i < others.size(); ++i) with_slow.Set(static_cast<int64_t>(i), others[i]);
  with_slow.Set(1000, Board(100'000, 2'000, rng));
  auto slow = with_slow.Predict(Target(100'000), -1);
  ASSERT_TRUE(slow.ok());
  EXPECT_GT(slow->entries[0].p50_ns, 1.05 * without->entries[0].p50_ns);
  auto slow_left_out = with_slow.Predict(Target(100'000), 1000);
  ASSERT_TRUE(slow_left_out.ok());
  ExpectSameTable(*slow_left_out, *without);
}

// Set() of a known id replaces its evidence; Erase() takes it out; a key
// below min_samples is not evidence.
TEST(ColdStartEvidence, ReplacesAndErasesBoards) {
  std::mt19937_64 rng(12);
  const std::vector<BoardEvidence> fleet = Fleet(5, rng);
  ColdStartEvidence evidence{FitConfig()};
  for (size_t i = 0; i < fleet.size(); ++i) evidence.Set(static_cast<int64_t>(i), fleet[i]);
  const BoardEvidence replacement = Board(300'000, 90, rng);
  evidence.Set(2, replacement);
  EXPECT_EQ(evidence.boards(), fleet.size());
  std::vector<BoardEvidence> expected = fleet;
  expected[2] = replacement;
  auto want = PredictPolicyTable(expected, Target(200'000), FitConfig());
  auto got = evidence.Predict(Target(200'000), -1);
  ASSERT_TRUE(want.ok() && got.ok());
  ExpectSameTable(*got, *want);

  for (int64_t id = 0; id < static_cast<int64_t>(fleet.size()); ++id) evidence.Erase(id);
  EXPECT_EQ(evidence.boards(), 0u);
  EXPECT_EQ(evidence.Predict(Target(200'000), -1).status().code(), absl::StatusCode::kNotFound);

  BoardEvidence few = fleet[0];
  LatencyHistogram small;
  small.Record(100'000, FitConfig().min_samples - 1);
  for (auto& k : few.keys) k.histogram = small;
  evidence.Set(9, few);
  EXPECT_EQ(evidence.Predict(Target(200'000), -1).status().code(), absl::StatusCode::kNotFound);
}

TEST(ColdStartEvidence, RejectsATargetWithoutAClock) {
  ColdStartEvidence evidence{FitConfig()};
  EXPECT_EQ(evidence.Predict(FitInputs(), -1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(evidence.Predict(Target(0), -1).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace spintune
