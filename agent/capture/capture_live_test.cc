// The three captures on one live workload (root, tracefs and BPF; skips with
// a message otherwise): bpf, raw and text run at the same time on the disk
// under /var/tmp while the bundled O_DIRECT load runs, and must agree with
// each other and with the kernel's own request count (/sys/block/*/stat).
#include <time.h>
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "agent/capture/bpf/bpf_capture.h"
#include "agent/capture/capture.h"
#include "agent/io_load.h"
#include "agent/live_trace.h"
#include "agent/tracefs_instance.h"
#include "gtest/gtest.h"
#include "models/latency_histogram.h"
#include "policy/default_rule.h"

namespace spintune {
namespace {

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

std::string WhyNotLive() {
  if (geteuid() != 0) return "needs root";
  const CaptureSupport s = ProbeCaptureSupport();
  if (!s.bpf_built || !s.bpf_syscall || !s.btf || !s.tracefs || !s.raw_pipe) return s.detail;
  return "";
}

#define SKIP_UNLESS_LIVE()                                                    \
  do {                                                                        \
    const std::string why = WhyNotLive();                                     \
    if (!why.empty()) GTEST_SKIP() << "live bpf/raw/text capture: " << why;   \
  } while (0)

using Key = std::tuple<uint32_t, uint32_t>;  // opcode, size class

// One capture's view of the measured window.
struct Window {
  std::map<Key, LatencyHistogram> keys;
  std::map<Key, double> sum_ns;  // exact sums of the waits
  std::map<Key, uint64_t> irq_path, spin_path;
  uint64_t completions = 0;
  uint64_t unpaired_ends = 0;
};

// Takes what the capture has until it has counted events past `t`, then
// returns its stats.
CaptureStats StatsAt(Capture* c, CaptureOutput* out, uint64_t t) {
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  CaptureStats s;
  do {
    EXPECT_TRUE(c->Take(out, absl::Milliseconds(20)).ok());
    s = c->stats();
  } while (s.last_event_ns < t && absl::Now() < deadline);
  return s;
}

TEST(CaptureLiveTest, BpfRawAndTextAgreeWithEachOtherAndTheKernel) {
  SKIP_UNLESS_LIVE();
  const std::string disk = DiskOf("/var/tmp/");
  ASSERT_FALSE(disk.empty()) << "no block disk behind /var/tmp";
  CaptureConfig config;
  config.devices = {disk};
  config.histogram_interval = absl::ZeroDuration();  // every Take reads the maps
  std::map<std::string, std::unique_ptr<Capture>> captures;
  // At every tracepoint the kernel runs the probes in the order they were
  // registered; a later capture's timestamp includes the time the earlier
  // probes took. The first probe to read a request's fields also takes the
  // cache misses (microseconds in this VM): the BPF programs read the clock
  // before anything else, so they go first and the other two share the
  // delay of one small program.
  for (CaptureMode mode : {CaptureMode::kBpf, CaptureMode::kRaw, CaptureMode::kText}) {
    auto c = OpenCapture(mode, config);
    ASSERT_TRUE(c.ok()) << CaptureModeName(mode) << ": " << c.status();
    EXPECT_STREQ((*c)->mode(), CaptureModeName(mode));
    captures[CaptureModeName(mode)] = std::move(*c);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));

  // Window start: what each capture has up to t0 is discarded.
  const uint64_t t0 = MonotonicNs();
  const uint64_t kernel_before = CompletedRequests(disk);
  std::map<std::string, CaptureStats> before;
  std::map<std::string, CaptureOutput> outs;
  for (auto& [name, c] : captures) {
    before[name] = StatsAt(c.get(), &outs[name], t0);
    outs[name].histograms.clear();  // samples are kept and filtered by time below
  }
  IoLoadOptions load;
  load.path = "/var/tmp/spintune-capture-test.bin";
  load.file_bytes = 32ull << 20;
  load.sizes = {4096, 65536};
  load.write_share = 0.3;
  load.fsync_every = 8;
  load.threads = 2;
  load.duration = absl::Seconds(2);
  auto done = RunIoLoad(load);
  ASSERT_TRUE(done.ok()) << done.status();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const uint64_t t1 = MonotonicNs();
  const uint64_t kernel = CompletedRequests(disk) - kernel_before;
  ASSERT_GT(kernel, 2000u) << "the load did too little I/O to compare";

  std::map<std::string, Window> windows;
  for (auto& [name, c] : captures) {
    CaptureOutput& out = outs[name];
    const CaptureStats after = StatsAt(c.get(), &out, t1);
    if (name != "bpf") {
      // The readers lag: let them drain, and keep what ended in (t0, t1].
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      ASSERT_TRUE(c->Take(&out, absl::ZeroDuration()).ok());
    }
    Window& w = windows[name];
    w.unpaired_ends = after.unpaired_ends - before[name].unpaired_ends;
    for (const auto& e : out.completions) {
      ASSERT_EQ(e.device, disk);
      if (e.end_ns <= t0 || e.end_ns > t1) continue;
      w.keys[{e.opcode, SizeClassOf(e.bytes)}].Record(e.wait_ns);
      w.sum_ns[{e.opcode, SizeClassOf(e.bytes)}] += static_cast<double>(e.wait_ns);
      w.irq_path[{e.opcode, SizeClassOf(e.bytes)}] += e.path == TracePath::kIrq;
      w.spin_path[{e.opcode, SizeClassOf(e.bytes)}] += e.path == TracePath::kSpin;
      ++w.completions;
    }
    for (const auto& h : out.histograms) {
      ASSERT_EQ(h.device, disk);
      LatencyHistogram& k = w.keys[{h.opcode, h.size_class}];
      for (const auto& [index, n] : h.wait.buckets) k.AddToBucket(index, n);
      w.sum_ns[{h.opcode, h.size_class}] += static_cast<double>(h.wait.sum_ns);
      w.irq_path[{h.opcode, h.size_class}] += h.irq_path;
      w.spin_path[{h.opcode, h.size_class}] += h.spin_path;
      w.completions += h.wait.count;
    }
    EXPECT_EQ(after.lost_events, 0u) << name;
    std::cout << name << ": unpaired " << w.unpaired_ends << " lost " << after.lost_events
              << " dropped " << after.dropped << "\n";
    EXPECT_EQ(after.dropped, 0u) << name;
  }

