#include "policy/fit_flags.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace spintune {
namespace {

absl::StatusOr<FitConfig> Parse(std::vector<std::string> args) {
  CLI::App app;
  FitFlags flags;
  AddFitFlags(&app, &flags);
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  app.parse(reversed);  // CLI11 takes a reversed vector
  return FitConfigFromFlags(flags);
}

TEST(FitFlags, DefaultsAreTheBalancedObjective) {
  auto c = Parse({});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->objective_name, "balanced");
  EXPECT_EQ(c->max_spin_ns, 1'000'000u);
  EXPECT_EQ(c->min_samples, 50u);
  EXPECT_DOUBLE_EQ(c->hysteresis, 0.02);
}

TEST(FitFlags, LatencyWeightOverridesTheObjective) {
  auto c = Parse({"--objective", "cpu", "--latency-weight", "0"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->objective_name, "custom");
  EXPECT_DOUBLE_EQ(c->objective.latency_weight, 0.0);
}

TEST(FitFlags, OutOfRangeValuesNameTheFlag) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      {{"--latency-weight", "-1"}, "--latency-weight"},
      {{"--latency-weight", "nan"}, "--latency-weight"},
      {{"--latency-weight", "inf"}, "--latency-weight"},
      {{"--latency-weight", "1e9"}, "--latency-weight"},
      {{"--objective", "fast"}, "--objective"},
      {{"--max-spin-ns", "0"}, "--max-spin-ns"},
      {{"--max-spin-ns", "10000001"}, "--max-spin-ns"},
      {{"--min-samples", "0"}, "--min-samples"},
      {{"--robustness", "1.5"}, "--robustness"},
      {{"--hysteresis", "0.9"}, "--hysteresis"},
  };
  for (const auto& [args, flag] : bad) {
    auto c = Parse(args);
    ASSERT_FALSE(c.ok()) << args[0] << " " << args[1];
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(c.status().message().find(flag), std::string::npos) << c.status();
  }
}

}  // namespace
}  // namespace spintune
