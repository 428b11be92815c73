#include "policy/default_rule.h"

#include "gtest/gtest.h"

namespace spintune {
namespace {

TEST(SizeClass, IsTheBitWidthAndItsLowerBound) {
  EXPECT_EQ(SizeClassOf(0), 0u);
  EXPECT_EQ(SizeClassOf(1), 1u);
  EXPECT_EQ(SizeClassOf(512), 10u);
  EXPECT_EQ(SizeClassOf(1023), 10u);
  EXPECT_EQ(SizeClassOf(1024), 11u);
  EXPECT_EQ(SizeClassOf(4096), 13u);
  EXPECT_EQ(SizeClassOf(~uint64_t{0}), 64u);
  EXPECT_EQ(SizeClassLowerBytes(0), 0u);
  EXPECT_EQ(SizeClassLowerBytes(1), 1u);
  EXPECT_EQ(SizeClassLowerBytes(13), 4096u);
  EXPECT_EQ(SizeClassLowerBytes(64), uint64_t{1} << 63);
  for (uint32_t c = 0; c <= 64; ++c) EXPECT_EQ(SizeClassOf(SizeClassLowerBytes(c)), c) << c;
}

// mxs-mmc's vendor rule: poll transfers up to 1 KiB, interrupt above; an
// opcode-specific rule first.
TEST(MatchDefault, TheFirstMatchingRuleDecidesAtTheClassLowerBound) {
  DefaultRule cmd23;
  cmd23.any_opcode = false;
  cmd23.opcode = 23;
  cmd23.wait = WaitParams::Spin(10'000);
  DefaultRule small;
  small.max_bytes = 1024;
  small.wait = WaitParams::Spin(1'000'000);
  DefaultRule rest;
  rest.wait = WaitParams::Irq();
  const std::vector<DefaultRule> rules = {cmd23, small, rest};
  EXPECT_EQ(MatchDefault(rules, 23, 13), WaitParams::Spin(10'000)) << "opcode rule first";
  EXPECT_EQ(MatchDefault(rules, 17, 10), WaitParams::Spin(1'000'000)) << "512 B";
  EXPECT_EQ(MatchDefault(rules, 17, 11), WaitParams::Spin(1'000'000)) << "class 11 is 1024 B";
  EXPECT_EQ(MatchDefault(rules, 17, 12), WaitParams::Irq()) << "class 12 is 2048 B";
  EXPECT_EQ(MatchDefault(rules, 17, 0), WaitParams::Spin(1'000'000)) << "no data";
  EXPECT_FALSE(MatchDefault({cmd23}, 17, 10).has_value()) << "no rule matches";
  EXPECT_FALSE(MatchDefault({}, 17, 10).has_value());
  DefaultRule large;
  large.min_bytes = 4096;
  large.wait = WaitParams::PollSleep(5'000);
  EXPECT_FALSE(MatchDefault({large}, 17, 12).has_value());
  EXPECT_EQ(MatchDefault({large}, 17, 13), WaitParams::PollSleep(5'000));
}

}  // namespace
}  // namespace spintune
