// The fault matrix: a real tuner and three real agents (separate processes,
// spools on disk; a simulated board, a CSV and a trace replay, all paced)
// behind a TCP proxy on loopback; at 24 seeded random points the tuner or an
// agent is killed with SIGKILL and restarted, every connection is cut, or the
// tuner and an agent are both killed and the agent is restarted while the
// tuner is still down (issue #17 item 1). When the agents have finished,
// every target holds exactly the samples of its source (nothing lost,
// nothing doubled), its batch sequence has no gap, and each agent ended on
// the target's current policy version.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <random>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "storage/store.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/tcp_proxy.h"
#include "tests/testing/free_port.h"
#include "tests/testing/source_files.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/wait_for.h"

namespace spintune {
namespace {

constexpr int kAgents = 3;
constexpr uint64_t kSamples = 150000;  // per agent; the CSV and the trace hold as many
constexpr uint64_t kBatch = 500;
constexpr int kFaults = 24;

// Still running? Reaps it when it has exited, storing the exit code.
bool Running(pid_t pid, int* exit_code) {
  int status = 0;
  const pid_t r = waitpid(pid, &status, WNOHANG);
  if (r == 0) return true;
  *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return false;
}

class FaultMatrix : public ::testing::Test {
 protected:
  pid_t StartTuner() {
    return testing::Spawn({SPINTUNE_TUNER_BIN, "--listen", absl::StrCat("127.0.0.1:", tuner_port_),
                           "--db", dir_.File("tuner.db"), "--refit-samples", "20000",
                           "--log-level", "warn"},
                          dir_.File("tuner.out"), dir_.File(absl::StrCat("tuner", ++tuner_runs_, ".err")));
  }
  // Agent 0: a simulated board; 1: a CSV; 2: a replayed block trace.
  pid_t StartAgent(int i) {
    std::vector<std::string> args = {
        SPINTUNE_AGENT_BIN, "--tuner", absl::StrCat("127.0.0.1:", proxy_->port()), "--agent-id",
        absl::StrCat("agent-", i), "--max-samples", absl::StrCat(kSamples), "--batch-size",
        absl::StrCat(kBatch), "--rate", "15000", "--state-dir", dir_.File("state"),
        "--give-up-after", "60"};
    args.insert(args.end(), sources_[i].begin(), sources_[i].end());
    return testing::Spawn(args, dir_.File(absl::StrCat("agent", i, ".out")),
                          dir_.File(absl::StrCat("agent", i, ".err")));
  }

  testing::TempDir dir_;
  std::vector<std::vector<std::string>> sources_ =
      testing::DeterministicSources(dir_.path().string(), kSamples);
  int tuner_port_ = testing::FreePort();
  int tuner_runs_ = 0;
  std::unique_ptr<testing::TcpProxy> proxy_;
};

TEST_F(FaultMatrix, KillsRestartsAndDropsLoseAndDoubleNothing) {
  proxy_ = std::make_unique<testing::TcpProxy>(tuner_port_);
  pid_t tuner = StartTuner();
  pid_t agents[kAgents];
  int exit_codes[kAgents] = {-2, -2, -2};
  for (int i = 0; i < kAgents; ++i) agents[i] = StartAgent(i);

  std::mt19937 rng(20261130);
  std::uniform_int_distribution<int> pause_ms(100, 400);
  std::ostringstream log;
  int mid_stream = 0;
  for (int k = 0; k < kFaults; ++k) {
    std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms(rng)));
    bool any_running = false;
    for (int i = 0; i < kAgents; ++i) {
      if (exit_codes[i] == -2 && !Running(agents[i], &exit_codes[i])) {
        ASSERT_EQ(exit_codes[i], 0) << "agent " << i << " failed:\n"
                                    << testing::Slurp(dir_.File(absl::StrCat("agent", i, ".err")));
      }
      any_running |= exit_codes[i] == -2;
    }
    if (any_running) ++mid_stream;
    // The first faults restart each agent during a tuner outage (each kind
    // of source); the rest are drawn.
    const int kind = k < kAgents ? 2 : static_cast<int>(rng() % 4);
    switch (kind) {
      case 0: {
        log << k << ": kill -9 tuner\n";
        kill(tuner, SIGKILL);
        waitpid(tuner, nullptr, 0);
        tuner = StartTuner();
        break;
      }
      case 1: {
        const int i = static_cast<int>(rng() % kAgents);
        if (exit_codes[i] != -2) {
          log << k << ": agent " << i << " already done\n";
          break;
        }
        log << k << ": kill -9 agent " << i << "\n";
        kill(agents[i], SIGKILL);
        waitpid(agents[i], nullptr, 0);
        agents[i] = StartAgent(i);
        break;
      }
      case 2: {
        const int i = k < kAgents ? k : static_cast<int>(rng() % kAgents);
        if (exit_codes[i] != -2) {
          log << k << ": agent " << i << " already done\n";
          break;
        }
        log << k << ": kill -9 tuner and agent " << i << ", restart the agent in the outage\n";
        kill(tuner, SIGKILL);
        kill(agents[i], SIGKILL);
        waitpid(tuner, nullptr, 0);
        waitpid(agents[i], nullptr, 0);
        agents[i] = StartAgent(i);
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        tuner = StartTuner();
        break;
      }
      default:
        log << k << ": drop every connection\n";
        proxy_->DropAll();
    }
  }
  EXPECT_GE(mid_stream, 20) << "faults must hit running agents:\n" << log.str();
  std::cout << log.str() << mid_stream << " faults hit running agents\n";

