// Every push is an experiment (issue #12): a simulated board whose true
// timer oversleep is five times what it declares. The fit on the declared
// costs pushes a sleeping wait that the driver's measured outcomes show to
// be worse than the default it replaced; the tuner rolls the key back within
// the verification window, holds it, and the next fit — over the oversleep
// the driver measured — is verified better than the default.
//
// The board, by construction (1 GHz, so cycles are ns; lambda = 1):
//   completion X: half the requests ~5 us, half ~40 us; default rule IRQ.
//   irq_cpu 20 us, irq_wake 30 us, poll 1 us, timer_cpu 2 us, declared
//   timer oversleep 20 us, true oversleep exponential with mean 100 us.
//   IRQ:                  J = 20 + E[X] + 30                    = 72.5 us
//   SPIN_THEN_IRQ(~6 us): fast 5 + 5, slow (6 + 20) + (40 + 30)  = 53 us
//   SLEEP_THEN_SPIN(0):   declared: fast 3 + 20, slow 23 + 40    = 43 us
//                         true (tw ~ Exp(100 us)): fast ~103, slow ~117
//                                                                = ~110 us
// So the first fit sleeps (43 < 53 < 72.5 predicted), the driver measures
// ~110 us against the default's 72.5 (worse: rolled back to IRQ), and with
// the measured oversleep the fit spins then blocks (53 us: better).
#include <fstream>
#include <map>
#include <optional>
#include <thread>

#include "absl/strings/str_format.h"
#include "agent/agent.h"
#include "agent/policy_sink.h"
#include "agent/sim_source.h"
#include "gtest/gtest.h"
#include "policy/policy_blob.h"
#include "storage/store.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/temp_dir.h"
#include "tuner/tuner_server.h"

