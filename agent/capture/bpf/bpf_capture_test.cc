// The agent in bpf mode owns its programs only through file descriptors
// (root and BPF; skips otherwise): while it runs, `bpftool prog` lists the
// capture's programs (named stc_*); after a `kill -9` none is left.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

#include "absl/time/clock.h"
#include "agent/capture/capture.h"
#include "agent/live_trace.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/subprocess.h"
#include "tests/testing/temp_dir.h"

namespace spintune {
namespace {

// Names of the loaded programs of ours (stc_*), from `bpftool -j prog show`.
std::vector<std::string> OurPrograms() {
  FILE* p = popen(SPINTUNE_BPFTOOL " -j prog show 2>/dev/null", "r");
  if (p == nullptr) return {"<bpftool failed>"};
  std::string text;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) text.append(buf, n);
  pclose(p);
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  std::vector<std::string> names;
  if (!j.is_array()) return {"<unparsable bpftool output>"};
  for (const auto& prog : j) {
    const std::string name = prog.value("name", "");
    if (name.rfind("stc_", 0) == 0) names.push_back(name);
  }
  return names;
}

TEST(BpfCaptureTest, KillDashNineLeavesNoProgramAttached) {
  if (geteuid() != 0) GTEST_SKIP() << "bpf capture needs root";
  const CaptureSupport s = ProbeCaptureSupport();
  if (!s.bpf_built || !s.bpf_syscall || !s.btf) GTEST_SKIP() << "no bpf here: " << s.detail;
  const std::string disk = DiskOf("/var/tmp/");
  if (disk.empty()) GTEST_SKIP() << "no block disk behind /var/tmp";
  // The kernel frees a closed capture's programs shortly after its links.
  auto none_within = [](absl::Duration d) {
    std::vector<std::string> left = OurPrograms();
    for (const absl::Time deadline = absl::Now() + d; !left.empty() && absl::Now() < deadline;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      left = OurPrograms();
    }
    return left;
  };
  ASSERT_TRUE(none_within(absl::Seconds(5)).empty()) << "another capture is running";

  testing::TempDir dir;
  std::ofstream(dir.File("p.json")) << R"({"irq_cpu_ns": 8000, "irq_wake_ns": 40000,
      "poll_read_ns": 200, "timer_cpu_ns": 15000, "timer_wake_ns": 15000})";
  // No tuner to reach: the agent keeps capturing into its spool.
  const pid_t agent = testing::Spawn(
      {SPINTUNE_AGENT_BIN, "--tuner", "127.0.0.1:1", "--source", "tracefs:" + disk, "--capture",
       "bpf", "--platform", dir.File("p.json"), "--state-dir", dir.File("state")},
      dir.File("agent.out"), dir.File("agent.err"));
  std::vector<std::string> running;
  for (const absl::Time deadline = absl::Now() + absl::Seconds(15);
       running.size() < 9 && absl::Now() < deadline;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    running = OurPrograms();
  }
  ASSERT_GE(running.size(), 9u) << "block, irq, softirq and sched programs attached\n"
                                << testing::Slurp(dir.File("agent.err"));
  ASSERT_EQ(kill(agent, SIGKILL), 0);
  EXPECT_EQ(testing::WaitExit(agent), -1);
  const std::vector<std::string> left = none_within(absl::Seconds(5));
  EXPECT_TRUE(left.empty()) << left.size() << " programs left, first " << left.front();
}

}  // namespace
}  // namespace spintune
