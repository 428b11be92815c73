// Live capture on this machine's kernel. Needs root and tracefs; skips with a
// message otherwise. Real O_DIRECT I/O on the root disk must give one
// completion sample per request the kernel counts in /sys/block/*/stat, and
// dispatch samples for the disk's IRQ.
#include "agent/live_trace.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <thread>

#include "agent/io_load.h"
#include "agent/tracefs_instance.h"
#include "common/file_util.h"
#include "gtest/gtest.h"

namespace spintune {
namespace {

bool CanTrace(std::string* why) {
  if (geteuid() != 0) {
    *why = "needs root";
    return false;
  }
  auto root = TracefsInstance::MountPoint();
  if (!root.ok()) {
    *why = std::string(root.status().message());
    return false;
  }
  return true;
}

#define SKIP_UNLESS_TRACEFS()                                   \
  do {                                                          \
    std::string why;                                            \
    if (!CanTrace(&why)) GTEST_SKIP() << "live capture: " << why; \
  } while (0)

uint64_t MonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// Requests the kernel completed on `disk`: reads + writes + discards + flushes.
uint64_t CompletedRequests(const std::string& disk) {
  std::ifstream in("/sys/block/" + disk + "/stat");
  uint64_t f[17] = {0};
  for (int i = 0; i < 17 && (in >> f[i]); ++i) {
  }
  return f[0] + f[4] + f[11] + f[15];
}


TEST(LiveTraceTest, CompletionsMatchTheKernelsRequestCount) {
  SKIP_UNLESS_TRACEFS();
  const std::string disk = DiskOf("/var/tmp/");
  ASSERT_FALSE(disk.empty()) << "no block disk behind /var/tmp";
  auto live = LiveTrace::Start({disk}, CorrelatorOptions{});
  ASSERT_TRUE(live.ok()) << live.status();
  const std::string instance = (*live)->instance().path();
  EXPECT_TRUE(PathExists(instance));

  // The flush-sequence ends the reader has counted once it has read past
  // the mono-clock time `t`.
  auto flush_ends_at = [&](uint64_t t) {
    const absl::Time deadline = absl::Now() + absl::Seconds(5);
    while ((*live)->stats().correlator.last_ts_ns < t && absl::Now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return (*live)->stats().correlator.flush_sequence_ends;
  };
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const uint64_t t0 = MonotonicNs();
  const uint64_t before = CompletedRequests(disk);
  const uint64_t flush_ends_before = flush_ends_at(t0);
  IoLoadOptions load;
  load.path = "/var/tmp/spintune-live-test.bin";
  load.file_bytes = 32ull << 20;
  load.sizes = {4096, 65536};
  load.write_share = 0.3;
  load.fsync_every = 8;
  load.threads = 2;
  load.duration = absl::Seconds(2);
  auto done = RunIoLoad(load);
  ASSERT_TRUE(done.ok()) << done.status();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const uint64_t after = CompletedRequests(disk);
  const uint64_t t1 = MonotonicNs();
  const uint64_t flush_ends_after = flush_ends_at(t1);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // let the reader drain

  std::deque<CompletionEvent> completions;
  std::deque<DispatchEvent> dispatches;
  (*live)->Take(&completions, &dispatches, absl::ZeroDuration());
  uint64_t in_window = 0;
  for (const auto& c : completions) {
    EXPECT_EQ(c.device, disk);
    if (c.end_ns > t0 && c.end_ns <= t1) ++in_window;  // the instance runs on the mono clock
  }
  const uint64_t kernel = after - before;
  const LiveTraceStats st = (*live)->stats();
  EXPECT_EQ(st.lost_events, 0u);
  ASSERT_GT(kernel, 1000u) << "the load did too little I/O to compare";
  // Every fdatasync also completes a data-less preflush write that the
  // driver never sees (the block layer issues a flush request in its place);
  // the kernel counts it as a write. The correlator counts those apart.
  const uint64_t kernel_only = flush_ends_after - flush_ends_before;
  EXPECT_GT(kernel_only, 0u);
  EXPECT_NEAR(static_cast<double>(in_window + kernel_only), static_cast<double>(kernel),
              0.01 * static_cast<double>(kernel))
      << "traced " << in_window << " completions + " << kernel_only
      << " preflush ends, the kernel counted " << kernel
      << " (loadgen: " << done->reads << " reads, " << done->writes << " writes, " << done->fsyncs
      << " fsyncs)";

  // Dispatch samples for the disk's IRQ, with handler and wake times.
  ASSERT_GT(dispatches.size(), 100u);
  uint64_t woken = 0;
  for (const auto& d : dispatches) {
    EXPECT_EQ(d.device, disk);
    EXPECT_FALSE(d.irq_name.empty());
    EXPECT_LT(d.handler_ns, 10'000'000u);
    if (d.wake_ns) ++woken;
  }
  EXPECT_GT(woken, dispatches.size() / 10) << "the O_DIRECT waiters sleep on the IRQ";

  live->reset();
  EXPECT_FALSE(PathExists(instance)) << "the instance is removed on exit";
}

TEST(LiveTraceTest, StaleInstancesOfDeadAgentsAreRemoved) {
  SKIP_UNLESS_TRACEFS();
  auto root = TracefsInstance::MountPoint();
  ASSERT_TRUE(root.ok());
  // Above the largest pid_max (2^22): no such process can exist.
  const std::string stale = *root + "/instances/spintune-4194305";
  ASSERT_EQ(mkdir(stale.c_str(), 0750), 0);
  const std::string mine = *root + "/instances/spintune-" + std::to_string(getpid());
  EXPECT_GE(TracefsInstance::RemoveStaleInstances(*root, "spintune"), 1);
  EXPECT_FALSE(PathExists(stale));
}

TEST(LiveTraceTest, WithoutRootTheErrorSaysWhatToDo) {
  SKIP_UNLESS_TRACEFS();
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(3);
    auto t = TracefsInstance::Open(TracefsOptions{});
    const bool clear = !t.ok() && t.status().code() == absl::StatusCode::kFailedPrecondition &&
                       std::string(t.status().message()).find("root") != std::string::npos;
    _exit(clear ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(LiveTraceTest, UnknownDevicesAndEventsAreRefused) {
  SKIP_UNLESS_TRACEFS();
  TracefsOptions o;
  o.required = {"nosuchsystem/nosuchevent"};
  auto t = TracefsInstance::Open(o);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace spintune
