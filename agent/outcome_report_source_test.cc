#include "agent/outcome_report_source.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "policy/policy_blob.h"
#include "policy/policy_proto.h"

namespace spintune {
namespace {

// A live board of two CPU classes (a big.LITTLE SoC) and one device that
// measures nothing: only the reports are sent.
class TwoClassBoard : public SampleSource {
 public:
  void Describe(v1::Hello* hello) const override {
    hello->mutable_target()->add_cpu_classes()->set_name("big");
    hello->mutable_target()->add_cpu_classes()->set_name("little");
    auto* mmc = hello->add_devices();
    mmc->set_name("mmc0");
    mmc->set_driver("litex-mmc");
  }
  absl::StatusOr<size_t> Fill(size_t, v1::SampleBatch*) override { return 0; }
  bool exhausted() const override { return false; }
  bool live() const override { return true; }
};

// The document spintune.ko prints (driver/kernel/spintune.c,
// spintune_outcomes_show()): it knows classes only by the table's index.
std::string ModuleOutcomes(const std::string& first_class, const std::string& second_class) {
  auto key = [](const std::string& cls, int opcode) {
    return "  {\"cpu_class\": \"" + cls + "\", \"opcode\": " + std::to_string(opcode) +
           ", \"bytes\": 512, \"size_class\": 10, \"requests\": 2,\n"
           "   \"cpu_ns_sum\": 20, \"latency_ns_sum\": 30, \"cpu_ns_sq_sum\": 200,\n"
           "   \"latency_ns_sq_sum\": 450, \"cpu_latency_ns_sum\": 300}";
  };
  return "{\"format\": \"spintune-outcomes\", \"format_version\": 1, \"device\": \"mmc0\",\n"
         " \"mode\": \"table\", \"policy_version\": 4, \"keys\": [\n" +
         key(first_class, 17) + ",\n" + key(second_class, 24) + "]}\n";
}

// What `spintune-agent --outcomes FILE` sends first for the document `text`
// on the two-class board: one batch of KeyOutcome.
absl::StatusOr<v1::SampleBatch> SentOutcomes(const std::string& text) {
  char path[] = "/tmp/outcomes-XXXXXX";
  const int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  close(fd);
  std::ofstream(path) << text;
  auto report = ReadOutcomeReport(path);
  unlink(path);
  if (!report.ok()) return report.status();
  auto source = OutcomeReportSource::Wrap(std::make_unique<TwoClassBoard>(),
                                          /*inner_ends=*/false, {*report});
  if (!source.ok()) return source.status();
  v1::SampleBatch batch;
  if (auto n = (*source)->Fill(100, &batch); !n.ok()) return n.status();
  return batch;
}

TEST(OutcomeReportSourceTest, TheModulesClassIndicesNameTheSourcesClasses) {
  auto sent = SentOutcomes(ModuleOutcomes("default", "class1"));
  ASSERT_TRUE(sent.ok()) << sent.status();
  const v1::SampleBatch& batch = *sent;
  ASSERT_EQ(batch.outcomes_size(), 2);
  // Index 0 of the table is "big", index 1 "little": both keys kept.
  EXPECT_EQ(batch.outcomes(0).cpu_class_index(), 0u);
  EXPECT_EQ(batch.outcomes(0).opcode(), 17u);
  EXPECT_EQ(batch.outcomes(1).cpu_class_index(), 1u);
  EXPECT_EQ(batch.outcomes(1).opcode(), 24u);
  EXPECT_EQ(batch.outcomes(1).policy_version(), 4u);
  EXPECT_EQ(batch.outcomes(1).requests(), 2u);
}

// The whole way round: a table for the "little" class, as the agent writes
// it to the module, numbers that class as the module then names it in its
// outcomes, and that name comes back as "little".
TEST(OutcomeReportSourceTest, TheIndexInTheBlobTheAgentWroteNamesTheClassBack) {
  v1::Hello hello;
  TwoClassBoard().Describe(&hello);
  v1::PolicyTable wire;
  wire.set_version(4);
  auto* e = wire.add_entries();
  e->set_cpu_class("little");
  e->set_device("mmc0");
  e->set_opcode(24);
  e->set_size_class(10);
  e->set_strategy(v1::STRATEGY_SPIN_THEN_IRQ);
  e->set_spin_ns(20000);
  auto* fallback = wire.add_entries();
  fallback->set_cpu_class("*");
  fallback->set_device("mmc0");
  fallback->set_fallback(true);
  fallback->set_strategy(v1::STRATEGY_IRQ);
  auto table = PolicyTableFromProto(wire, hello);  // as Agent::ApplyTable()
  ASSERT_TRUE(table.ok()) << table.status();
  auto blob = EncodePolicyBlob(*table, "mmc0");
  ASSERT_TRUE(blob.ok()) << blob.status();
  auto decoded = DecodePolicyBlob(*blob);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  int index = -1;
  for (uint32_t i = 0; i < (*decoded)->table.count; ++i) {
    if ((*decoded)->table.entries[i].opcode == 24) index = (*decoded)->table.entries[i].cpu_class;
  }
  ASSERT_GT(index, 0) << "the module would name it \"default\"";

  auto sent = SentOutcomes(ModuleOutcomes("default", "class" + std::to_string(index)));
  ASSERT_TRUE(sent.ok()) << sent.status();
  ASSERT_EQ(sent->outcomes_size(), 2);
  EXPECT_EQ(hello.target().cpu_classes(static_cast<int>(sent->outcomes(1).cpu_class_index())).name(),
            "little");
}

TEST(OutcomeReportSourceTest, ClassNamesTheSourceDescribesAreTakenAsThey) {
  auto sent = SentOutcomes(ModuleOutcomes("little", "big"));
  ASSERT_TRUE(sent.ok()) << sent.status();
  ASSERT_EQ(sent->outcomes_size(), 2);
  EXPECT_EQ(sent->outcomes(0).cpu_class_index(), 1u);
  EXPECT_EQ(sent->outcomes(1).cpu_class_index(), 0u);
}

TEST(OutcomeReportSourceTest, AClassBeyondTheSourcesOrNotAnIndexIsRefused) {
  for (const char* name : {"class2", "class", "class01x", "class+1", "class 1", "medium"}) {
    auto sent = SentOutcomes(ModuleOutcomes("default", name));
    ASSERT_FALSE(sent.ok()) << name;
    EXPECT_EQ(sent.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(sent.status().message().find(name), std::string::npos) << sent.status();
  }
}

}  // namespace
}  // namespace spintune