namespace spintune {
namespace {

BoardModel WrongTimerBoard() {
  BoardModel b;
  b.name = "wrong-timer-board";
  b.summary = "declares a 20 us timer oversleep; really 100 us";
  b.cpu_model = "test";
  b.cpu_khz = 1'000'000;  // cycles are ns
  b.device_name = "mmc0";
  b.driver = "test-mmc";
  b.device_model = "test card";
  b.irq_overhead_cycles = 15'000;
  b.irq_handler_cycles = 5'000;
  b.irq_wake_cycles = 30'000;
  b.poll_read_cycles = 1'000;
  b.timer_cpu_cycles = 2'000;
  b.timer_wake_ns = 20'000;
  OpcodeModel op;
  op.opcode = 17;
  op.name = "CMD17";
  op.sizes = {{512, 1.0}};
  op.device_median_ns = 5'000;
  op.device_sigma = 0.05;
  op.slow_share = 0.5;
  op.slow_median_ns = 40'000;
  op.slow_sigma = 0.05;
  b.opcodes = {op};
  DefaultRule irq;
  irq.wait = WaitParams::Irq();
  irq.note = "always block";
  b.default_rules = {irq};
  return b;
}

TEST(Verification, AWrongModelIsRolledBackAndTheLearntFitVerifiedBetter) {
  testing::TempDir dir;
  TunerOptions options;
  options.db_path = dir.File("tuner.db");
  options.refit_samples = 4096;
  options.verify.min_requests = 1000;
  options.verify.max_requests = 8000;
  options.verify.ab_share = 0;  // before/after (the simulated driver reads format 3)
  auto tuner = TunerServer::Start("127.0.0.1:0", options);
  ASSERT_TRUE(tuner.ok()) << tuner.status();

  const BoardModel board = WrongTimerBoard();
  auto source = std::make_unique<SimSource>(board, 3, /*timer_wake_factor=*/5.0);
  auto sink = MakePolicySink("none", {"mmc0"});
  ASSERT_TRUE(sink.ok());
  AgentOptions o;
  o.tuner_address = (*tuner)->address();
  o.agent_id = "wrong-timer";
  o.max_samples = 40000;
  o.batch_size = 250;
  o.samples_per_second = 20000;  // in real time: fits and verdicts keep up
  o.give_up_after = absl::Seconds(20);
  Agent agent(o, std::move(source), std::move(*sink));
  ASSERT_TRUE(agent.Run().ok());
  (*tuner)->Shutdown(absl::Seconds(2));

  auto store = Store::Open(options.db_path, {}, OpenMode::kReadOnly);
  ASSERT_TRUE(store.ok());
  auto target = (*store)->FindTarget("wrong-timer");
  ASSERT_TRUE(target.ok() && target->has_value());
  const int64_t id = (*target)->id;
  auto verdicts = (*store)->ListVerifications(id);
  ASSERT_TRUE(verdicts.ok());
  std::string all;
  for (const auto& v : *verdicts) {
    all += absl::StrCat("v", v.version, " ", v.verdict, ": ", v.reason, "\n");
  }
  ASSERT_GE(verdicts->size(), 2u) << all;
  // First: the sleeping wait, measured worse than the default (version 0),
  // rolled back within the window.
  const VerificationRecord& first = verdicts->front();
  EXPECT_EQ(first.verdict, "worse") << all;
  EXPECT_EQ(first.incumbent_version, 0u) << all;
  EXPECT_LT(first.requests, 2 * options.verify.min_requests) << "decided in the window: " << all;
  ASSERT_NE(first.rollback_version, 0u) << all;
  auto pushed = (*store)->LoadPolicy(id, first.version);
  auto rolled = (*store)->LoadPolicy(id, first.rollback_version);
  ASSERT_TRUE(pushed.ok() && pushed->has_value() && rolled.ok() && rolled->has_value());
  EXPECT_EQ((*rolled)->origin, "verify-rollback");
  auto wait_of = [](const PolicyTable& t) {
    for (const auto& e : t.entries) {
      if (!e.fallback) return e.wait;
    }
    return WaitParams();
  };
  const Strategy first_strategy = wait_of(**pushed).strategy;
  EXPECT_TRUE(first_strategy == Strategy::kSleepThenSpin || first_strategy == Strategy::kPollSleep)
      << StrategyName(first_strategy);
  EXPECT_EQ(wait_of(**rolled).strategy, Strategy::kIrq);
  // The prediction was far from what was measured (the model was wrong).
  EXPECT_GT(first.measured.mean_ns, 1.5 * first.predicted_cost_ns) << all;
  // Later: a fit over the measured oversleep, verified better than blocking.
  const VerificationRecord& last = verdicts->back();
  EXPECT_EQ(last.verdict, "better") << all;
  EXPECT_GT(last.version, first.rollback_version) << all;
  auto learnt = (*store)->LoadPolicy(id, last.version);
  ASSERT_TRUE(learnt.ok() && learnt->has_value());
  EXPECT_EQ(wait_of(**learnt).strategy, Strategy::kSpinThenIrq) << all;
  // Measured within 15% of what that fit predicted.
  EXPECT_NEAR(last.measured.mean_ns, last.predicted_cost_ns, 0.15 * last.measured.mean_ns) << all;
  auto timers = (*store)->LoadTimerOversleep(id);
  ASSERT_TRUE(timers.ok() && timers->size() == 1u);
  EXPECT_NEAR((*timers)[0].oversleep.MeanNs(), 100e3, 10e3) << "the learnt oversleep";
}

// The same board with A/B trials (--ab-share 128) and a workload drift at
// the push: from the first table on, every completion takes 1.3 times as
// long. Its sleeping wait is verified by the two arms the simulated driver
// interleaves through spintune_ab_pick() (half its commands keep blocking),
// in the same windows: worse, rolled back, the trial gone. (Without trials,
// whether the before/after comparison sees the drift depends on where the
// verdict falls in the detector's windows; tuner/verifier_test.cc pins
// that case down.)
struct DriftRun {
  std::vector<VerificationRecord> verdicts;
  std::string all;  // for messages
  std::optional<PolicyTable> first;  // the first version pushed
  std::optional<PolicyTable> rolled;  // its rollback, if any
};

DriftRun RunWithDrift() {
  DriftRun run;
  testing::TempDir dir;
  TunerOptions options;
  options.db_path = dir.File("tuner.db");
  options.refit_samples = 4096;
  options.store.window_samples = 1024;  // a drift shows within a window or two
  options.verify.min_requests = 1000;
  options.verify.max_requests = 8000;
  options.verify.ab_share = 128;
  auto tuner = TunerServer::Start("127.0.0.1:0", options);
  if (!tuner.ok()) return run;
  const BoardModel board = WrongTimerBoard();
  auto source = std::make_unique<SimSource>(board, 3, /*timer_wake_factor=*/5.0);
  source->DriftAtFirstTable(1.3);
  auto sink = MakePolicySink("none", {"mmc0"});
  if (!sink.ok()) return run;
  AgentOptions o;
  o.tuner_address = (*tuner)->address();
  o.agent_id = "drifting";
  o.max_samples = 24000;
  o.batch_size = 250;
  o.samples_per_second = 20000;
  o.give_up_after = absl::Seconds(20);
  Agent agent(o, std::move(source), std::move(*sink));
  if (!agent.Run().ok()) return run;
  (*tuner)->Shutdown(absl::Seconds(2));
  auto store = Store::Open(options.db_path, {}, OpenMode::kReadOnly);
  if (!store.ok()) return run;
  auto target = (*store)->FindTarget("drifting");
  if (!target.ok() || !target->has_value()) return run;
  const int64_t id = (*target)->id;
  auto verdicts = (*store)->ListVerifications(id);
  if (!verdicts.ok()) return run;
  run.verdicts = *verdicts;
  for (const auto& v : run.verdicts) {
    run.all += absl::StrCat("v", v.version, " ", v.method, " ", v.verdict, ": ", v.reason, "\n");
  }
  auto first = (*store)->LoadPolicy(id, 1);
  if (first.ok() && first->has_value()) run.first = **first;
  if (!run.verdicts.empty() && run.verdicts.front().rollback_version != 0) {
    auto rolled = (*store)->LoadPolicy(id, run.verdicts.front().rollback_version);
    if (rolled.ok() && rolled->has_value()) run.rolled = **rolled;
  }
  return run;
}

const PolicyEntry& KeyEntry(const PolicyTable& t) {
  for (const auto& e : t.entries) {
    if (!e.fallback) return e;
  }
  return t.entries.front();
}

TEST(Verification, AbArmsRollBackAWorseTableThroughADriftAtThePush) {
  const DriftRun run = RunWithDrift();
  ASSERT_TRUE(run.first.has_value()) << run.all;
  const PolicyEntry& pushed = KeyEntry(*run.first);
  ASSERT_TRUE(pushed.trial.has_value()) << "a changed key is trialled";
  EXPECT_EQ(pushed.trial->wait, WaitParams::Irq()) << "against the default rule's wait";
  EXPECT_EQ(pushed.trial->share, 128u);
  EXPECT_NE(pushed.wait.strategy, Strategy::kIrq);
  ASSERT_FALSE(run.verdicts.empty()) << "no verdict";
  const VerificationRecord& v = run.verdicts.front();
  EXPECT_EQ(v.version, 1u) << run.all;
  EXPECT_EQ(v.method, "ab") << run.all;
  EXPECT_EQ(v.verdict, "worse") << run.all;
  ASSERT_TRUE(run.rolled.has_value()) << run.all;
  EXPECT_EQ(run.rolled->origin, "verify-rollback");
  EXPECT_EQ(KeyEntry(*run.rolled).wait, WaitParams::Irq());
  EXPECT_FALSE(KeyEntry(*run.rolled).trial.has_value()) << "decided: the trial is dropped";
}

// The Hello says which blob format the agent's drivers read (its sink's
// answer), the tuner stores it with the target and attaches A/B trials (on
// by default) only where that is format 3: the same board through a sink
// whose readers cannot be asked (file:, format 2) gets a table without
// trials, written as a format 2 blob; with sink none (the simulated driver,
// this release's helpers: format 3) the changed key is trialled.
TEST(Verification, TrialsOnlyWhereTheHelloSaysTheDriversReadFormat3) {
  testing::TempDir dir;
  TunerOptions options;
  options.db_path = dir.File("tuner.db");
  options.refit_samples = 4096;
  auto tuner = TunerServer::Start("127.0.0.1:0", options);
  ASSERT_TRUE(tuner.ok()) << tuner.status();
  const std::string blob_path = dir.File("mmc0.bin");
  const BoardModel board = WrongTimerBoard();  // the source keeps a reference
  for (const std::string agent_id : {"reads-3", "reads-2"}) {
    auto sink = MakePolicySink(agent_id == "reads-3" ? "none" : "file:" + blob_path, {"mmc0"});
    ASSERT_TRUE(sink.ok()) << sink.status();
    AgentOptions o;
    o.tuner_address = (*tuner)->address();
    o.agent_id = agent_id;
    o.max_samples = 6000;
    o.batch_size = 250;
    o.give_up_after = absl::Seconds(20);
    Agent agent(o, std::make_unique<SimSource>(board, 3), std::move(*sink));
    ASSERT_TRUE(agent.Run().ok());
    EXPECT_GE(agent.stats().applied_version, 1u) << agent_id;
  }
  (*tuner)->Shutdown(absl::Seconds(2));
  auto store = Store::Open(options.db_path, {}, OpenMode::kReadOnly);
  ASSERT_TRUE(store.ok());
  for (const auto& [agent_id, format] : {std::pair<std::string, uint32_t>{"reads-3", 3},
                                         std::pair<std::string, uint32_t>{"reads-2", 2}}) {
    auto target = (*store)->FindTarget(agent_id);
    ASSERT_TRUE(target.ok() && target->has_value()) << agent_id;
    auto record = (*store)->LoadTarget((*target)->id);
    ASSERT_TRUE(record.ok());
    EXPECT_EQ(record->max_blob_format, format) << agent_id;
    auto first = (*store)->LoadPolicy((*target)->id, 1);
    ASSERT_TRUE(first.ok() && first->has_value()) << agent_id;
    const PolicyEntry& e = KeyEntry(**first);
    EXPECT_NE(e.wait, WaitParams::Irq()) << agent_id << ": the fit changes the key";
    EXPECT_EQ(e.trial.has_value(), format == 3) << agent_id;
  }
  std::ifstream in(blob_path, std::ios::binary);
  const std::string blob((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto decoded = DecodePolicyBlob(blob);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  ASSERT_GE(blob.size(), 6u);
  EXPECT_EQ(static_cast<uint8_t>(blob[4]) | static_cast<uint8_t>(blob[5]) << 8, 2)
      << "no trials: the format every driver reads";
  EXPECT_EQ(spintune_trial_count(&(*decoded)->table), 0u);
}

// A driver that measures itself (the io_uring reference, `make uring-ref`)
// hands its outcome reports to `spintune-agent --outcomes`, which sends them
// after the CSV's last batch. The board, by construction: completions of
// 2-3 us, IRQ costs 20 us CPU + 30 us wake, so the fit spins (~2.5 us
// predicted against ~52.5 us blocking). The driver reports the table
// (version 1) at 350 us per request and blocking (its default rule, version
// 0) at 55 us: the key is rolled back to the IRQ wait in version 2, priced by
// the IRQ path measured for it, and the agent applies version 2 before it
// exits. A later round gives the earlier reports first, then its own: the
// earlier ones are resent, not stored twice.
TEST(Verification, ADriversOutcomeReportsRollBackAKeyTheyMeasuredWorse) {
  testing::TempDir dir;
  {
    std::ofstream csv(dir.File("samples.csv"));
    csv << "device,opcode,bytes,wait_ns,path,cpu_class\n";
    for (int i = 0; i < 3000; ++i) csv << "uring0,0,4096," << 2000 + (i * 37) % 1000 << ",spin,default\n";
    std::ofstream(dir.File("platform.json"))
        << R"({"board": "outcome-board", "irq_cpu_ns": 20000, "irq_wake_ns": 30000,
              "poll_read_ns": 10, "timer_cpu_ns": 15000, "timer_wake_ns": 60000,
              "devices": [{"name": "uring0", "driver": "io_uring", "model": "test",
                "default_rules": [{"opcode": null, "strategy": "irq", "note": "always block"}]}]})";
  }
  auto report = [&](const std::string& name, uint64_t version, double cpu_ns, double latency_ns) {
    const double n = 2000;
    std::ofstream(dir.File(name)) << absl::StrFormat(
        R"({"format": "spintune-outcomes", "format_version": 1, "device": "uring0",
            "mode": "%s", "policy_version": %d, "keys": [{"cpu_class": "default", "opcode": 0,
            "bytes": 4096, "size_class": 13, "requests": 2000, "cpu_ns_sum": %.17g,
            "latency_ns_sum": %.17g, "cpu_ns_sq_sum": %.17g, "latency_ns_sq_sum": %.17g,
            "cpu_latency_ns_sum": %.17g}]})",
        name, version, n * cpu_ns, n * latency_ns, n * cpu_ns * cpu_ns * 1.01,
        n * latency_ns * latency_ns * 1.01, n * cpu_ns * latency_ns);
    return dir.File(name);
  };
  const pid_t tuner = testing::Spawn(
      {SPINTUNE_TUNER_BIN, "--listen", "127.0.0.1:0", "--db", dir.File("t.db"),
       "--refit-samples", "1000", "--shutdown-deadline", "2"},
      dir.File("tuner.out"), dir.File("tuner.err"));
  const std::string address = testing::WaitForLine(dir.File("tuner.out"), "listening on ");
  ASSERT_FALSE(address.empty()) << testing::Slurp(dir.File("tuner.err"));
  const std::vector<std::string> agent = {
      SPINTUNE_AGENT_BIN, "--tuner", address, "--agent-id", "uring-ref", "--source",
      "csv:" + dir.File("samples.csv"), "--platform", dir.File("platform.json"), "--sink",
      "file:" + dir.File("uring0.bin"), "--state-dir", dir.File("state"), "--give-up-after",
      "20"};
  auto first = testing::Run(agent, dir.path().string());
  ASSERT_EQ(first.exit_code, 0) << first.err;
  ASSERT_NE(first.err.find("applied policy version=1 "), std::string::npos) << first.err;

