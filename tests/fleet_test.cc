// Issue 14: tuners on a shared PostgreSQL database (docs/deploy.md). The
// binaries as an operator runs them, on the throw-away cluster of the tests
// (storage/pg_test_cluster.h): start errors, the CLI on the tuners' database,
// and failover between two tuners with agents streaming.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "storage/pg_test_cluster.h"
#include "storage/store.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/temp_dir.h"

namespace spintune {
namespace {

constexpr uint64_t kSamples = 20000;
constexpr uint64_t kBatch = 250;

std::vector<std::string> AgentArgs(const std::string& tuners, const std::string& id,
                                   const std::string& state_dir) {
  return {SPINTUNE_AGENT_BIN, "--tuner", tuners, "--agent-id", id,
          "--source", "sim:microwatt-100mhz", "--seed", "3",
          "--max-samples", std::to_string(kSamples), "--batch-size", std::to_string(kBatch),
          "--rate", "4000", "--give-up-after", "30", "--state-dir", state_dir};
}

// Lines of `text` that are not empty.
int Lines(const std::string& text) {
  return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

class Fleet : public ::testing::Test {
 protected:
  void SetUp() override {
    SPINTUNE_POSTGRES_OR_SKIP(dir);
    socket_dir_ = dir;
    auto uri = FreshPostgresDatabase();
    ASSERT_TRUE(uri.ok()) << uri.status();
    db_ = *uri;
  }
  void TearDown() override {
    for (pid_t pid : tuners_) {
      kill(pid, SIGKILL);
      testing::WaitExit(pid);
    }
  }
  // Starts a tuner on the database; its address.
  std::string StartTuner(const std::string& name) {
    tuners_.push_back(testing::Spawn({SPINTUNE_TUNER_BIN, "--listen", "127.0.0.1:0", "--db", db_,
                                      "--shutdown-deadline", "2", "--refit-samples", "4000"},
                                     dir_.File(name + ".out"), dir_.File(name + ".err")));
    const std::string address =
        testing::WaitForLine(dir_.File(name + ".out"), "listening on ", tuners_.back());
    EXPECT_FALSE(address.empty()) << testing::Slurp(dir_.File(name + ".err"));
    return address;
  }

  testing::TempDir dir_;
  std::string socket_dir_;
  std::string db_;
  std::vector<pid_t> tuners_;
};

// The exact commands: an unreachable server and a wrong password each give
// one line on stderr, without the password, and exit code 1, at start.
TEST_F(Fleet, ATunerRefusesAnUnreachableOrRefusingDatabaseInOneLine) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"postgresql://spintune:hunter2@127.0.0.1:1/fleet?connect_timeout=2",
       "cannot connect to PostgreSQL postgresql://spintune:***@127.0.0.1:1/fleet"},
      {"postgresql://spintune_pw:hunter2@/postgres?host=" + socket_dir_,
       "password authentication failed for user \"spintune_pw\""},
  };
  for (const auto& [db, needle] : cases) {
    const std::vector<std::string> argv = {SPINTUNE_TUNER_BIN, "--listen", "127.0.0.1:0",
                                           "--require-tokens", "--db", db};
    const testing::RunResult r = testing::Run(argv, dir_.path().string());
    EXPECT_EQ(r.exit_code, 1) << db << "\n" << r.err;
    EXPECT_EQ(Lines(r.err), 1) << db << "\n" << r.err;
    EXPECT_EQ(r.err.rfind("spintune-tuner: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("hunter2"), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "") << "it never listened";
  }
  // The CLI reading such a database: the same line, exit 1.
  const testing::RunResult cli = testing::Run({SPINTUNE_CLI_BIN, "--db", cases[0].first, "targets"},
                                              dir_.path().string());
  EXPECT_EQ(cli.exit_code, 1) << cli.err;
  EXPECT_EQ(Lines(cli.err), 1) << cli.err;
  EXPECT_NE(cli.err.find(cases[0].second), std::string::npos) << cli.err;
}

// Issue 14 item 3: tokens, profiles, reports and headers work on a
// PostgreSQL database as on SQLite: an agent's run stored by the tuner,
// then the CLI's database commands on it, reading and writing.
TEST_F(Fleet, TheCliWorksOnThePostgresDatabase) {
  const std::string address = StartTuner("t");
  ASSERT_FALSE(address.empty());
  testing::RunResult agent =
      testing::Run(AgentArgs(address, "board-1", dir_.File("state")), dir_.path().string());
  ASSERT_EQ(agent.exit_code, 0) << agent.err;
  auto cli = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {SPINTUNE_CLI_BIN, "--db", db_});
    testing::RunResult r = testing::Run(args, dir_.path().string());
    EXPECT_EQ(r.exit_code, 0) << args[3] << ": " << r.err;
    return r.out;
  };
  EXPECT_NE(cli({"targets"}).find("board-1"), std::string::npos);
  EXPECT_NE(cli({"policy", "board-1", "--format", "json"}).find("\"entries\""), std::string::npos);
  cli({"header", "board-1", "-o", dir_.File("board1.h")});
  EXPECT_NE(testing::Slurp(dir_.File("board1.h")).find("spintune"), std::string::npos);
  cli({"report", "--target", "board-1", "-o", dir_.File("r.html")});
  EXPECT_NE(testing::Slurp(dir_.File("r.html")).find("board-1"), std::string::npos);
  EXPECT_EQ(cli({"tokens", "add", "b1", "--target", "board-1"}).rfind("st_", 0), 0u);
  cli({"tokens", "revoke", "b1"});
  EXPECT_NE(cli({"tokens", "list"}).find("b1"), std::string::npos);
  cli({"profiles", "save", "v1", "--target", "board-1", "--note", "on postgres"});
  EXPECT_NE(cli({"profiles", "list"}).find("on postgres"), std::string::npos);
  cli({"profiles", "export", "v1", "-o", dir_.File("v1.json")});
  cli({"profiles", "import", dir_.File("v1.json"), "--name", "v1-copy"});
  cli({"profiles", "rollback", "board-1", "--to", "v1"});
  auto store = Store::Open(db_, {}, OpenMode::kReadOnly);
  ASSERT_TRUE(store.ok()) << store.status();
  auto t = (*store)->FindTarget("board-1");
  ASSERT_TRUE(t.ok() && t->has_value());
  EXPECT_EQ((*t)->pinned_version, (*t)->current_version) << "the rollback pinned it";
  EXPECT_EQ((*store)->ListProfiles()->size(), 2u);
}

