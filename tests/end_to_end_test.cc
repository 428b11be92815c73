// The whole loop over loopback: a real tuner (gRPC + SQLite file), a real
// agent on a simulated board, the file sink, and the offline `spintune tune`
// on the very samples the agent sent.
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/agent.h"
#include "agent/capture/histogram_batch.h"
#include "agent/policy_sink.h"
#include "agent/sample_source.h"
#include "cli/commands.h"
#include "common/file_util.h"
#include "gtest/gtest.h"
#include "policy/policy_blob.h"
#include "policy/policy_json.h"
#include "policy/policy_proto.h"
#include "spintune/v1/spintune.grpc.pb.h"
#include "storage/store.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/wait_for.h"
#include "tuner/tuner_server.h"

namespace spintune {
namespace {

struct Loop {
  testing::TempDir dir;
  std::unique_ptr<TunerServer> tuner;
};

std::unique_ptr<TunerServer> StartTuner(const std::string& db, double hysteresis = 0.02) {
  TunerOptions options;
  options.db_path = db;
  options.fit.hysteresis = hysteresis;
  options.refit_samples = 5000;
  auto server = TunerServer::Start("127.0.0.1:0", options);
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? std::move(*server) : nullptr;
}

AgentStats RunAgent(const std::string& address, const std::string& board,
                    const std::string& agent_id, const std::string& sink,
                    const std::string& record, uint64_t samples,
                    const std::string& state_dir = "", PolicyBounds bounds = {}) {
  auto source = MakeSampleSource("sim:" + board, 7);
  EXPECT_TRUE(source.ok());
  auto policy_sink = MakePolicySink(sink, {"mmc0"});
  EXPECT_TRUE(policy_sink.ok());
  AgentOptions options;
  options.tuner_address = address;
  options.agent_id = agent_id;
  options.max_samples = samples;
  options.batch_size = 500;
  options.record_csv = record;
  options.give_up_after = absl::Seconds(20);
  options.state_dir = state_dir;
  options.bounds = bounds;
  options.drain_timeout = testing::kEventDeadline;  // waits for the final table
  Agent agent(options, std::move(*source), std::move(*policy_sink));
  absl::Status s = agent.Run();
  EXPECT_TRUE(s.ok()) << s;
  return agent.stats();
}

TEST(EndToEnd, AppliedTableEqualsOfflineTuneOnTheSameSamples) {
  testing::TempDir dir;
  // Without hysteresis the tuner's table depends on the samples alone, like
  // the offline fit (with it, `tune --incumbent` would need the table that
  // was in force at each refit).
  auto tuner = StartTuner(dir.File("tuner.db"), /*hysteresis=*/0);
  ASSERT_NE(tuner, nullptr);
  const std::string blob_path = dir.File("mmc0.bin");
  const std::string csv = dir.File("sent.csv");
  const AgentStats stats = RunAgent(tuner->address(), "litex-rocket-100mhz-slowcard", "board-1",
                                    "file:" + blob_path, csv, 30000);
  EXPECT_EQ(stats.samples_generated, 30000u);
  EXPECT_EQ(stats.tuner_total_samples, 30000u);
  EXPECT_GT(stats.applied_version, 0u);

  // The stored table, through the admin RPC.
  Repository repo;
  repo.tuner = tuner->address();
  std::ostringstream policy_json;
  ASSERT_TRUE(RunPolicy(repo, "board-1", 0, "json", false, policy_json).ok());
  auto stored = ParsePolicyJson(policy_json.str());
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(stored->version, stats.applied_version) << "agent applied the latest version";
  EXPECT_EQ(stored->TotalSamples(), 30000u);

  // Offline: the same samples, the platform costs the tuner fitted with.
  nlohmann::json platform = CostsToJson(stored->cpu_classes[0].costs);
  ASSERT_TRUE(WriteFileAtomically(dir.File("platform.json"), platform.dump()).ok());
  TuneFlags flags;
  flags.samples_csv = csv;
  flags.platform_json = dir.File("platform.json");
  flags.fit.hysteresis = 0;
  flags.context = "off";  // the tuner fits no context leaves
  std::ostringstream tuned_json;
  std::ostringstream notes;
  absl::Status s = RunTune(flags, tuned_json, notes);
  ASSERT_TRUE(s.ok()) << s;
  auto tuned = ParsePolicyJson(tuned_json.str());
  ASSERT_TRUE(tuned.ok()) << tuned.status();
  // The CSV names the CPU class; copy the tuner's names for the blob.
  tuned->cpu_classes[0].name = stored->cpu_classes[0].name;

  // What the driver sees: the blob the agent wrote, entry by entry.
  auto applied = ReadFileToString(blob_path);
  ASSERT_TRUE(applied.ok());
  auto applied_blob = DecodePolicyBlob(*applied);
  ASSERT_TRUE(applied_blob.ok()) << applied_blob.status();
  auto offline = EncodePolicyBlob(*tuned, "mmc0");
  ASSERT_TRUE(offline.ok()) << offline.status();
  auto offline_blob = DecodePolicyBlob(*offline);
  ASSERT_TRUE(offline_blob.ok());
  ASSERT_EQ((*applied_blob)->table.count, (*offline_blob)->table.count);
  for (uint32_t i = 0; i < (*applied_blob)->table.count; ++i) {
    const spintune_entry& a = (*applied_blob)->table.entries[i];
    const spintune_entry& b = (*offline_blob)->table.entries[i];
    EXPECT_EQ(a.opcode, b.opcode) << i;
    EXPECT_EQ(a.size_class, b.size_class) << i;
    EXPECT_EQ(a.strategy, b.strategy) << "opcode " << a.opcode;
    EXPECT_EQ(a.spin_ns, b.spin_ns) << "opcode " << a.opcode;
    EXPECT_EQ(a.sleep_ns, b.sleep_ns) << "opcode " << a.opcode;
    EXPECT_EQ(a.poll_interval_ns, b.poll_interval_ns) << "opcode " << a.opcode;
  }
  // And the evidence agrees: same samples per key.
  ASSERT_EQ(tuned->entries.size(), stored->entries.size());
  for (size_t i = 0; i < tuned->entries.size(); ++i) {
    EXPECT_EQ(tuned->entries[i].samples, stored->entries[i].samples) << i;
  }
  tuner->Shutdown(absl::Seconds(2));
}

// The board's own bounds win over the tuner: a table beyond them is refused,
// the tuner records why, and the last good table stays in force.
TEST(EndToEnd, LocalBoundsRefuseATableAndTheLastGoodStays) {
  testing::TempDir dir;
  const std::string blob = dir.File("mmc0.bin");
  const std::string state = dir.File("state");
  // The last good table of this board: the IRQ path everywhere.
  PolicyTable irq_table;
  irq_table.version = 7;
  irq_table.board = "litex-rocket-100mhz-slowcard";
  PolicyEntry fallback;
  fallback.key = {kAnyCpuClass, "mmc0", 0, 0};
  fallback.fallback = true;
  fallback.wait = WaitParams::Irq();
  irq_table.entries.push_back(fallback);
  v1::PolicyTable wire;
  PolicyTableToProto(irq_table, &wire);
  std::filesystem::create_directories(state);
  ASSERT_TRUE(WriteFileAtomically(state + "/board-b.last-good.pb", wire.SerializeAsString()).ok());

  // The tuner fits a table that spins; this board allows only the IRQ path.
  auto tuner = StartTuner(dir.File("tuner.db"));
  ASSERT_NE(tuner, nullptr);
  PolicyBounds irq_only;
  irq_only.allowed = {Strategy::kIrq};
  const AgentStats stats = RunAgent(tuner->address(), "litex-rocket-100mhz-slowcard", "board-b",
                                    "file:" + blob, "", 20000, state, irq_only);
  EXPECT_EQ(stats.reapplied_version, 7u) << "the last good table was applied at start";
  EXPECT_EQ(stats.applied_version, 7u) << "nothing else was applied";
  auto applied = ReadFileToString(blob);
  ASSERT_TRUE(applied.ok());
  auto parsed = DecodePolicyBlob(*applied);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ((*parsed)->table.version, 7u) << "the blob in force is still the last good one";
  auto store = Store::Open(dir.File("tuner.db"));
  ASSERT_TRUE(store.ok());
  auto target = (*store)->FindTarget("board-b");
  ASSERT_TRUE(target.ok() && target->has_value());
  EXPECT_GT((*target)->current_version, 0u);
  EXPECT_NE((*target)->applied_error.find("is not allowed on this board"), std::string::npos)
      << (*target)->applied_error;
  tuner->Shutdown(absl::Seconds(2));
}

TEST(EndToEnd, AgentsOfSeveralBoardsGetTheirOwnTables) {
  testing::TempDir dir;
  auto tuner = StartTuner(dir.File("tuner.db"));
  ASSERT_NE(tuner, nullptr);
  std::vector<std::thread> agents;
  const std::vector<std::string> boards = {"litex-rocket-50mhz-fastcard", "microwatt-100mhz",
                                           "imx28-mxs-mmc"};
  for (size_t i = 0; i < boards.size(); ++i) {
    agents.emplace_back([&, i] {
      RunAgent(tuner->address(), boards[i], "agent-" + std::to_string(i),
               "file:" + dir.File("b" + std::to_string(i) + ".bin"), "", 12000);
    });
  }
  for (auto& t : agents) t.join();
  Repository repo;
  repo.tuner = tuner->address();
  // An agent reports the table it applied on its way out; the tuner records
  // it asynchronously, so the test waits (bounded) for every report.
  nlohmann::json j;
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  do {
    std::ostringstream out;
    ASSERT_TRUE(RunTargets(repo, "json", out).ok());
    j = nlohmann::json::parse(out.str());
    bool all = j["targets"].size() == 3u;
    for (const auto& t : j["targets"]) all = all && t["applied_version"] == t["current_version"];
    if (all) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  } while (absl::Now() < deadline);
  ASSERT_EQ(j["targets"].size(), 3u);
  for (const auto& t : j["targets"]) {
    EXPECT_EQ(t["total_samples"], 12000);
    EXPECT_GT(t["current_version"].get<int>(), 0);
    EXPECT_EQ(t["applied_version"], t["current_version"]) << t.dump();
  }
  tuner->Shutdown(absl::Seconds(2));
}

TEST(EndToEnd, ANewBoardGetsAPredictedTableBeforeItsFirstSample) {
  testing::TempDir dir;
  auto tuner = StartTuner(dir.File("tuner.db"));
  ASSERT_NE(tuner, nullptr);
  // Two boards with the same card at 50 and 100 MHz.
  RunAgent(tuner->address(), "litex-rocket-50mhz-fastcard", "known-1", "file:" + dir.File("a.bin"),
           "", 20000);
  RunAgent(tuner->address(), "microwatt-100mhz", "known-2", "file:" + dir.File("b.bin"), "",
           20000);
  // A new Rocket at 100 MHz: its first table is predicted at hello.
  const AgentStats stats = RunAgent(tuner->address(), "litex-rocket-100mhz-fastcard", "newcomer",
                                    "file:" + dir.File("c.bin"), "", 500);
  EXPECT_GE(stats.applied_version, 1u);
  // known-2 got one from known-1 (one clock: its quantiles as they are), the
  // newcomer from both.
  EXPECT_EQ(tuner->core()->counters().predicted_tables, 2u);
  Repository repo;
  repo.tuner = tuner->address();
  std::ostringstream v1;
  ASSERT_TRUE(RunPolicy(repo, "newcomer", 1, "json", false, v1).ok());
  auto predicted = ParsePolicyJson(v1.str());
  ASSERT_TRUE(predicted.ok());
  EXPECT_EQ(predicted->origin, "predicted");
  // CMD18 of 4 KiB at 100 MHz: 60 us card access + 164 us bus + 4 us: the
  // prediction (from 50 MHz and 100 MHz boards) must be within 10%.
  bool found = false;
  for (const auto& e : predicted->entries) {
    if (!e.fallback && e.key.opcode == 18) {
      found = true;
      EXPECT_NEAR(e.p50_ns, 228e3, 0.1 * 228e3);
    }
  }
  EXPECT_TRUE(found);
  tuner->Shutdown(absl::Seconds(2));
}

TEST(EndToEnd, AgentReappliesItsLastGoodTableWithoutATuner) {
  testing::TempDir dir;
  auto tuner = StartTuner(dir.File("tuner.db"));
  ASSERT_NE(tuner, nullptr);
  const std::string blob_path = dir.File("mmc0.bin");
  auto run = [&](const std::string& address, uint64_t samples) {
    auto source = MakeSampleSource("sim:microwatt-100mhz", 7);
    auto sink = MakePolicySink("file:" + blob_path, {"mmc0"});
    AgentOptions options;
    options.tuner_address = address;
    options.agent_id = "rebooting-board";
    options.max_samples = samples;
    options.state_dir = dir.File("state");
    options.give_up_after = absl::Seconds(1);
    options.initial_backoff = absl::Milliseconds(50);
    Agent agent(options, std::move(*source), std::move(*sink));
    absl::Status s = agent.Run();
    return std::make_pair(s, agent.stats());
  };
  auto [first, first_stats] = run(tuner->address(), 10000);
  ASSERT_TRUE(first.ok()) << first;
  ASSERT_GT(first_stats.applied_version, 0u);
  tuner->Shutdown(absl::Seconds(1));
  // The board reboots: the blob is gone, the tuner is unreachable.
  std::filesystem::remove(blob_path);
  auto [second, second_stats] = run("127.0.0.1:1", 1000);
  EXPECT_FALSE(second.ok());  // it gives up on the tuner ...
  EXPECT_EQ(second_stats.reapplied_version, first_stats.applied_version);  // ... but not on the table
  EXPECT_TRUE(std::filesystem::exists(blob_path));
  auto blob = ReadFileToString(blob_path);
  ASSERT_TRUE(blob.ok());
  auto decoded = DecodePolicyBlob(*blob);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ((*decoded)->table.version, first_stats.applied_version);
}

TEST(EndToEnd, AgentResendsAcrossATunerRestart) {
  testing::TempDir dir;
  const std::string db = dir.File("tuner.db");
  auto tuner = StartTuner(db);
  ASSERT_NE(tuner, nullptr);
  const int port = tuner->port();
  auto source = MakeSampleSource("sim:microwatt-100mhz", 5);
  auto sink = MakePolicySink("none", {"mmc0"});
  ASSERT_TRUE(source.ok() && sink.ok());
  AgentOptions options;
  options.tuner_address = tuner->address();
  options.agent_id = "restart-me";
  options.max_samples = 20000;
  options.batch_size = 250;
  options.samples_per_second = 20000;
  options.initial_backoff = absl::Milliseconds(50);
  options.give_up_after = absl::Seconds(20);
  Agent agent(options, std::move(*source), std::move(*sink));
  absl::Status result;
  std::thread runner([&] { result = agent.Run(); });

  auto store = Store::Open(db);
  ASSERT_TRUE(store.ok());
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  auto stored = [&] {
    auto t = (*store)->FindTarget("restart-me");
    return t.ok() && t->has_value() ? (*t)->total_samples : 0;
  };
  while (stored() < 5000 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
  ASSERT_LT(stored(), 20000u);
  tuner->Shutdown(absl::Milliseconds(100));
  tuner.reset();
  absl::SleepFor(absl::Milliseconds(300));  // the agent is cut off meanwhile
  TunerOptions again;
  again.db_path = db;
  auto restarted = TunerServer::Start("127.0.0.1:" + std::to_string(port), again);
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  runner.join();
  EXPECT_TRUE(result.ok()) << result;
  const AgentStats stats = agent.stats();
  EXPECT_GE(stats.reconnects, 1u);
  EXPECT_EQ(stats.tuner_total_samples, 20000u);
  EXPECT_EQ(stored(), 20000u);
  (*restarted)->Shutdown(absl::Seconds(2));
}

// A board described as the simulated microwatt whose capture aggregates
// (as bpf's does): it sends histogram deltas of the board's first device.
class HistogramSource : public SampleSource {
 public:
  HistogramSource() {
    auto sim = MakeSampleSource("sim:microwatt-100mhz", 7);
    EXPECT_TRUE(sim.ok());
    if (sim.ok()) (*sim)->Describe(&hello_);
  }
  void Describe(v1::Hello* hello) const override { *hello = hello_; }

 protected:
  // An empty delta of the device's key (`opcode`, size class 12).
  KeyHistogramDelta Delta(uint32_t opcode) const {
    KeyHistogramDelta d;
    d.device = hello_.devices(0).name();
    d.opcode = opcode;
    d.size_class = 12;
    return d;
  }
  // Appends `keys` to `batch` as one histogram batch; returns its samples.
  size_t Send(const std::vector<KeyHistogramDelta>& keys, v1::SampleBatch* batch) const {
    uint64_t dropped = 0;
    return AppendHistograms(keys, {}, {{hello_.devices(0).name(), 0}}, batch, &dropped);
  }

 private:
  v1::Hello hello_;
};

// `batches` batches of histogram deltas of four keys, then the end.
class HistogramBoard final : public HistogramSource {
 public:
  explicit HistogramBoard(int batches) : batches_(batches) {}
  absl::StatusOr<size_t> Fill(size_t, v1::SampleBatch* batch) override {
    if (made_ == batches_) return 0;
    std::vector<KeyHistogramDelta> keys;
    for (uint32_t k = 0; k < 4; ++k) {
      LatencyHistogram h;
      KeyHistogramDelta d = Delta(17 + k);
      for (int i = 0; i < 200; ++i) {
        const uint64_t ns = 20000 + 131 * static_cast<uint64_t>((i * 7919 + made_ * 31 + k) % 1000);
        h.Record(ns);
        d.wait.sum_ns += ns;
      }
      for (int i = 0; i < 20; ++i) h.Record(900000);  // a bucket's count above 15
      d.wait.sum_ns += 20 * 900000;
      d.wait.buckets = h.buckets();
      d.wait.count = h.total_count();
      d.irq_path = d.wait.count;
      keys.push_back(std::move(d));
    }
    ++made_;
    return Send(keys, batch);
  }
  bool exhausted() const override { return made_ == batches_; }

 private:
  int batches_;
  int made_ = 0;
};

AgentOptions HistogramAgentOptions(const std::string& address, const std::string& agent_id,
                                   bool bytes) {
  AgentOptions options;
  options.tuner_address = address;
  options.agent_id = agent_id;
  options.give_up_after = absl::Seconds(20);
  options.drain_timeout = testing::kEventDeadline;  // waits for the final table
  options.histogram_bytes = bytes;
  return options;
}

// --histogram-wire bytes: the tuner stores what the same deltas as arrays
// give, key for key.
TEST(EndToEnd, HistogramDeltasAsBytesAreStoredAsTheArraysAre) {
  testing::TempDir dir;
  auto tuner = StartTuner(dir.File("tuner.db"));
  ASSERT_NE(tuner, nullptr);
  for (const bool bytes : {false, true}) {
    auto sink = MakePolicySink("none", {"mmc0"});
    ASSERT_TRUE(sink.ok());
    Agent agent(HistogramAgentOptions(tuner->address(), bytes ? "bytes" : "arrays", bytes),
                std::make_unique<HistogramBoard>(5), std::move(*sink));
    ASSERT_TRUE(agent.Run().ok());
    EXPECT_EQ(agent.stats().batches_acked, 5u);
    EXPECT_EQ(agent.stats().batches_rejected, 0u);
  }
  tuner->Shutdown(absl::Seconds(5));
  auto store = Store::Open(dir.File("tuner.db"));
  ASSERT_TRUE(store.ok()) << store.status();
  std::map<std::string, std::vector<KeyEvidence>> keys;
  for (const char* id : {"arrays", "bytes"}) {
    auto target = (*store)->FindTarget(id);
    ASSERT_TRUE(target.ok() && target->has_value()) << id;
    EXPECT_EQ((*target)->total_samples, 5u * 4 * 220) << id;
    auto loaded = (*store)->LoadKeys((*target)->id);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    keys[id] = std::move(*loaded);
  }
  ASSERT_EQ(keys["bytes"].size(), 4u);
  ASSERT_EQ(keys["arrays"].size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(keys["bytes"][i].key, keys["arrays"][i].key);
    EXPECT_EQ(keys["bytes"][i].histogram, keys["arrays"][i].histogram) << i;
    EXPECT_EQ(keys["bytes"][i].histogram.total_count(), 5u * 220);
  }
}

// A live board whose capture aggregates over long intervals: every Fill()
// counts 10 completions of one key into its histogram and hands nothing
// over, until EndInterval(); the next Fill() hands over all it counted,
// and it counts nothing after that.
class IntervalBoard final : public HistogramSource {
 public:
  absl::StatusOr<size_t> Fill(size_t, v1::SampleBatch* batch) override {
    if (ended_) return 0;
    if (end_asked_) {
      ended_ = true;
      KeyHistogramDelta d = Delta(17);
      d.wait.buckets = h_.buckets();
      d.wait.count = h_.total_count();
      d.wait.sum_ns = sum_ns_;
      return Send({d}, batch);
    }
    for (int i = 0; i < 10; ++i) {
      const uint64_t ns = 20000 + 977 * static_cast<uint64_t>(counted_ % 50);
      h_.Record(ns);
      sum_ns_ += ns;
      ++counted_;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // a live source waits
    return 0;
  }
  bool exhausted() const override { return false; }
  bool live() const override { return true; }
  void EndInterval() override { end_asked_ = true; }
  // Completions counted so far (read by the test once the agent is done).
  uint64_t counted() const { return counted_; }

 private:
  LatencyHistogram h_;
  uint64_t sum_ns_ = 0;
  std::atomic<uint64_t> counted_{0};
  bool end_asked_ = false;
  bool ended_ = false;
};

// Runs an agent of `source` (agent id `id`, histogram batches) against
// `tuner` until `done()` or 20 s, then stops it; returns what Run() did.
absl::Status RunLiveAgentUntil(const std::string& tuner, const std::string& id,
                               std::unique_ptr<SampleSource> source,
                               const std::function<bool()>& done, AgentStats* stats) {
  auto sink = MakePolicySink("none", {"mmc0"});
  if (!sink.ok()) return sink.status();
  Agent agent(HistogramAgentOptions(tuner, id, false), std::move(source), std::move(*sink));
  absl::Status run;
  std::thread runner([&] { run = agent.Run(); });
  const absl::Time give_up = absl::Now() + absl::Seconds(20);
  while (!done() && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(10));
  agent.Stop();
  runner.join();
  *stats = agent.stats();
  return run;
}

// A clean stop sends what a live source counted in the interval in
// progress: the tuner stores every completion the board counted, though
// the board never reached the end of an interval.
TEST(EndToEnd, AStoppedAgentSendsTheIntervalInProgress) {
  testing::TempDir dir;
  auto tuner = StartTuner(dir.File("tuner.db"));
  ASSERT_NE(tuner, nullptr);
  auto board = std::make_unique<IntervalBoard>();
  IntervalBoard* counting = board.get();
  AgentStats stats;
  const absl::Status run = RunLiveAgentUntil(
      tuner->address(), "interval", std::move(board), [&] { return counting->counted() >= 500; },
      &stats);
  EXPECT_TRUE(run.ok()) << run;
  const uint64_t counted = counting->counted();
  ASSERT_GE(counted, 500u);
  EXPECT_EQ(stats.batches_acked, 1u);
  tuner->Shutdown(absl::Seconds(5));
  auto store = Store::Open(dir.File("tuner.db"));
  ASSERT_TRUE(store.ok()) << store.status();
  auto target = (*store)->FindTarget("interval");
  ASSERT_TRUE(target.ok() && target->has_value());
  EXPECT_EQ((*target)->total_samples, counted);
}

// A live source that works to a schedule, as bpf's capture does (a
// histogram read each interval): it has something to hand over only once
// each interval is due, and says when (quiet_until).
class ScheduledBoard final : public HistogramSource {
 public:
  explicit ScheduledBoard(absl::Duration interval)
      : interval_(interval), due_(absl::Now() + interval) {}
  absl::StatusOr<size_t> Fill(size_t, v1::SampleBatch* batch) override {
    if (absl::Now() < due_) {
      if (!ending_) ++early_fills_;
      return 0;
    }
    due_ = absl::Now() + interval_;
    KeyHistogramDelta d = Delta(17);
    d.wait.buckets = {{LatencyHistogram::BucketIndex(20000), 10}};
    d.wait.count = 10;
    d.wait.sum_ns = 200000;
    ++intervals_;
    return Send({d}, batch);
  }
  bool exhausted() const override { return false; }
  bool live() const override { return true; }
  void EndInterval() override {
    ending_ = true;
    due_ = absl::InfinitePast();
  }
  absl::Time quiet_until() const override { return due_; }
  uint64_t intervals() const { return intervals_; }
  uint64_t early_fills() const { return early_fills_; }

 private:
  const absl::Duration interval_;
  absl::Time due_;
  bool ending_ = false;
  std::atomic<uint64_t> intervals_{0};
  std::atomic<uint64_t> early_fills_{0};
};

// The agent calls such a source when it is due, not every ~100 ms to be
// told it has nothing (each call a wake of the agent on an idle board,
// 28 a second before), and sends every interval.
TEST(EndToEnd, AScheduledSourceIsFilledOnlyWhenDue) {
  testing::TempDir dir;
  auto tuner = StartTuner(dir.File("tuner.db"));
  ASSERT_NE(tuner, nullptr);
  auto board = std::make_unique<ScheduledBoard>(absl::Milliseconds(300));
  ScheduledBoard* scheduled = board.get();
  const absl::Time end = absl::Now() + absl::Seconds(2);
  AgentStats stats;
  const absl::Status run = RunLiveAgentUntil(
      tuner->address(), "scheduled", std::move(board), [&] { return absl::Now() >= end; }, &stats);
  EXPECT_TRUE(run.ok()) << run;
  EXPECT_EQ(scheduled->early_fills(), 0u) << "calls before the source was due";
  EXPECT_GE(scheduled->intervals(), 4u);
  EXPECT_EQ(stats.batches_acked, scheduled->intervals());
}

// A tuner from before HistogramDelta.buckets: it answers the Hello without
// accepts_bucket_bytes and would refuse such deltas. It counts what comes.
class OldTuner final : public v1::Tuner::Service {
 public:
  grpc::Status Session(grpc::ServerContext*,
                       grpc::ServerReaderWriter<v1::TunerMessage, v1::AgentMessage>* stream)
      override {
    v1::AgentMessage in;
    if (!stream->Read(&in) || !in.has_hello()) return grpc::Status::OK;
    ++hellos;
    v1::TunerMessage out;
    out.mutable_hello_ack()->set_last_durable_seq(0);
    stream->Write(out);
    while (stream->Read(&in)) {
      if (in.has_batch()) ++batches;
    }
    return grpc::Status::OK;
  }
  std::atomic<int> hellos{0};
  std::atomic<int> batches{0};
};

// --histogram-wire bytes sends nothing to a tuner that does not read them,
// and backs off between its tries; with arrays the same tuner gets batches.
TEST(EndToEnd, BytesAreNeverSentToATunerThatDoesNotReadThem) {
  for (const bool bytes : {true, false}) {
    OldTuner old;
    int port = 0;
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&old);
    std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
    ASSERT_NE(server, nullptr);
    auto sink = MakePolicySink("none", {"mmc0"});
    ASSERT_TRUE(sink.ok());
    AgentOptions options = HistogramAgentOptions(absl::StrCat("127.0.0.1:", port), "old", bytes);
    options.drain_timeout = absl::Seconds(1);
    Agent agent(options, std::make_unique<HistogramBoard>(3), std::move(*sink));
    std::thread run([&] { agent.Run().IgnoreError(); });
    const absl::Time start = absl::Now();
    while (absl::Now() - start < absl::Milliseconds(1500) && old.batches == 0) {
      absl::SleepFor(absl::Milliseconds(10));
    }
    if (bytes) {
      EXPECT_EQ(old.batches, 0);
      EXPECT_GE(old.hellos, 1);
      // 100 ms, then doubling: about four tries in 1.5 s, not one per round trip.
      EXPECT_LE(old.hellos, 6);
    } else {
      EXPECT_GT(old.batches, 0);
    }
    agent.Stop();
    server->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
    run.join();
  }
}

}  // namespace
}  // namespace spintune

namespace spintune {
namespace {

// A trace recorded on this machine, replayed by a real agent into a real
// tuner: every completion of the file arrives, and the tuner fits the
// virtio disk's reads.
// Replays the virtio fixture (83 completions, their IRQ dispatches) through
// an agent into `tuner` as "replay-1".
AgentStats RunReplayAgent(const testing::TempDir& dir, const std::string& address,
                          bool send_dispatch) {
  {
    std::ofstream(dir.File("platform.json"))
        << R"({"irq_cpu_ns": 8000, "irq_wake_ns": 40000, "poll_read_ns": 200,
               "timer_cpu_ns": 20000, "timer_wake_ns": 30000, "board": "this-vm"})";
  }
  SourceOptions source_options;
  source_options.platform = dir.File("platform.json");
  source_options.block_dev = {"254:0=vda"};
  auto source = MakeSampleSource(
      std::string("replay:") + SPINTUNE_SOURCE_DIR + "/tests/fixtures/trace/virtio-6.18-trace.txt",
      source_options);
  EXPECT_TRUE(source.ok()) << source.status();
  auto sink = MakePolicySink("none", {"vda"});
  EXPECT_TRUE(sink.ok());
  if (!source.ok() || !sink.ok()) return {};
  AgentOptions options;
  options.tuner_address = address;
  options.agent_id = "replay-1";
  options.batch_size = 20;
  options.state_dir = "";
  options.give_up_after = absl::Seconds(20);
  options.send_dispatch = send_dispatch;
  Agent agent(options, std::move(*source), std::move(*sink));
  absl::Status s = agent.Run();
  EXPECT_TRUE(s.ok()) << s;
  return agent.stats();
}

uint64_t StoredDispatchSamples(const std::string& db) {
  auto store = Store::Open(db);
  EXPECT_TRUE(store.ok()) << store.status();
  if (!store.ok()) return 0;
  auto target = (*store)->FindTarget("replay-1");
  EXPECT_TRUE(target.ok() && target->has_value());
  return target.ok() && target->has_value() ? (*target)->total_dispatch_samples : 0;
}

TEST(EndToEnd, ReplayedTraceReachesTheTuner) {
  testing::TempDir dir;
  auto tuner = StartTuner(dir.File("tuner.db"));
  ASSERT_NE(tuner, nullptr);
  AgentStats stats = RunReplayAgent(dir, tuner->address(), true);
  EXPECT_EQ(stats.samples_generated, 83u);
  EXPECT_EQ(stats.tuner_total_samples, 83u);

  Repository repo;
  repo.tuner = tuner->address();
  std::ostringstream policy_json;
  ASSERT_TRUE(RunPolicy(repo, "replay-1", 0, "json", false, policy_json).ok());
  auto stored = ParsePolicyJson(policy_json.str());
  ASSERT_TRUE(stored.ok()) << stored.status();
  bool reads = false;
  for (const auto& e : stored->entries) {
    EXPECT_EQ(e.key.device, "vda");
    reads |= !e.fallback && e.key.opcode == 0 && e.key.size_class == 13;  // 4 KiB reads
  }
  EXPECT_TRUE(reads) << policy_json.str();
  tuner->Shutdown(absl::Seconds(5));
  EXPECT_GT(StoredDispatchSamples(dir.File("tuner.db")), 0u);
}

// --irq-costs platform: the completions arrive, the traced IRQ dispatch
// times do not, so the tuner keeps the declared platform costs.
TEST(EndToEnd, AgentKeepsItsDispatchTimesWhenThePlatformIsAuthoritative) {
  testing::TempDir dir;
  auto tuner = StartTuner(dir.File("tuner.db"));
  ASSERT_NE(tuner, nullptr);
  AgentStats stats = RunReplayAgent(dir, tuner->address(), false);
  EXPECT_EQ(stats.tuner_total_samples, 83u);
  tuner->Shutdown(absl::Seconds(5));
  EXPECT_EQ(StoredDispatchSamples(dir.File("tuner.db")), 0u);
}

}  // namespace
}  // namespace spintune