  auto plus = [](std::vector<std::string> argv, const std::vector<std::string>& reports) {
    for (const auto& r : reports) argv.insert(argv.end(), {"--outcomes", r});
    return argv;
  };
  const std::vector<std::string> with_outcomes =
      plus(agent, {report("table.json", 1, 150e3, 200e3), report("block.json", 0, 20e3, 35e3)});
  auto second = testing::Run(with_outcomes, dir.path().string());
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_NE(second.err.find("applied policy version=2 "), std::string::npos) << second.err;
  // A later round: the earlier reports first (resent), then the new ones
  // (the rolled-back version, measured: blocking again).
  const std::vector<std::string> later = plus(
      with_outcomes, {report("table2.json", 2, 20e3, 35e3), report("block2.json", 0, 20e3, 35e3)});
  auto third = testing::Run(later, dir.path().string());
  ASSERT_EQ(third.exit_code, 0) << third.err;

  // The offline comparison picks the version the table's run waited by.
  auto verify = testing::Run({SPINTUNE_CLI_BIN, "--db", dir.File("t.db"), "verify", "uring-ref",
                              "--report", "table=" + dir.File("table.json"), "--report",
                              "block=" + dir.File("block.json"), "--format", "json"},
                             dir.path().string());
  EXPECT_EQ(verify.exit_code, 0) << verify.err;
  EXPECT_NE(verify.out.find("\"table_version\": 1"), std::string::npos) << verify.out;
  kill(tuner, SIGINT);
  EXPECT_EQ(testing::WaitExit(tuner), 0);