  // Let every agent finish.
  const absl::Time deadline = absl::Now() + absl::Seconds(120);
  for (int i = 0; i < kAgents; ++i) {
    while (exit_codes[i] == -2 && Running(agents[i], &exit_codes[i]) && absl::Now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (exit_codes[i] == -2) {
      kill(agents[i], SIGKILL);
      waitpid(agents[i], nullptr, 0);
    }
    int tuner_exit = -2;
    EXPECT_EQ(exit_codes[i], 0) << "agent " << i << ":\n"
                                << testing::Slurp(dir_.File(absl::StrCat("agent", i, ".err")))
                                << log.str() << "tuner run " << tuner_runs_
                                << (Running(tuner, &tuner_exit)
                                        ? " is running"
                                        : absl::StrCat(" exited with ", tuner_exit))
                                << ", its log:\n"
                                << testing::Slurp(dir_.File(absl::StrCat("tuner", tuner_runs_, ".err")));
  }
  kill(tuner, SIGTERM);
  waitpid(tuner, nullptr, 0);

  auto store = Store::Open(dir_.File("tuner.db"));
  ASSERT_TRUE(store.ok()) << store.status();
  for (int i = 0; i < kAgents; ++i) {
    SCOPED_TRACE(absl::StrCat("agent ", i, "\n", log.str()));
    auto t = (*store)->FindTarget(absl::StrCat("agent-", i));
    ASSERT_TRUE(t.ok() && t->has_value());
    EXPECT_EQ((*t)->total_samples, kSamples) << "exactly what the agent generated";
    EXPECT_EQ(*(*store)->LastDurableSeq((*t)->id), kSamples / kBatch) << "no gap, no extra";
    EXPECT_EQ((*t)->dropped_samples, 0u);
    // The agent finished on the target's current table.
    const std::string err = testing::Slurp(dir_.File(absl::StrCat("agent", i, ".err")));
    EXPECT_NE(err.find(absl::StrCat("applied_version=", (*t)->current_version)), std::string::npos)
        << "current version " << (*t)->current_version << "\n" << err.substr(err.size() > 2000 ? err.size() - 2000 : 0);
  }
}

// A tuner killed at its first start while it creates its database (from the
// moment the file appears to its schema's last step; the kill comes 0-9 ms
// after the file appears, across the steps) starts on the file the next
// time and takes the same database: a board's tuner killed by a power cut
// at its first start must not be locked out of its database. (Before, a cut
// between the schema_version table and the first step left a file every
// later start refused as "not a spintune database": the fault matrix lost
// its tuner for good when its first fault came that early.)
TEST(TunerStart, AStartKilledWhileItCreatesItsDatabaseLeavesOneTheNextStartTakes) {
  for (int delay_ms = 0; delay_ms < 10; ++delay_ms) {
    SCOPED_TRACE(absl::StrCat("killed ", delay_ms, " ms after the file appeared"));
    testing::TempDir dir;
    const std::string db = dir.File("tuner.db");
    auto start = [&](const std::string& name) {
      return testing::Spawn({SPINTUNE_TUNER_BIN, "--listen", "127.0.0.1:0", "--db", db},
                            dir.File(name + ".out"), dir.File(name + ".err"));
    };
    const pid_t first = start("first");
    struct stat st;
    const bool appeared = testing::WaitFor(
        [&] { return stat(db.c_str(), &st) == 0 && st.st_size > 0; }, testing::kEventDeadline,
        absl::Microseconds(200));
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    kill(first, SIGKILL);
    EXPECT_EQ(testing::WaitExit(first), -1);
    ASSERT_TRUE(appeared) << testing::Slurp(dir.File("first.err"));
    const pid_t second = start("second");
    const std::string address =
        testing::WaitForLine(dir.File("second.out"), "listening on ", second);
    EXPECT_FALSE(address.empty()) << testing::Slurp(dir.File("second.err"));
    kill(second, SIGTERM);
    EXPECT_EQ(testing::WaitExit(second), 0) << testing::Slurp(dir.File("second.err"));
    auto store = Store::Open(db, {}, OpenMode::kReadOnly);
    EXPECT_TRUE(store.ok()) << store.status();
  }
}

}  // namespace
}  // namespace spintune
