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

TEST(PolicyJson, TrialsRoundTripAndBadOnesNameTheField) {
  PolicyTable t = testing::SampleTable();
  t.entries[0].trial = Trial{WaitParams::SpinThenIrq(4'000), 96};
  const nlohmann::json j = PolicyTableToJson(t);
  EXPECT_EQ(j["entries"][0]["trial"]["share"], 96);
  EXPECT_EQ(j["entries"][1].count("trial"), 0u) << "absent without one";
  auto back = PolicyTableFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_TRUE(back->entries[0].trial.has_value());
  EXPECT_EQ(*back->entries[0].trial, *t.entries[0].trial);
  EXPECT_TRUE(SameDecisions(t, *back));
  for (int share : {0, 256}) {
    nlohmann::json bad = j;
    bad["entries"][0]["trial"]["share"] = share;
    auto refused = PolicyTableFromJson(bad);
    ASSERT_FALSE(refused.ok()) << share;
    EXPECT_NE(refused.status().message().find("entries[0].trial"), std::string::npos)
        << refused.status();
  }
  nlohmann::json bad = j;
  bad["entries"][0]["trial"]["strategy"] = "nap";
  EXPECT_FALSE(PolicyTableFromJson(bad).ok());
  PolicyTable without = t;
  without.entries[0].trial.reset();
  EXPECT_FALSE(SameDecisions(t, without)) << "a trial is a decision the driver sees";
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

TEST(PolicyJson, ContextListsAndWriteOpcodesRoundTrip) {
  PolicyTable t = testing::ContextTable();
  t.devices[1].write_opcodes = {7};
  const nlohmann::json j = PolicyTableToJson(t);
  // Every entry has a context list; a leaf's says which commands it takes.
  for (const auto& e : j["entries"]) ASSERT_TRUE(e["context"].is_array());
  const nlohmann::json* leaf = nullptr;
  for (const auto& e : j["entries"]) {
    if (e["opcode"] == 25 && e["context"].size() == 2) leaf = &e;
  }
  ASSERT_NE(leaf, nullptr);
  EXPECT_EQ((*leaf)["context"][0],
            (nlohmann::json{{"feature", "prev_wait_ns"}, {"min", 1000000}, {"max", nullptr}}));
  EXPECT_EQ((*leaf)["context"][1]["feature"], "inflight");
  EXPECT_EQ(j["devices"][0]["write_opcodes"], (nlohmann::json{1, 24, 25}));
  auto back = PolicyTableFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(SameDecisions(t, *back));
  EXPECT_EQ(ContextLeafCount(*back), 3u);
  EXPECT_EQ(back->devices[1].write_opcodes, std::vector<uint32_t>{7});
  // A document without the fields (before context) reads as no context and
  // the default write opcodes.
  nlohmann::json old = PolicyTableToJson(testing::SampleTable());
  for (auto& e : old["entries"]) e.erase("context");
  for (auto& d : old["devices"]) d.erase("write_opcodes");
  auto plain = PolicyTableFromJson(old);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(ContextLeafCount(*plain), 0u);
  EXPECT_EQ(plain->devices[0].write_opcodes, DefaultWriteOpcodes());
}

TEST(PolicyJson, RejectsContextsNamingTheField) {
  const nlohmann::json good = PolicyTableToJson(testing::ContextTable());
  size_t leaf = 0;  // the first leaf of opcode 25
  while (!(good["entries"][leaf]["opcode"] == 25)) ++leaf;
  const std::string at = "entries[" + std::to_string(leaf) + "]";
  struct Case {
    std::function<void(nlohmann::json&)> mutate;
    std::string expected;
  } cases[] = {
      {[&](auto& j) { j["entries"][leaf]["context"] = 5; }, at + ".context: must be an array"},
      {[&](auto& j) { j["entries"][leaf]["context"][0]["feature"] = "queue"; },
       at + ".context[0].feature"},
      {[&](auto& j) { j["entries"][leaf]["context"][0]["max"] = -1; }, at + ".context[0].max"},
      {[&](auto& j) { j["entries"][leaf]["context"][0]["max"] = nullptr; },
       at + ".context[0]: a condition needs min or max"},
      {[&](auto& j) {
         j["entries"][leaf]["context"][0]["min"] = 5;
         j["entries"][leaf]["context"][0]["max"] = 5;
       },
       at + ".context[0]: min must be below max"},
      {[&](auto& j) {
         j["entries"][leaf]["context"].push_back(j["entries"][leaf]["context"][0]);
       },
       "feature listed twice"},
      // Leaves that overlap are not a tree's.
      {[&](auto& j) { j["entries"][leaf]["context"][0]["max"] = 2000000; }, "not a tree's leaves"},
      // One entry with a context.
      {[&](auto& j) {
         j["entries"][0]["context"] = nlohmann::json::array(
             {{{"feature", "bytes"}, {"min", nullptr}, {"max", 10}}});
       },
       "a single entry with a context"},
      {[&](auto& j) { j["devices"][0]["write_opcodes"] = {1, 2, 3, 4, 5}; },
       "devices[0].write_opcodes: more than 4"},
      {[&](auto& j) { j["devices"][0]["write_opcodes"] = {-1}; }, "devices[0].write_opcodes[0]"},
  };
  for (const auto& c : cases) {
    nlohmann::json j = good;
    c.mutate(j);
    auto t = PolicyTableFromJson(j);
    ASSERT_FALSE(t.ok()) << c.expected;
    EXPECT_NE(t.status().message().find(c.expected), std::string::npos)
        << t.status().message() << " (expected: " << c.expected << ")";
  }
}

}  // namespace
}  // namespace spintune
