// Live capture on this machine's kernel. Needs root and tracefs; skips with a
// message otherwise. Real O_DIRECT I/O on the root disk must give one
// completion sample per request the kernel counts in /sys/block/*/stat, and
// dispatch samples for the disk's IRQ.
#include "agent/live_trace.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "agent/io_load.h"
#include "agent/tracefs_instance.h"
#include "common/cpu_clock.h"
#include "common/file_util.h"
#include "gtest/gtest.h"
#include "tests/testing/wait_for.h"

namespace spintune {
namespace {

uint64_t AbsDiff(uint64_t a, uint64_t b) { return a > b ? a - b : b - a; }

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
  std::vector<uint64_t> handler_ns;
  for (const auto& d : dispatches) {
    EXPECT_EQ(d.device, disk);
    EXPECT_FALSE(d.irq_name.empty());
    handler_ns.push_back(d.handler_ns);
    if (d.wake_ns) ++woken;
  }
  // A handler runs for microseconds. A pairing bug (one IRQ's entry with
  // another's exit) makes many of them long; a VM whose vCPU the host takes
  // away mid-handler makes one or two long. So bound quantiles, not each one.
  std::sort(handler_ns.begin(), handler_ns.end());
  EXPECT_LT(handler_ns[handler_ns.size() / 2], 1'000'000u) << "median handler time";
  EXPECT_LT(handler_ns[handler_ns.size() * 99 / 100], 10'000'000u) << "p99 handler time";
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

// Capture windows of 400 ms in 1 s with a 200 ms drain, turned by an
// abstract clock: on from construction inside a window, starts paused at
// 400 ms, stopped 200 ms later, resumed at the next second; a turn noticed
// after its window ended waits for the next; a drain that runs into a
// window resumes at once; always() never turns.
TEST(CaptureWindowTurnsTest, TurnAtTheWindowsEdges) {
  using Turn = CaptureWindowTurns::Turn;
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  auto at = [t0](int ms) { return t0 + absl::Milliseconds(ms); };
  const WakeWindows w{absl::Milliseconds(400), absl::Seconds(1)};
  CaptureWindowTurns turns(w, absl::Milliseconds(200), at(100));
  EXPECT_FALSE(turns.off());
  EXPECT_EQ(turns.next(), at(400));
  EXPECT_EQ(turns.Next(at(399)), Turn::kNone);
  EXPECT_EQ(turns.Next(at(400)), Turn::kPauseStarts);
  EXPECT_EQ(turns.next(), at(600));
  EXPECT_EQ(turns.Next(at(600)), Turn::kStop);
  EXPECT_TRUE(turns.off());
  EXPECT_EQ(turns.next(), at(1000));
  EXPECT_EQ(turns.Next(at(1000)), Turn::kResume);
  EXPECT_FALSE(turns.off());
  EXPECT_EQ(turns.next(), at(1400));
  EXPECT_EQ(turns.Next(at(1400)), Turn::kPauseStarts);
  EXPECT_EQ(turns.Next(at(1600)), Turn::kStop);
  EXPECT_EQ(turns.Next(at(2500)), Turn::kNone) << "woken after the window: wait for the next";
  EXPECT_EQ(turns.next(), at(3000));
  EXPECT_EQ(turns.Next(at(3000)), Turn::kResume);
  EXPECT_EQ(turns.Next(at(3900)), Turn::kPauseStarts);  // late, past the window
  EXPECT_EQ(turns.Next(at(4100)), Turn::kStop);
  EXPECT_EQ(turns.next(), at(4100)) << "a drain into a window resumes at once";
  EXPECT_EQ(turns.Next(at(4100)), Turn::kResume);
  turns.ResumeFailed(at(4100));
  EXPECT_TRUE(turns.off());
  EXPECT_EQ(turns.next(), at(5000));

  CaptureWindowTurns between(w, absl::Milliseconds(200), at(700));
  EXPECT_TRUE(between.off()) << "opened between windows";
  EXPECT_EQ(between.next(), at(1000));
  CaptureWindowTurns always(WakeWindows{}, absl::ZeroDuration(), at(0));
  EXPECT_EQ(always.Next(at(123456)), Turn::kNone);
  EXPECT_FALSE(always.off());
}

TEST(WakeWindowsTest, ParsesAllOrOnEvery) {
  auto all = ParseWakeWindows("all");
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->always());
  auto w = ParseWakeWindows("1s/10s");
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->on, absl::Seconds(1));
  EXPECT_EQ(w->every, absl::Seconds(10));
  EXPECT_FALSE(w->always());
  for (const char* bad : {"", "1s", "10s/1s", "1s/1s", "50ms/1s", "x/10s", "1s/", "1/10"}) {
    auto b = ParseWakeWindows(bad);
    EXPECT_FALSE(b.ok()) << bad;
    if (!b.ok()) {
      EXPECT_NE(std::string(b.status().message()).find("--wake-windows"), std::string::npos);
    }
  }
}