// Two tuners on one PostgreSQL database, agents streaming through
// `--tuner A,B` (half of them B,A). A is killed (-9) mid-stream: every agent
// finishes on B, every sample is stored exactly once, and the tables of a
// target were fitted one refit at a time (no two versions on the same
// evidence). The CLI reads the same database.
TEST_F(Fleet, TwoTunersOnePostgresAgentsMoveOnWhenOneIsKilled) {
  constexpr int kAgents = 50;
  const std::string a = StartTuner("a");
  const std::string b = StartTuner("b");
  ASSERT_FALSE(a.empty() || b.empty());
  auto store = Store::Open(db_, {}, OpenMode::kReadOnly);
  ASSERT_TRUE(store.ok()) << store.status();
  std::vector<pid_t> agents;
  for (int i = 0; i < kAgents; ++i) {
    const std::string id = absl::StrCat("board-", i);
    agents.push_back(testing::Spawn(AgentArgs(i % 2 ? b + "," + a : a + "," + b, id,
                                              dir_.File("state-" + id)),
                                    dir_.File(id + ".out"), dir_.File(id + ".err")));
  }
  auto stored = [&] {
    uint64_t sum = 0;
    auto targets = (*store)->ListTargets();
    if (targets.ok()) {
      for (const auto& t : *targets) sum += t.total_samples;
    }
    return sum;
  };
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (stored() < kAgents * kSamples / 4 && absl::Now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(kill(tuners_[0], SIGKILL), 0);
  EXPECT_EQ(testing::WaitExit(tuners_[0]), -1);
  tuners_.erase(tuners_.begin());
  EXPECT_LT(stored(), kAgents * kSamples) << "killed too late to test anything";
  int moved = 0;
  for (int i = 0; i < kAgents; ++i) {
    const std::string id = absl::StrCat("board-", i);
    EXPECT_EQ(testing::WaitExit(agents[i]), 0) << testing::Slurp(dir_.File(id + ".err"));
    moved += testing::Slurp(dir_.File(id + ".err")).find("moving on to tuner " + b) !=
             std::string::npos;
  }
  EXPECT_GE(moved, 1) << "no agent was on the killed tuner";

  auto targets = (*store)->ListTargets();
  ASSERT_TRUE(targets.ok()) << targets.status();
  ASSERT_EQ(targets->size(), static_cast<size_t>(kAgents));
  for (const auto& t : *targets) {
    EXPECT_EQ(t.total_samples, kSamples) << t.agent_id;
    EXPECT_EQ(t.last_seq, kSamples / kBatch) << t.agent_id;
    // Fitted version by version, each on more evidence than the one before:
    // no two tuners stored a version of the same refit.
    uint64_t samples = 0;
    for (uint64_t v = 1; v <= t.current_version; ++v) {
      auto table = (*store)->LoadPolicy(t.id, v);
      ASSERT_TRUE(table.ok() && table->has_value()) << t.agent_id << " v" << v;
      if ((*table)->origin != "fitted") continue;
      EXPECT_GT((*table)->TotalSamples(), samples) << t.agent_id << " v" << v;
      samples = (*table)->TotalSamples();
    }
  }
  const testing::RunResult cli =
      testing::Run({SPINTUNE_CLI_BIN, "--db", db_, "targets"}, dir_.path().string());
  EXPECT_EQ(cli.exit_code, 0) << cli.err;
  EXPECT_NE(cli.out.find("board-49"), std::string::npos) << cli.out;
  kill(tuners_[0], SIGINT);
  EXPECT_EQ(testing::WaitExit(tuners_[0]), 0);
  tuners_.clear();
}

// The database lost mid-run (its server stopped as by a crash, then back
// after 3 s): the tuner refuses the batches it cannot store, the agent keeps
// them spooled and resends, and once the server is back everything is
// stored exactly once.
TEST_F(Fleet, ATunerRefusesBatchesWhileItsDatabaseIsLostAndRecovers) {
  auto cluster = PrivatePostgresCluster::Start();
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto uri = FreshPostgresDatabase((*cluster)->socket_dir());
  ASSERT_TRUE(uri.ok()) << uri.status();
  db_ = *uri;
  const std::string address = StartTuner("t");
  ASSERT_FALSE(address.empty());
  const pid_t agent =
      testing::Spawn(AgentArgs(address, "survivor", dir_.File("state")), dir_.File("agent.out"),
                     dir_.File("agent.err"));
  auto stored = [&] {
    auto store = Store::Open(db_, {}, OpenMode::kReadOnly);
    if (!store.ok()) return uint64_t{0};
    auto t = (*store)->FindTarget("survivor");
    return t.ok() && t->has_value() ? (*t)->total_samples : 0;
  };
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (stored() < kSamples / 4 && absl::Now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE((*cluster)->Pause().ok());
  std::this_thread::sleep_for(std::chrono::seconds(3));
  ASSERT_TRUE((*cluster)->Resume().ok());
  EXPECT_EQ(testing::WaitExit(agent), 0) << testing::Slurp(dir_.File("agent.err"));
  const std::string log = testing::Slurp(dir_.File("t.err"));
  EXPECT_NE(log.find("storing"), std::string::npos) << "no batch was refused:\n" << log;
  auto store = Store::Open(db_, {}, OpenMode::kReadOnly);
  ASSERT_TRUE(store.ok()) << store.status();
  auto t = (*store)->FindTarget("survivor");
  ASSERT_TRUE(t.ok() && t->has_value());
  EXPECT_EQ((*t)->total_samples, kSamples);
  EXPECT_EQ((*t)->last_seq, kSamples / kBatch);
  kill(tuners_[0], SIGINT);
  EXPECT_EQ(testing::WaitExit(tuners_[0]), 0) << testing::Slurp(dir_.File("t.err"));
  tuners_.clear();
}

}  // namespace
}  // namespace spintune