  // Each capture: one sample per request the kernel counted (plus the
  // preflush writes the driver never sees, counted as unpaired ends).
  for (const auto& [name, w] : windows) {
    EXPECT_NEAR(static_cast<double>(w.completions + w.unpaired_ends), static_cast<double>(kernel),
                0.01 * static_cast<double>(kernel))
        << name << ": " << w.completions << " completions + " << w.unpaired_ends
        << " unpaired ends, the kernel counted " << kernel;
  }
  // Per key: the same counts and the same p50/p99 bucket as bpf.
  //
  // Running side by side skews them (the probe order above) by a near
  // constant that a capture running alone does not have: the test measures
  // it per key as the difference of the exact means and compares the
  // quantiles without it. Text timestamps are also rounded to whole
  // microseconds (trace_pipe prints µs), so every text wait is within 1 µs of
  // the raw one, and so are its quantiles.
  const Window& bpf = windows["bpf"];
  int compared = 0;
  for (const auto& [key, h] : bpf.keys) {
    if (h.total_count() < 500) continue;  // background I/O of other processes
    ++compared;
    const double bpf_mean = bpf.sum_ns.at(key) / static_cast<double>(h.total_count());
    std::string row = "opcode " + std::to_string(std::get<0>(key)) + " size class " +
                      std::to_string(std::get<1>(key)) + ":";
    for (const char* other : {"raw", "text"}) {
      const LatencyHistogram& o = windows[other].keys[key];
      const std::string what = std::string(other) + " vs bpf, opcode " +
                               std::to_string(std::get<0>(key)) + " size class " +
                               std::to_string(std::get<1>(key));
      EXPECT_NEAR(static_cast<double>(o.total_count()), static_cast<double>(h.total_count()),
                  0.01 * static_cast<double>(h.total_count()))
          << what;
      if (o.empty()) continue;
      const double skew =
          windows[other].sum_ns[key] / static_cast<double>(o.total_count()) - bpf_mean;
      EXPECT_LT(std::abs(skew), 5000.0) << what << ": mean skew " << skew << " ns";
      absl::StrAppend(&row, " ", other, " skew ", static_cast<int>(skew), " ns irq/spin ",
                      windows[other].irq_path[key], "/", windows[other].spin_path[key], " vs ",
                      bpf.irq_path.at(key), "/", bpf.spin_path.at(key), " max ",
                      o.QuantileNs(1.0), "/", h.QuantileNs(1.0));
      for (double q : {0.5, 0.99}) {
        const double a = h.QuantileNs(q), b = o.QuantileNs(q) - skew;
        const int ia = LatencyHistogram::BucketIndex(static_cast<uint64_t>(a));
        const int ib = LatencyHistogram::BucketIndex(static_cast<uint64_t>(b));
        const bool text_resolution = std::string(other) == "text" && std::abs(a - b) <= 1000.0 +
            static_cast<double>(LatencyHistogram::BucketUpperNs(ia) -
                                LatencyHistogram::BucketLowerNs(ia) + 1);
        EXPECT_TRUE(std::abs(ia - ib) <= 1 || text_resolution)
            << what << ": q" << q << " bpf " << a << " ns, " << other << " " << b
            << " ns after removing the skew of " << skew << " ns (" << std::abs(ia - ib)
            << " buckets apart)";
        absl::StrAppend(&row, " p", static_cast<int>(q * 100), " ", static_cast<int>(a), "/",
                        static_cast<int>(b));
      }
    }
    std::cout << row << "\n";
  }
  EXPECT_GE(compared, 3) << "the load's reads and writes of 4 and 64 KiB";
}

TEST(CaptureLiveTest, MissingTracepointsAreReportedByNameAndSkipped) {
  SKIP_UNLESS_LIVE();
  const std::string disk = DiskOf("/var/tmp/");
  ASSERT_FALSE(disk.empty());
  CaptureConfig config;
  config.devices = {disk};
  auto bpf = OpenCapture(CaptureMode::kBpf, config);
  ASSERT_TRUE(bpf.ok()) << bpf.status();
  const CaptureStats s = (*bpf)->stats();
  // The program has programs for MMC and SPI too; a kernel without those
  // subsystems (this VM has neither) lacks their tracepoints.
  const std::set<std::string> absent =
      MissingBtfTracepoints({"mmc_request_start", "spi_transfer_start", "block_rq_issue"});
  EXPECT_EQ(absent.count("block_rq_issue"), 0u);
  for (const std::string& event : absent) {
    const std::string system = event.substr(0, event.find('_'));
    EXPECT_NE(std::find(s.missing_tracepoints.begin(), s.missing_tracepoints.end(),
                        system + ":" + event),
              s.missing_tracepoints.end())
        << event;
  }
  // The tracing instance skips an optional event it lacks the same way.
  TracefsOptions o;
  o.events = {"nosuchsystem/nosuchevent", "block/block_rq_issue"};
  auto t = TracefsInstance::Open(o);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->missing_events(), std::vector<std::string>{"nosuchsystem/nosuchevent"});
  EXPECT_EQ((*t)->enabled_events(), std::vector<std::string>{"block/block_rq_issue"});
}

}  // namespace
}  // namespace spintune