// A sample is kept when its IRQ is at least the wake window inside a span
// at both ends and its requests were issued within the span.
TEST(WakeWindowsTest, DispatchesSeenWholeInASpan) {
  const uint64_t window = 20;
  const std::deque<SchedSpan> spans = {{100, 300}, {1000, UINT64_MAX}};
  auto at = [](uint64_t entry, uint64_t first_issue, std::optional<uint64_t> wake) {
    DispatchEvent d;
    d.entry_ns = entry;
    d.first_issue_ns = first_issue;
    d.wake_ns = wake;
    return d;
  };
  EXPECT_TRUE(DispatchSeenWhole(at(150, 140, 5), spans, window));
  EXPECT_TRUE(DispatchSeenWhole(at(120, 100, std::nullopt), spans, window));  // both edges
  EXPECT_TRUE(DispatchSeenWhole(at(280, 200, std::nullopt), spans, window));
  EXPECT_TRUE(DispatchSeenWhole(at(150, UINT64_MAX, std::nullopt), spans, window));  // no request
  EXPECT_FALSE(DispatchSeenWhole(at(119, 110, 5), spans, window));   // too soon after on
  EXPECT_FALSE(DispatchSeenWhole(at(150, 99, 5), spans, window));    // issued before on
  EXPECT_FALSE(DispatchSeenWhole(at(281, 200, 1), spans, window));   // too near off, even woken fast
  EXPECT_FALSE(DispatchSeenWhole(at(500, 450, 5), spans, window));   // between spans
  EXPECT_TRUE(DispatchSeenWhole(at(5000, 4000, 5), spans, window));  // the open span
  EXPECT_FALSE(DispatchSeenWhole(at(150, 140, 5), {}, window));
}

