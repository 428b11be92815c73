#include "policy/policy_json.h"

#include <functional>

#include "gtest/gtest.h"
#include "tests/testing/policy_fixtures.h"

namespace spintune {
namespace {

TEST(PolicyJson, RoundTrips) {
  PolicyTable t = testing::SampleTable();
  t.cpu_classes[0].costs = {1000, 2000, 10, 300, 4000};
  t.entries[0].default_wait = WaitParams::PollSleep(5000);
  t.entries[0].default_cost_ns = 123;
  auto back = PolicyTableFromJson(PolicyTableToJson(t));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(SameDecisions(t, *back));
  EXPECT_EQ(back->version, 7u);
  EXPECT_EQ(back->board, t.board);
  EXPECT_EQ(back->cpu_classes[0].costs.timer_wake_ns, 4000);
  ASSERT_TRUE(back->entries[0].default_wait.has_value());
  EXPECT_EQ(*back->entries[0].default_wait, WaitParams::PollSleep(5000));
  // Serializing again gives the same document.
  EXPECT_EQ(PolicyTableToJson(*back).dump(), PolicyTableToJson(t).dump());
}

TEST(PolicyJson, RejectsHostileDocumentsNamingTheField) {
  const nlohmann::json good = PolicyTableToJson(testing::SampleTable());
  struct Case {
    std::function<void(nlohmann::json&)> mutate;
    std::string expected_field;
  } cases[] = {
      {[](auto& j) { j["entries"][0]["strategy"] = "yolo"; }, "entries[0].strategy"},
      {[](auto& j) { j["entries"][1]["spin_ns"] = -5; }, "entries[1].spin_ns"},
      {[](auto& j) { j["entries"][1]["spin_ns"] = 1e30; }, "entries[1].spin_ns"},
      {[](auto& j) { j["entries"][2]["cpu_class"] = "nosuch"; }, "entries[2].cpu_class"},
      {[](auto& j) { j["cpu_classes"] = nlohmann::json::array(); }, "cpu_classes"},
      {[](auto& j) { j["cpu_classes"][0]["irq_cpu_ns"] = "fast"; }, "cpu_classes[0].irq_cpu_ns"},
      {[](auto& j) { j["format_version"] = 99; }, "format_version"},
      {[](auto& j) { j["entries"].push_back(j["entries"][0]); }, "duplicate key"},
  };
  for (const auto& c : cases) {
    nlohmann::json j = good;
    c.mutate(j);
    auto t = PolicyTableFromJson(j);
    ASSERT_FALSE(t.ok()) << c.expected_field;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(t.status().message().find(c.expected_field), std::string::npos)
        << t.status().message();
  }
  EXPECT_FALSE(ParsePolicyJson("{not json").ok());
  EXPECT_FALSE(ParsePolicyJson("[]").ok());
}

}  // namespace
}  // namespace spintune
