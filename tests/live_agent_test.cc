// The agent binary with a live tracefs source (root; skips otherwise): it
// removes its tracing instance when stopped by SIGINT or SIGTERM, and an
// instance left by a SIGKILLed agent is removed by the next one.
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <thread>

#include "absl/time/clock.h"
#include "agent/live_trace.h"
#include "agent/tracefs_instance.h"
#include "common/file_util.h"
#include "policy/platform_json.h"
#include "gtest/gtest.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/temp_dir.h"

namespace spintune {
namespace {


class LiveAgent : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "live capture needs root";
    auto root = TracefsInstance::MountPoint();
    if (!root.ok()) GTEST_SKIP() << "no tracefs: " << root.status().message();
    root_ = *root;
    disk_ = DiskOf("/var/tmp/");
    if (disk_.empty()) GTEST_SKIP() << "no block disk behind /var/tmp";
    std::ofstream(dir_.File("p.json")) << R"({"irq_cpu_ns": 8000, "irq_wake_ns": 40000,
        "poll_read_ns": 200, "timer_cpu_ns": 15000, "timer_wake_ns": 15000})";
  }

  // An agent capturing the disk through a tracing instance (the text
  // capture; the bpf one has no instance), with no tuner to reach (it keeps
  // retrying). What it captures meanwhile goes to its spool, so a signal
  // stops it promptly and with success even when the disk was busy.
  pid_t StartAgent() {
    return testing::Spawn({SPINTUNE_AGENT_BIN, "--tuner", "127.0.0.1:1", "--source",
                           "tracefs:" + disk_, "--capture", "text", "--platform",
                           dir_.File("p.json"), "--state-dir", dir_.File("state")},
                          dir_.File("agent.out"), dir_.File("agent.err"));
  }

  std::string InstanceOf(pid_t pid) const {
    return root_ + "/instances/spintune-" + std::to_string(pid);
  }

  bool WaitFor(const std::string& path, bool present) {
    const absl::Time deadline = absl::Now() + absl::Seconds(15);
    while (PathExists(path) != present) {
      if (absl::Now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return true;
  }

  testing::TempDir dir_;
  std::string root_, disk_;
};

TEST_F(LiveAgent, SigtermAndSigintRemoveTheInstance) {
  for (int sig : {SIGTERM, SIGINT}) {
    const pid_t pid = StartAgent();
    ASSERT_TRUE(WaitFor(InstanceOf(pid), true)) << testing::Slurp(dir_.File("agent.err"));
    ASSERT_EQ(kill(pid, sig), 0);
    EXPECT_EQ(testing::WaitExit(pid), 0) << testing::Slurp(dir_.File("agent.err"));
    EXPECT_FALSE(PathExists(InstanceOf(pid))) << "signal " << sig;
  }
}

TEST_F(LiveAgent, InstanceOfAKilledAgentIsRemovedByTheNext) {
  const pid_t victim = StartAgent();
  ASSERT_TRUE(WaitFor(InstanceOf(victim), true)) << testing::Slurp(dir_.File("agent.err"));
  ASSERT_EQ(kill(victim, SIGKILL), 0);
  EXPECT_EQ(testing::WaitExit(victim), -1);
  EXPECT_TRUE(PathExists(InstanceOf(victim))) << "SIGKILL leaves it behind";
  const pid_t next = StartAgent();
  ASSERT_TRUE(WaitFor(InstanceOf(next), true));
  EXPECT_FALSE(PathExists(InstanceOf(victim)));
  ASSERT_EQ(kill(next, SIGTERM), 0);
  EXPECT_EQ(testing::WaitExit(next), 0);
}

}  // namespace
}  // namespace spintune

namespace spintune {
namespace {

TEST_F(LiveAgent, ProbeAsJsonIsAPlatformFile) {
  auto r = testing::Run({SPINTUNE_AGENT_BIN, "--probe", "--format", "json"}, dir_.path().string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ofstream(dir_.File("probed.json")) << r.out;
  auto platform = ReadPlatformFile(dir_.File("probed.json"));
  ASSERT_TRUE(platform.ok()) << platform.status() << "\n" << r.out;
  auto cpu = platform->CpuClass("default");
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_GT(cpu->costs.irq_wake_ns, 0);
  EXPECT_GT(cpu->costs.poll_read_ns, 0);
}

}  // namespace
}  // namespace spintune
