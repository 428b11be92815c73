#include "agent/knobs/knob_declaration.h"

#include "gtest/gtest.h"

namespace spintune {
namespace {

constexpr char kQueue[] = R"({
  "name": "vda-queue", "device": "vda", "driver": "virtio_blk",
  "knobs": [
    {"name": "nr_requests", "file": "/sys/block/vda/queue/nr_requests", "values": [32, 64, 256]},
    {"name": "max_sectors_kb", "file": "/sys/block/vda/queue/max_sectors_kb",
     "range": {"min": 64, "max": 1024, "factor": 2}, "unit": "KiB"},
    {"name": "read_ahead_kb", "file": "/sys/block/vda/queue/read_ahead_kb",
     "range": {"min": 0, "max": 256, "step": 128}},
    {"name": "scheduler", "file": "/sys/block/vda/queue/scheduler", "enum": ["none", "mq-deadline"]},
    {"name": "P0DMACR", "read": "busybox devmem 0x01c18170 32",
     "write": "busybox devmem 0x01c18170 32 {value}",
     "fields": [{"name": "TXTS", "shift": 0, "width": 4},
                {"name": "RXTS", "shift": 4, "width": 4, "values": [1, 2, 3]}]}
  ],
  "workload": {"ioload": {"file": "/var/tmp/k.bin", "file_mb": 16, "seconds": 0.25,
                          "sizes": [4096, 262144], "write_share": 0.5, "threads": 2}},
  "metric": "mib_per_s", "metric_unit": "MiB/s", "better": "higher",
  "constraints": [{"metric": "errors", "max": 0}],
  "max_trials": 30, "on_finish": "restore", "seed": 4
})";

TEST(KnobDeclaration, ParsesEveryKindOfKnob) {
  auto d = ParseKnobDeclaration(kQueue);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->name, "vda-queue");
  ASSERT_EQ(d->knobs.size(), 5u);
  EXPECT_EQ(d->knobs[0].values, (std::vector<int64_t>{32, 64, 256}));
  EXPECT_EQ(d->knobs[1].values, (std::vector<int64_t>{64, 128, 256, 512, 1024}));
  EXPECT_EQ(d->knobs[1].unit, "KiB");
  EXPECT_EQ(d->knobs[2].values, (std::vector<int64_t>{0, 128, 256}));
  EXPECT_TRUE(d->knobs[3].is_enum());
  EXPECT_EQ(d->knobs[4].access.kind, KnobAccess::Kind::kCommand);
  ASSERT_EQ(d->knobs[4].fields.size(), 2u);
  EXPECT_EQ(d->knobs[4].fields[0].values.size(), 16u);  // all 4-bit values
  EXPECT_EQ(d->knobs[4].fields[1].values, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(d->workload.kind, WorkloadSpec::Kind::kIoLoad);
  EXPECT_EQ(d->workload.ioload.file_bytes, 16u << 20);
  EXPECT_EQ(d->workload.ioload.threads, 2);
  EXPECT_EQ(d->workload.ioload.duration, absl::Milliseconds(250));
  EXPECT_FALSE(d->lower_is_better);
  ASSERT_EQ(d->constraints.size(), 1u);
  EXPECT_EQ(*d->constraints[0].max, 0);
  EXPECT_FALSE(d->constraints[0].min.has_value());
  EXPECT_EQ(d->max_trials, 30u);
  EXPECT_FALSE(d->apply_winner);
  EXPECT_EQ(d->seed, 4u);
}

TEST(KnobDeclaration, MistakesNameTheField) {
  struct Case {
    const char* json;
    const char* where;
  } cases[] = {
      {R"({"name": "x"})", "knobs.knobs"},
      {R"({"name": "x", "knobs": [{"name": "a", "file": "/f", "values": [1, 1]}],
           "workload": {"command": "true"}, "metric": "m"})",
       "knobs.knobs[0].values"},
      {R"({"name": "x", "knobs": [{"name": "a", "file": "/f"}],
           "workload": {"command": "true"}, "metric": "m"})",
       "knobs.knobs[0]"},
      {R"({"name": "x", "knobs": [{"name": "r", "read": "r", "write": "w",
           "fields": [{"name": "A", "shift": 0, "width": 4}, {"name": "B", "shift": 2, "width": 4}]}],
           "workload": {"command": "true"}, "metric": "m"})",
       "knobs.knobs[0].write"},
      {R"({"name": "x", "knobs": [{"name": "r", "read": "r", "write": "w {value}",
           "fields": [{"name": "A", "shift": 0, "width": 4}, {"name": "B", "shift": 2, "width": 4}]}],
           "workload": {"command": "true"}, "metric": "m"})",
       "knobs.knobs[0].fields[1]"},
      {R"({"name": "x", "knobs": [{"name": "a", "file": "/f", "values": [1]}],
           "workload": {"command": "true"}, "metric": "m", "better": "more"})",
       "knobs.better"},
      {R"({"name": "x", "knobs": [{"name": "a", "file": "/f", "values": [1]}],
           "workload": {"command": "true"}, "metric": "m", "colour": 1})",
       "knobs.colour"},
  };
  for (const auto& c : cases) {
    auto d = ParseKnobDeclaration(c.json);
    ASSERT_FALSE(d.ok()) << c.json;
    EXPECT_TRUE(absl::IsInvalidArgument(d.status()));
    EXPECT_EQ(d.status().message().rfind(c.where, 0), 0u) << d.status().message();
  }
}

TEST(KnobDeclaration, SimulatedBoardsDeclareTheDmaFields) {
  auto d = LoadKnobDeclaration("sim:ahci-sunxi-a20-txts4-rxts4");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->sim_board, "ahci-sunxi-a20-txts4-rxts4");
  ASSERT_EQ(d->knobs.size(), 1u);
  ASSERT_EQ(d->knobs[0].fields.size(), 2u);
  EXPECT_EQ(d->knobs[0].fields[1].shift, 4u);
  EXPECT_EQ(d->metric, "write_mbps");
  EXPECT_TRUE(d->apply_winner);
  EXPECT_FALSE(LoadKnobDeclaration("sim:nope").ok());
  EXPECT_TRUE(absl::IsNotFound(LoadKnobDeclaration("/nonexistent.json").status()));
}

}  // namespace
}  // namespace spintune
