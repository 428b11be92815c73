// How spintune-agent ends when its tables cannot reach the driver (issue 15
// item 1): a destination that cannot be written is refused at start (exit
// 2, one line); tables that arrive and are all refused or fail to write end
// the run with exit 1 and "no table was applied", and the log says which.
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/temp_dir.h"

namespace spintune {
namespace {

TEST(AgentExit, ASinkThatCannotBeWrittenIsRefusedAtStart) {
  testing::TempDir dir;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"file:/nonexistent-dir/mmc0.bin", "directory /nonexistent-dir does not exist"},
      {"attr:/sys/kernel/spintune/{device}/no-such-table",
       "/sys/kernel/spintune/mmc0/no-such-table does not exist"},
  };
  for (const auto& [sink, says] : cases) {
    // 127.0.0.1:9 is never dialled: the sink is checked first.
    auto r = testing::Run({SPINTUNE_AGENT_BIN, "--tuner", "127.0.0.1:9", "--source",
                           "sim:litex-rocket-50mhz-slowcard", "--sink", sink, "--state-dir", "",
                           "--max-samples", "100"},
                          dir.path().string());
    EXPECT_EQ(r.exit_code, 2) << sink << "\n" << r.err;
    EXPECT_NE(r.err.find("spintune-agent: --sink: "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("session"), std::string::npos) << "it never started: " << r.err;
  }
}

TEST(AgentExit, TablesThatAllFailToApplyEndTheRunWithExitOne) {
  testing::TempDir dir;
  const pid_t tuner = testing::Spawn(
      {SPINTUNE_TUNER_BIN, "--listen", "127.0.0.1:0", "--db", dir.File("t.db"),
       "--refit-samples", "2000", "--shutdown-deadline", "2"},
      dir.File("tuner.out"), dir.File("tuner.err"));
  const std::string address = testing::WaitForLine(dir.File("tuner.out"), "listening on ");
  ASSERT_FALSE(address.empty()) << testing::Slurp(dir.File("tuner.err"));
  // The slow card's fit spins; this board allows only the interrupt.
  auto refused = testing::Run(
      {SPINTUNE_AGENT_BIN, "--tuner", address, "--agent-id", "irq-only", "--source",
       "sim:litex-rocket-50mhz-slowcard", "--sink", "file:" + dir.File("mmc0.bin"),
       "--allow-strategies", "irq", "--state-dir", "", "--max-samples", "6000",
       "--give-up-after", "20"},
      dir.path().string());
  EXPECT_EQ(refused.exit_code, 1) << refused.err;
  EXPECT_NE(refused.err.find("refused policy version="), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("spintune-agent: no table was applied: "), std::string::npos)
      << refused.err;
  EXPECT_NE(refused.err.find("applied_version=0 tables_refused="), std::string::npos)
      << refused.err;
  // The same board without the local bound applies its table: exit 0.
  auto applied = testing::Run(
      {SPINTUNE_AGENT_BIN, "--tuner", address, "--agent-id", "any-wait", "--source",
       "sim:litex-rocket-50mhz-slowcard", "--sink", "file:" + dir.File("mmc0.bin"),
       "--state-dir", "", "--max-samples", "6000", "--give-up-after", "20"},
      dir.path().string());
  EXPECT_EQ(applied.exit_code, 0) << applied.err;
  EXPECT_NE(applied.err.find("tables_refused=0 table_write_failures=0"), std::string::npos)
      << applied.err;
  kill(tuner, SIGTERM);
  EXPECT_EQ(testing::WaitExit(tuner), 0);
}

}  // namespace
}  // namespace spintune
