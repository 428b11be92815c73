// Killing the agent (SIGKILL) mid-stream and restarting it with the same
// agent id loses and duplicates nothing: the stored counts and histograms
// equal those of an uninterrupted run.
#include <signal.h>

#include <thread>

#include "gtest/gtest.h"
#include "storage/store.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/temp_dir.h"
#include "tuner/tuner_server.h"

namespace spintune {
namespace {

constexpr uint64_t kSamples = 40000;
constexpr uint64_t kBatch = 250;

std::vector<std::string> AgentArgs(const std::string& address, const std::string& id,
                                   bool paced, const std::string& state_dir) {
  std::vector<std::string> args = {SPINTUNE_AGENT_BIN, "--tuner", address, "--agent-id", id,
                                   "--source", "sim:microwatt-100mhz", "--seed", "3",
                                   "--max-samples", std::to_string(kSamples), "--batch-size",
                                   std::to_string(kBatch), "--give-up-after", "20",
                                   "--state-dir", state_dir};
  if (paced) args.insert(args.end(), {"--rate", "40000"});
  return args;
}

uint64_t StoredSamples(Store* store, const std::string& id) {
  auto t = store->FindTarget(id);
  return t.ok() && t->has_value() ? (*t)->total_samples : 0;
}

// `id` stored every sample once, in kBatch-sample batches, with the same
// evidence as the uninterrupted run "reference" of the same board and seed.
void ExpectStoredLikeTheReference(Store* store, const std::string& id) {
  EXPECT_EQ(StoredSamples(store, id), kSamples);
  auto target = store->FindTarget(id);
  auto reference = store->FindTarget("reference");
  ASSERT_TRUE(target.ok() && reference.ok() && target->has_value() && reference->has_value());
  EXPECT_EQ(*store->LastDurableSeq((*target)->id), kSamples / kBatch);
  auto a = store->LoadKeys((*target)->id);
  auto b = store->LoadKeys((*reference)->id);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->size(), b->size());
  for (size_t i = 0; i < a->size(); ++i) {
    EXPECT_EQ((*a)[i].key, (*b)[i].key);
    EXPECT_EQ((*a)[i].histogram, (*b)[i].histogram) << "key " << (*a)[i].key.opcode;
  }
}

TEST(AgentRestart, KillNineAndRestartLosesAndDuplicatesNothing) {
  testing::TempDir dir;
  TunerOptions options;
  options.db_path = dir.File("tuner.db");
  auto tuner = TunerServer::Start("127.0.0.1:0", options);
  ASSERT_TRUE(tuner.ok()) << tuner.status();
  auto store = Store::Open(options.db_path);
  ASSERT_TRUE(store.ok()) << store.status();
  const std::string addr = (*tuner)->address();

  // Three kills at increasing points, then a run to the end.
  for (uint64_t kill_after : {4000, 15000, 30000}) {
    const pid_t pid = testing::Spawn(AgentArgs(addr, "victim", true, dir.File("state")), dir.File("a.out"),
                                     dir.File("a.err"));
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (StoredSamples(store->get(), "victim") < kill_after && absl::Now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ASSERT_EQ(kill(pid, SIGKILL), 0);
    EXPECT_EQ(testing::WaitExit(pid), -1) << "the agent should have been killed mid-stream";
    const uint64_t stored = StoredSamples(store->get(), "victim");
    EXPECT_GE(stored, kill_after);
    EXPECT_LT(stored, kSamples) << "killed too late to test anything";
  }
  testing::RunResult last = testing::Run(AgentArgs(addr, "victim", true, dir.File("state")), dir.path().string());
  ASSERT_EQ(last.exit_code, 0) << last.err;
  testing::RunResult ref = testing::Run(AgentArgs(addr, "reference", false, dir.File("state")), dir.path().string());
  ASSERT_EQ(ref.exit_code, 0) << ref.err;

  ExpectStoredLikeTheReference(store->get(), "victim");
  (*tuner)->Shutdown(absl::Seconds(2));
}

// `--tuner A,B`: two tuners on one database; A is killed (-9) mid-stream
// and the agent moves on to B, which has A's durable seqs from the
// database: everything is stored exactly once, as by one tuner.
TEST(AgentRestart, AnAgentOfTwoTunersMovesOnWhenOneIsKilled) {
  testing::TempDir dir;
  std::vector<pid_t> tuners;
  std::vector<std::string> addresses;
  for (const std::string name : {"a", "b"}) {
    tuners.push_back(testing::Spawn({SPINTUNE_TUNER_BIN, "--listen", "127.0.0.1:0", "--db",
                                     dir.File("tuner.db"), "--shutdown-deadline", "2"},
                                    dir.File(name + ".out"), dir.File(name + ".err")));
    addresses.push_back(testing::WaitForLine(dir.File(name + ".out"), "listening on "));
    ASSERT_FALSE(addresses.back().empty()) << testing::Slurp(dir.File(name + ".err"));
  }
  auto store = Store::Open(dir.File("tuner.db"), {}, OpenMode::kReadOnly);
  ASSERT_TRUE(store.ok()) << store.status();
  const pid_t agent = testing::Spawn(
      AgentArgs(addresses[0] + "," + addresses[1], "mover", true, dir.File("state")),
      dir.File("agent.out"), dir.File("agent.err"));
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (StoredSamples(store->get(), "mover") < 10000 && absl::Now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(kill(tuners[0], SIGKILL), 0);
  EXPECT_EQ(testing::WaitExit(tuners[0]), -1);
  EXPECT_LT(StoredSamples(store->get(), "mover"), kSamples) << "killed too late to test anything";
  EXPECT_EQ(testing::WaitExit(agent), 0) << testing::Slurp(dir.File("agent.err"));
  const std::string log = testing::Slurp(dir.File("agent.err"));
  EXPECT_NE(log.find("moving on to tuner " + addresses[1]), std::string::npos) << log;

  testing::RunResult ref =
      testing::Run(AgentArgs(addresses[1], "reference", false, dir.File("ref-state")),
                   dir.path().string());
  ASSERT_EQ(ref.exit_code, 0) << ref.err;
  ExpectStoredLikeTheReference(store->get(), "mover");
  // The CLI's --tuner list: the dead tuner is passed over.
  testing::RunResult cli = testing::Run(
      {SPINTUNE_CLI_BIN, "--tuner", addresses[0] + "," + addresses[1], "targets"},
      dir.path().string());
  EXPECT_EQ(cli.exit_code, 0) << cli.err;
  EXPECT_NE(cli.out.find("mover"), std::string::npos) << cli.out;
  kill(tuners[1], SIGINT);
  EXPECT_EQ(testing::WaitExit(tuners[1]), 0);
}

// Issue 15 item 1: on a deterministic source --max-samples is where the
// stream ends; a second run of the same agent id says in one line what it
// resumed and skipped, sends the rest, and the tuner holds the stream once.
TEST(AgentRestart, AResumedAgentSaysWhatItSkippedAndSendsTheRest) {
  testing::TempDir dir;
  const pid_t tuner = testing::Spawn({SPINTUNE_TUNER_BIN, "--listen", "127.0.0.1:0", "--db",
                                      dir.File("tuner.db"), "--shutdown-deadline", "2"},
                                     dir.File("t.out"), dir.File("t.err"));
  const std::string address = testing::WaitForLine(dir.File("t.out"), "listening on ");
  ASSERT_FALSE(address.empty()) << testing::Slurp(dir.File("t.err"));
  auto run = [&](uint64_t max_samples) {
    return testing::Run({SPINTUNE_AGENT_BIN, "--tuner", address, "--agent-id", "resumer",
                         "--source", "sim:microwatt-100mhz", "--seed", "3", "--max-samples",
                         std::to_string(max_samples), "--batch-size", "500", "--state-dir",
                         dir.File("state"), "--give-up-after", "20"},
                        dir.path().string());
  };
  auto first = run(3000);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_EQ(first.err.find("resumed agent id"), std::string::npos) << first.err;
  auto second = run(5000);
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_NE(second.err.find("resumed agent id resumer: an earlier run sent the stream's first 6 "
                            "batches (3000 samples; 0 of them still in the spool, resent now); "
                            "this run skips them and sends the stream from sample 3001 to 5000"),
            std::string::npos)
      << second.err;
  EXPECT_NE(second.err.find("done samples=2000 skipped=3000 batches_acked=4 "), std::string::npos)
      << second.err;
  kill(tuner, SIGINT);
  EXPECT_EQ(testing::WaitExit(tuner), 0);
  auto store = Store::Open(dir.File("tuner.db"), {}, OpenMode::kReadOnly);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(StoredSamples(store->get(), "resumer"), 5000u);
}

}  // namespace
}  // namespace spintune
