#include "policy/outcome_report.h"

#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"

namespace spintune {
namespace {

using ::testing::HasSubstr;

std::string Write(const testing::TempDir& dir, const std::string& text) {
  const std::string path = dir.File("report.json");
  std::ofstream(path) << text;
  return path;
}

std::string Report(const std::string& keys, const std::string& head = "") {
  return R"({"format": "spintune-outcomes", "format_version": 1, "device": "uring0",)" + head +
         R"( "mode": "table", "policy_version": 3, "keys": [)" + keys + "]}";
}

const char kKey[] =
    R"({"opcode": 0, "bytes": 4096, "size_class": 13, "requests": 2, "cpu_ns_sum": 30,
        "latency_ns_sum": 100, "cpu_ns_sq_sum": 500, "latency_ns_sq_sum": 5200,
        "cpu_latency_ns_sum": 1520})";

TEST(OutcomeReport, ReadsEveryField) {
  testing::TempDir dir;
  auto r = ReadOutcomeReport(Write(dir, Report(kKey)));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->device, "uring0");
  EXPECT_EQ(r->mode, "table");
  EXPECT_EQ(r->policy_version, 3u);
  ASSERT_EQ(r->keys.size(), 1u);
  const OutcomeReportKey& k = r->keys[0];
  EXPECT_EQ(k.cpu_class, "default");  // not named: the default class
  EXPECT_EQ(k.opcode, 0u);
  EXPECT_EQ(k.size_class, 13u);
  EXPECT_EQ(k.bytes, 4096u);
  EXPECT_EQ(k.moments.requests, 2u);
  EXPECT_DOUBLE_EQ(k.moments.MeanCpuNs(), 15);
  EXPECT_DOUBLE_EQ(k.moments.MeanLatencyNs(), 50);
  EXPECT_DOUBLE_EQ(k.moments.cpu_latency_ns_sum, 1520);
}

// A/B: the same key once per arm; "arm" absent is the table arm.
TEST(OutcomeReport, ReadsTheArmOfEachRow) {
  testing::TempDir dir;
  std::string incumbent = kKey;
  incumbent.insert(1, R"("arm": "incumbent", )");
  auto r = ReadOutcomeReport(Write(dir, Report(std::string(kKey) + ", " + incumbent)));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->keys.size(), 2u);
  EXPECT_EQ(r->keys[0].arm, OutcomeArm::kTable);
  EXPECT_EQ(r->keys[1].arm, OutcomeArm::kIncumbent);
  auto twice = ReadOutcomeReport(Write(dir, Report(incumbent + ", " + incumbent)));
  ASSERT_FALSE(twice.ok());
  EXPECT_THAT(std::string(twice.status().message()), HasSubstr("arm twice"));
  std::string odd = kKey;
  odd.insert(1, R"("arm": "control", )");
  auto bad = ReadOutcomeReport(Write(dir, Report(odd)));
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("keys[0].arm"));
}

TEST(OutcomeReport, RefusesBadFilesNamingThePathAndField) {
  testing::TempDir dir;
  struct Case {
    std::string text, message;
  } cases[] = {
      {"[1, 2]", "not a JSON object"},
      {R"({"format": "spintune-policy", "format_version": 1})", "not an outcome report"},
      {R"({"format": "spintune-outcomes", "format_version": 2, "device": "x", "keys": []})",
       "not an outcome report"},
      {R"({"format": "spintune-outcomes", "format_version": 1, "keys": []})", ".device: missing"},
      {R"({"format": "spintune-outcomes", "format_version": 1, "device": "x", "keys": 3})",
       ".keys: must be an array"},
      {Report(R"({"opcode": 0, "bytes": 1, "size_class": 65, "requests": 1})"),
       "keys[0].size_class: must be <= 64"},
      {Report(R"({"opcode": 0, "bytes": 1, "size_class": 1, "requests": 0, "cpu_ns_sum": 1,
                  "latency_ns_sum": 1, "cpu_ns_sq_sum": 1, "latency_ns_sq_sum": 1,
                  "cpu_latency_ns_sum": 1})"),
       "keys[0].requests: must be >= 1"},
      {Report(R"({"opcode": 0, "bytes": 1, "size_class": 1, "requests": 1, "cpu_ns_sum": -1})"),
       "keys[0].cpu_ns_sum: must be finite and >= 0"},
      {Report(R"({"opcode": 0, "bytes": 1, "size_class": 1, "requests": 1, "cpu_ns_sum": 1,
                  "latency_ns_sum": 1, "cpu_ns_sq_sum": 1, "latency_ns_sq_sum": 1})"),
       "keys[0].cpu_latency_ns_sum: missing"},
      {Report(std::string(kKey) + "," + kKey), "keys[1]: the same cpu_class"},
  };
  for (const auto& c : cases) {
    const std::string path = Write(dir, c.text);
    auto r = ReadOutcomeReport(path);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << r.status();
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(c.message)) << c.text;
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(path)) << c.text;
  }
}

TEST(OutcomeReport, AMissingFileIsNotFound) {
  auto r = ReadOutcomeReport("/nonexistent/report.json");
  EXPECT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("/nonexistent/report.json"));
}

}  // namespace
// A report names a class as the blob's list does, or by the kernel's
// "default" / "classN" for its index, which must be within the list.
TEST(OutcomeReport, CpuClassesByNameOrByTheKernelsIndex) {
  const std::vector<std::string> names = {"little", "big", "class0"};
  EXPECT_EQ(OutcomeCpuClassIndex("little", names), 0);
  EXPECT_EQ(OutcomeCpuClassIndex("big", names), 1);
  EXPECT_EQ(OutcomeCpuClassIndex("class0", names), 2);  // the list's own name wins
  EXPECT_EQ(OutcomeCpuClassIndex("default", names), 0);
  EXPECT_EQ(OutcomeCpuClassIndex("class1", names), 1);
  EXPECT_EQ(OutcomeCpuClassIndex("class3", names), -1);  // beyond the list
  EXPECT_EQ(OutcomeCpuClassIndex("class", names), -1);
  EXPECT_EQ(OutcomeCpuClassIndex("class1000", names), -1);
  EXPECT_EQ(OutcomeCpuClassIndex("class-1", names), -1);
  EXPECT_EQ(OutcomeCpuClassIndex("medium", names), -1);
  EXPECT_EQ(OutcomeCpuClassIndex("default", {}), -1);
}

}  // namespace spintune