// Two raw captures of one load, one with the sched events always on, one in
// windows of 300 ms every 750 ms: the same completions; the windowed one
// traces fewer events and keeps a share of the dispatch samples, whose wake
// latencies are distributed as the full capture's. About 4 s.
TEST(LiveTraceTest, WakeWindowsKeepCompletionsAndSampleWakes) {
  SKIP_UNLESS_TRACEFS();
  const std::string disk = DiskOf("/var/tmp/");
  ASSERT_FALSE(disk.empty()) << "no block disk behind /var/tmp";
  auto full = LiveTrace::Start({disk}, CorrelatorOptions{}, /*raw=*/true);
  ASSERT_TRUE(full.ok()) << full.status();
  WakeWindows windows;
  windows.on = absl::Milliseconds(300);
  windows.every = absl::Milliseconds(750);
  auto some = LiveTrace::Start({disk}, CorrelatorOptions{}, /*raw=*/true, windows);
  ASSERT_TRUE(some.ok()) << some.status();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  std::deque<CompletionEvent> full_c, some_c;
  std::deque<DispatchEvent> full_d, some_d;
  (*full)->Take(&full_c, &full_d, absl::ZeroDuration());
  (*some)->Take(&some_c, &some_d, absl::ZeroDuration());
  const LiveTraceStats full_before = (*full)->stats(), some_before = (*some)->stats();
  full_c.clear(), some_c.clear(), full_d.clear(), some_d.clear();
  IoLoadOptions load;
  load.path = "/var/tmp/spintune-wake-windows-test.bin";
  load.file_bytes = 16ull << 20;
  load.sizes = {4096};
  load.fsync_every = 0;
  load.threads = 2;
  load.duration = absl::Seconds(3);
  ASSERT_TRUE(RunIoLoad(load).ok());
  // Both readers drained: a few reads after the load's end, waited for
  // until both have read past its end (each reads in timestamp order).
  const uint64_t loaded_ns = MonotonicNs();
  IoLoadOptions marker = load;
  marker.threads = 1;
  marker.requests_per_second = 200;
  marker.duration = absl::Milliseconds(50);
  ASSERT_TRUE(RunIoLoad(marker).ok());
  EXPECT_TRUE(testing::WaitFor([&] {
    return (*full)->stats().correlator.last_ts_ns > loaded_ns &&
           (*some)->stats().correlator.last_ts_ns > loaded_ns;
  })) << "the readers never read past the load's end";
  (*full)->Take(&full_c, &full_d, absl::ZeroDuration());
  (*some)->Take(&some_c, &some_d, absl::ZeroDuration());
  const LiveTraceStats full_after = (*full)->stats(), some_after = (*some)->stats();
  ASSERT_GT(full_c.size(), 2000u) << "the load did too little I/O to compare";
  EXPECT_NEAR(static_cast<double>(some_c.size()), static_cast<double>(full_c.size()),
              0.01 * static_cast<double>(full_c.size()));
  // Only the sched events: the block and IRQ events are the whole disk's
  // (other tests' I/O too) and both captures trace all of them.
  const double sched_full = static_cast<double>(full_after.correlator.sched_events -
                                                full_before.correlator.sched_events);
  const double sched_some = static_cast<double>(some_after.correlator.sched_events -
                                                some_before.correlator.sched_events);
  ASSERT_GT(sched_full, 1000) << "the load woke too few tasks to compare";
  // Under load the full capture, which traces more, may lose events from
  // its buffers; any of them may have been a sched event.
  const double lost_full = static_cast<double>(full_after.lost_events - full_before.lost_events);
  // On 300 of every 750 ms: about 0.4 of them.
  EXPECT_LT(sched_some, 0.7 * (sched_full + lost_full))
      << "the sched events are off between windows";
  EXPECT_GT(sched_some, 0.15 * sched_full) << "the sched events are on in the windows";
  EXPECT_GT(some_after.dispatches_unseen, some_before.dispatches_unseen);
  EXPECT_EQ(full_after.dispatches_unseen, 0u);
  // 300 of every 750 ms, less the wake window at both ends: about a third.
  const double share = static_cast<double>(some_d.size()) / static_cast<double>(full_d.size());
  EXPECT_GT(share, 0.15) << some_d.size() << " of " << full_d.size();
  EXPECT_LT(share, 0.6) << some_d.size() << " of " << full_d.size();
  // Each dispatch the windowed capture keeps is one the full capture saw
  // too (the same IRQ, at the same CPU within a few microseconds: each
  // instance stamps its own copy of an event), and it must have measured
  // the same wake: a dispatch kept only when seen whole is not cut short by
  // a window's edge. Paired one by one, not as two distributions: the load
  // changes over the 3 s, so the windows' share of it need not have the
  // whole run's median.
  std::map<std::pair<int, uint64_t>, const DispatchEvent*> full_at;  // (cpu, entry) -> dispatch
  for (const auto& d : full_d) full_at[{d.cpu, d.entry_ns}] = &d;
  constexpr uint64_t kSameEventNs = 20'000;
  size_t paired = 0, same_wake = 0;
  std::vector<double> wake_diffs_ns;
  for (const auto& d : some_d) {
    auto it = full_at.lower_bound({d.cpu, d.entry_ns > kSameEventNs ? d.entry_ns - kSameEventNs : 0});
    const DispatchEvent* match = nullptr;
    for (; it != full_at.end() && it->first.first == d.cpu &&
           it->first.second <= d.entry_ns + kSameEventNs;
         ++it) {
      if (it->second->irq != d.irq) continue;
      if (match == nullptr || AbsDiff(it->first.second, d.entry_ns) <
                                  AbsDiff(match->entry_ns, d.entry_ns)) {
        match = it->second;
      }
    }
    if (match == nullptr) continue;
    ++paired;
    if (!d.wake_ns && !match->wake_ns) ++same_wake;
    if (d.wake_ns && match->wake_ns) {
      const double diff = std::abs(static_cast<double>(*d.wake_ns) - static_cast<double>(*match->wake_ns));
      wake_diffs_ns.push_back(diff);
      if (diff <= 2'000 + 0.02 * static_cast<double>(*match->wake_ns)) ++same_wake;
    }
  }
  ASSERT_GT(wake_diffs_ns.size(), 100u) << "too few woken dispatches to compare";
  EXPECT_GE(static_cast<double>(paired), 0.95 * static_cast<double>(some_d.size()))
      << paired << " of " << some_d.size() << " windowed dispatches found in the full capture";
  EXPECT_GE(static_cast<double>(same_wake), 0.95 * static_cast<double>(paired))
      << same_wake << " of " << paired << " paired dispatches measured the same wake (or none)";
  std::sort(wake_diffs_ns.begin(), wake_diffs_ns.end());
  std::cout << "paired " << paired << " of " << some_d.size() << ", same wake " << same_wake
            << "; |wake difference| median " << wake_diffs_ns[wake_diffs_ns.size() / 2]
            << " ns, p99 " << wake_diffs_ns[wake_diffs_ns.size() * 99 / 100] << " ns\n";
  std::cout << "sched events " << sched_some << " of " << sched_full << " (full capture lost "
            << lost_full << " events); dispatches "
            << some_d.size() << " of " << full_d.size() << "\n";
}

}  // namespace
}  // namespace spintune
