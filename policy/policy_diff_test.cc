#include "policy/policy_diff.h"

#include <algorithm>

#include "gtest/gtest.h"
#include "tests/testing/policy_fixtures.h"

namespace spintune {
namespace {

const KeyDiff* Find(const PolicyDiff& d, const std::string& cpu, const std::string& device,
                    uint32_t opcode, uint32_t size_class, bool fallback = false) {
  for (const auto& k : d.keys) {
    if (k.fallback != fallback || k.key.device != device) continue;
    if (fallback || (k.key.cpu_class == cpu && k.key.opcode == opcode &&
                     k.key.size_class == size_class)) {
      return &k;
    }
  }
  return nullptr;
}

TEST(PolicyDiff, SameTablesHaveNoChanges) {
  const PolicyTable t = testing::SampleTable();
  const PolicyDiff d = DiffPolicyTables(t, t);
  EXPECT_EQ(d.changed + d.only_a + d.only_b, 0);
  EXPECT_EQ(d.same, static_cast<int>(t.entries.size()));
  for (const auto& k : d.keys) EXPECT_EQ(k.cost_delta_ns, 0);
}

TEST(PolicyDiff, ChangedAddedAndRemovedKeysWithTheCostDelta) {
  const PolicyTable a = testing::SampleTable();
  PolicyTable b = a;
  for (auto& e : b.entries) {
    if (!e.fallback && e.key.opcode == 18 && e.key.cpu_class == "big") {
      e.wait = WaitParams::SpinThenIrq(40'000);
      e.expected_cost_ns -= 5'000;  // cheaper under B
    }
  }
  // CMD13 gone from B, CMD25 only in B.
  b.entries.erase(std::remove_if(b.entries.begin(), b.entries.end(),
                                 [](const PolicyEntry& e) {
                                   return !e.fallback && e.key.opcode == 13;
                                 }),
                  b.entries.end());
  PolicyEntry added = testing::Entry("big", "mmc0", 25, 13, WaitParams::Irq());
  b.entries.push_back(added);
  SortEntries(&b.entries);

  const PolicyDiff d = DiffPolicyTables(a, b);
  EXPECT_EQ(d.changed, 1);
  EXPECT_EQ(d.only_a, 1);
  EXPECT_EQ(d.only_b, 1);
  EXPECT_EQ(d.same, static_cast<int>(a.entries.size()) - 2);
  const KeyDiff* changed = Find(d, "big", "mmc0", 18, 13);
  ASSERT_NE(changed, nullptr);
  EXPECT_EQ(changed->kind, DiffKind::kChanged);
  EXPECT_DOUBLE_EQ(changed->cost_delta_ns, -5'000);
  ASSERT_TRUE(changed->a.has_value() && changed->b.has_value());
  EXPECT_EQ(changed->a->wait, WaitParams::Irq());
  EXPECT_EQ(changed->b->wait, WaitParams::SpinThenIrq(40'000));
  const KeyDiff* gone = Find(d, "big", "mmc0", 13, 0);
  ASSERT_NE(gone, nullptr);
  EXPECT_EQ(gone->kind, DiffKind::kOnlyA);
  EXPECT_FALSE(gone->b.has_value());
  const KeyDiff* only_b = Find(d, "big", "mmc0", 25, 13);
  ASSERT_NE(only_b, nullptr);
  EXPECT_EQ(only_b->kind, DiffKind::kOnlyB);
  EXPECT_STREQ(DiffKindName(DiffKind::kOnlyB), "only_b");
  // Fallbacks are matched by device.
  const KeyDiff* fallback = Find(d, "", "spi0", 0, 0, /*fallback=*/true);
  ASSERT_NE(fallback, nullptr);
  EXPECT_EQ(fallback->kind, DiffKind::kSame);
}

}  // namespace
}  // namespace spintune