  auto store = Store::Open(dir.File("t.db"), {}, OpenMode::kReadOnly);
  ASSERT_TRUE(store.ok()) << store.status();
  auto target = (*store)->FindTarget("uring-ref");
  ASSERT_TRUE(target.ok() && target->has_value());
  const int64_t id = (*target)->id;
  auto verdicts = (*store)->ListVerifications(id);
  ASSERT_TRUE(verdicts.ok());
  ASSERT_EQ(verdicts->size(), 1u);
  const VerificationRecord& v = verdicts->front();
  EXPECT_EQ(v.verdict, "worse") << v.reason;
  EXPECT_EQ(v.version, 1u);
  EXPECT_EQ(v.incumbent_version, 0u);
  EXPECT_EQ(v.rollback_version, 2u);
  EXPECT_NEAR(v.measured.mean_ns, 350e3, 1);
  EXPECT_NEAR(v.incumbent.mean_ns, 55e3, 1);
  auto pushed = (*store)->LoadPolicy(id, 1);
  auto rolled = (*store)->LoadPolicy(id, 2);
  ASSERT_TRUE(pushed.ok() && pushed->has_value() && rolled.ok() && rolled->has_value());
  EXPECT_EQ((*rolled)->origin, "verify-rollback");
  const PolicyKey key{"default", "uring0", 0, 13};
  for (const auto& e : (*pushed)->entries) {
    if (!e.fallback && e.key == key) {
      EXPECT_NE(e.wait.strategy, Strategy::kIrq) << "the fit spins";
    }
  }
  bool found = false;
  for (const auto& e : (*rolled)->entries) {
    if (e.fallback || !(e.key == key)) continue;
    found = true;
    EXPECT_EQ(e.wait.strategy, Strategy::kIrq);
    // Priced as the wait it now has, with the IRQ path the driver measured
    // for this key while blocking (20 us CPU, 35 us latency) in place of
    // the declared one (20 us, ~2.5 + 30 us).
    EXPECT_NEAR(e.expected.cpu_ns, 20e3, 1);
    EXPECT_NEAR(e.expected.latency_ns, 35e3, 1);
  }
  EXPECT_TRUE(found);
  // The later round resent the first two reports: each stored once.
  auto outcomes = (*store)->LoadOutcomes(id);
  ASSERT_TRUE(outcomes.ok());
  std::map<uint64_t, uint64_t> requests;  // version -> requests
  for (const auto& o : *outcomes) requests[o.version] += o.moments.requests;
  EXPECT_EQ(requests, (std::map<uint64_t, uint64_t>{{0, 4000}, {1, 2000}, {2, 2000}}));
}

}  // namespace
}  // namespace spintune
