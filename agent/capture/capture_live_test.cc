// The three captures on one live workload (root, tracefs and BPF; skips with
// a message otherwise): bpf, raw and text run at the same time on the disk
// under /var/tmp while the bundled O_DIRECT load runs, and must agree with
// each other and with the kernel's own request count (/sys/block/*/stat).
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/capture/bpf/bpf_capture.h"
#include "agent/capture/capture.h"
#include "agent/io_load.h"
#include "agent/live_trace.h"
#include "agent/tracefs_instance.h"
#include "agent/tracefs_source.h"
#include "common/cpu_clock.h"
#include "common/file_util.h"
#include "gtest/gtest.h"
#include "models/latency_histogram.h"
#include "policy/default_rule.h"
#include "tests/testing/capture_windows.h"
#include "tests/testing/wait_for.h"

namespace spintune {
namespace {

// Requests the kernel completed on `disk`, by direction (/sys/block/*/stat).
struct DiskStat {
  uint64_t reads = 0, writes = 0, discards = 0, flushes = 0;
};
DiskStat ReadDiskStat(const std::string& disk) {
  std::ifstream in("/sys/block/" + disk + "/stat");
  uint64_t f[17] = {0};
  for (int i = 0; i < 17 && (in >> f[i]); ++i) {
  }
  return {f[0], f[4], f[11], f[15]};
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

Key KeyOf(const CompletionEvent& e) { return {e.opcode, SizeClassOf(e.bytes)}; }

// One capture's view of the measured window.
struct Window {
  std::map<Key, LatencyHistogram> keys;      // every completion: samples and histograms
  std::vector<CompletionEvent> requests;     // the completions that came one by one
  uint64_t unpaired_ends = 0;
  uint64_t unended_starts = 0;
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

// Two captures agree on a request when their waits differ by the offset
// within this (plus their timestamps' resolution); at most this share of
// the requests may differ by more (the later probe's start delayed by an
// interrupt; raw and text pair requests without a position, flushes, first
// in first out, and overlapping flushes can end out of order: up to 7.5% of
// a run's flushes here).
constexpr double kToleranceNs = 1000;
constexpr double kMaxDisplaced = 0.1;

// How two captures measured the same requests of one key: each request of
// `a` is paired with the request of `b` of the same opcode and size that
// ended nearest in time (within 30 us).
struct Agreement {
  size_t pairs = 0;
  double offset_ns = 0;     // median of a's wait minus b's
  double displaced = 0;     // share of pairs further than the tolerance from the offset
};

Agreement Agree(const std::vector<CompletionEvent>& a, const std::vector<CompletionEvent>& b,
                const Key& key, double tolerance_ns) {
  std::multimap<uint64_t, const CompletionEvent*> by_end;
  for (const auto& e : b) {
    if (KeyOf(e) == key) by_end.emplace(e.end_ns, &e);
  }
  std::vector<double> d;
  for (const auto& e : a) {
    if (KeyOf(e) != key) continue;
    auto best = by_end.end();
    for (auto it = by_end.lower_bound(e.end_ns > 30000 ? e.end_ns - 30000 : 0);
         it != by_end.end() && it->first <= e.end_ns + 30000; ++it) {
      if (it->second->bytes != e.bytes) continue;
      if (best == by_end.end() || std::llabs(static_cast<int64_t>(it->first - e.end_ns)) <
                                      std::llabs(static_cast<int64_t>(best->first - e.end_ns))) {
        best = it;
      }
    }
    if (best == by_end.end()) continue;
    d.push_back(static_cast<double>(e.wait_ns) - static_cast<double>(best->second->wait_ns));
    by_end.erase(best);
  }
  Agreement g;
  g.pairs = d.size();
  if (d.empty()) return g;
  std::nth_element(d.begin(), d.begin() + d.size() / 2, d.end());
  g.offset_ns = d[d.size() / 2];
  g.displaced = static_cast<double>(std::count_if(d.begin(), d.end(), [&](double x) {
                  return std::abs(x - g.offset_ns) > tolerance_ns;
                })) / static_cast<double>(d.size());
  return g;
}

// Whether quantile `q` of `a` is that of `b` plus `g`'s offset, within one
// bucket either way, where a share `g.displaced` of the requests may have
// moved anywhere in either distribution (so b's quantile lies between its
// q - displaced and q + displaced quantiles) and the others by up to
// `resolution_ns` (whole-microsecond timestamps). The share is measured on
// the paired requests only (bpf pairs every other one), so it is taken at
// its 95% upper bound, + 3 / pairs (the "rule of three": a key of 600
// requests with 300 pairs and none displaced may still have ~1% displaced
// among the rest, enough to move its p99 by two buckets). The requests one
// capture has and the other lacks (their counts may differ by up to 1%) may
// likewise be anywhere, so their share is added: on this sandbox's kernel a
// BPF program does not run while a thread of PID 1 is current (docs/traces.md,
// "The three agree"), and the completions bpf misses come in clusters; once
// 46 missed writes of 5534 held most of the key's slowest, and its p99 read
// 96 us against raw's 152 us.
bool SameQuantile(const LatencyHistogram& a, const LatencyHistogram& b, double q,
                  const Agreement& g, double resolution_ns, std::string* why) {
  auto index = [](double ns) {
    return LatencyHistogram::BucketIndex(static_cast<uint64_t>(std::max(ns, 0.0)));
  };
  const double na = static_cast<double>(a.total_count());
  const double nb = static_cast<double>(b.total_count());
  const double missing = std::abs(na - nb) / std::max({na, nb, 1.0});
  const double share =
      g.displaced + 3.0 / static_cast<double>(std::max<size_t>(g.pairs, 1)) + missing;
  const double v = a.QuantileNs(q);
  const double lo = b.QuantileNs(q - share) + g.offset_ns - resolution_ns;
  const double hi = b.QuantileNs(q + share) + g.offset_ns + resolution_ns;
  *why = absl::StrCat("q", q, ": ", static_cast<int64_t>(v), " ns, the other's ",
                      static_cast<int64_t>(lo), "..", static_cast<int64_t>(hi),
                      " ns after an offset of ", static_cast<int64_t>(g.offset_ns), " ns with ",
                      100 * g.displaced, "% of ", g.pairs, " paired requests displaced and ",
                      100 * missing, "% missing from one side");
  return index(v) >= index(lo) - 1 && index(v) <= index(hi) + 1;
}

// The comparison itself, on made-up requests: it tolerates what running
// side by side does (a near-constant offset, and a few requests whose
// later probe an interrupt delayed at issue) and fails on a disagreement.
TEST(CaptureAgreementTest, ToleratesProbeOrderAndFailsOnDisagreement) {
  const Key key{0, 17};
  std::vector<CompletionEvent> truth;
  uint64_t state = 12345;
  for (int i = 0; i < 6000; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    CompletionEvent e;
    e.opcode = 0;
    e.bytes = 65536;
    e.wait_ns = 30000 + (state >> 33) % 60000;  // a broad key: 30..90 us
    e.end_ns = 1'000'000 + 100'000ull * static_cast<uint64_t>(i);
    truth.push_back(e);
  }
  auto histogram = [&](const std::vector<CompletionEvent>& v) {
    LatencyHistogram h;
    for (const auto& e : v) h.Record(e.wait_ns);
    return h;
  };
  auto agree_at_quantiles = [&](const std::vector<CompletionEvent>& a, Agreement* g) {
    *g = Agree(a, truth, key, kToleranceNs);
    std::string why;
    return std::abs(g->offset_ns) < kToleranceNs && g->displaced <= kMaxDisplaced &&
           SameQuantile(histogram(a), histogram(truth), 0.5, *g, 0, &why) &&
           SameQuantile(histogram(a), histogram(truth), 0.99, *g, 0, &why);
  };
  // Side by side: 150 ns later at the IRQ than at issue, and 3% of the
  // requests an interrupt of 12 us hit between the probes at issue.
  std::vector<CompletionEvent> later = truth;
  for (size_t i = 0; i < later.size(); ++i) {
    later[i].end_ns += 300;
    later[i].wait_ns += 150;
    if (i % 33 == 0) later[i].wait_ns -= 12000;
  }
  Agreement g;
  EXPECT_TRUE(agree_at_quantiles(later, &g));
  EXPECT_EQ(g.pairs, truth.size());
  EXPECT_NEAR(g.offset_ns, 150, 1);
  EXPECT_NEAR(g.displaced, 1.0 / 33, 0.002);
  // Another clock or another end point: every wait 1.5 us longer.
  std::vector<CompletionEvent> shifted = truth;
  for (auto& e : shifted) e.wait_ns += 1500;
  EXPECT_FALSE(agree_at_quantiles(shifted, &g));
  // Another IRQ for one request in five (its wait ends 20 us later).
  std::vector<CompletionEvent> wrong_irq = truth;
  for (size_t i = 0; i < wrong_irq.size(); i += 5) wrong_irq[i].wait_ns += 20000;
  EXPECT_FALSE(agree_at_quantiles(wrong_irq, &g));
  // A capture that missed 0.9% of the requests, all of them slow: a key
  // whose slowest 1.5% take 150-160 us. Its p99 falls into the body of the
  // distribution, which the missing share allows; missing them is caught by
  // the count check of the live test (1%), not here.
  std::vector<CompletionEvent> tail = truth;
  for (size_t i = 0; i < tail.size(); i += 66) tail[i].wait_ns = 150000 + i % 10000;
  std::vector<CompletionEvent> tail_missed;
  for (size_t i = 0; i < tail.size(); ++i) {
    if (i % 66 != 0 || i % 660 < 264) tail_missed.push_back(tail[i]);
  }
  ASSERT_NEAR(static_cast<double>(tail.size() - tail_missed.size()) / tail.size(), 0.009, 0.001);
  {
    const Agreement tg = Agree(tail_missed, tail, key, kToleranceNs);
    EXPECT_EQ(tg.pairs, tail_missed.size());
    EXPECT_EQ(tg.displaced, 0);
    std::string why;
    EXPECT_GT(LatencyHistogram::BucketIndex(static_cast<uint64_t>(histogram(tail).QuantileNs(0.99))),
              LatencyHistogram::BucketIndex(
                  static_cast<uint64_t>(histogram(tail_missed).QuantileNs(0.99))) + 1)
        << "the missed requests move the p99 by more than a bucket";
    EXPECT_TRUE(SameQuantile(histogram(tail_missed), histogram(tail), 0.99, tg, 0, &why)) << why;
  }
  // The slower half of the requests measured 3 us longer.
  std::vector<CompletionEvent> slow_half = truth;
  for (auto& e : slow_half) {
    if (e.wait_ns > 60000) e.wait_ns += 3000;
  }
  EXPECT_FALSE(agree_at_quantiles(slow_half, &g));
}

TEST(CaptureLiveTest, BpfRawAndTextAgreeWithEachOtherAndTheKernel) {
  SKIP_UNLESS_LIVE();
  const std::string disk = DiskOf("/var/tmp/");
  ASSERT_FALSE(disk.empty()) << "no block disk behind /var/tmp";
  CaptureConfig config;
  config.devices = {disk};
  config.histogram_interval = absl::ZeroDuration();  // every Take reads the maps
  // Every other bpf completion comes one by one through the ring buffer (the
  // others through the histograms): those are paired with raw's and text's
  // requests below.
  config.sample_every = 2;
  std::map<std::string, std::unique_ptr<Capture>> captures;
  // At every tracepoint the kernel runs the probes in the order they were
  // registered: a later capture's timestamp includes the time the earlier
  // probes took, and now and then an interrupt that came while they ran. The
  // BPF programs read the clock before anything else, so they go first.
  for (CaptureMode mode : {CaptureMode::kBpf, CaptureMode::kRaw, CaptureMode::kText}) {
    auto c = OpenCapture(mode, config);
    ASSERT_TRUE(c.ok()) << CaptureModeName(mode) << ": " << c.status();
    EXPECT_STREQ((*c)->mode(), CaptureModeName(mode));
    captures[CaptureModeName(mode)] = std::move(*c);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));

  // Window start: what each capture has up to t0 is discarded.
  const uint64_t t0 = MonotonicNs();
  const DiskStat kernel_before = ReadDiskStat(disk);
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
  // The ring buffer is drained meanwhile (it holds about a second of samples).
  absl::StatusOr<IoLoadResult> done;
  std::atomic<bool> loaded{false};
  std::thread loader([&] {
    done = RunIoLoad(load);
    loaded = true;
  });
  while (!loaded) EXPECT_TRUE(captures["bpf"]->Take(&outs["bpf"], absl::Milliseconds(50)).ok());
  loader.join();
  ASSERT_TRUE(done.ok()) << done.status();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const uint64_t t1 = MonotonicNs();
  const DiskStat kernel_after = ReadDiskStat(disk);
  const uint64_t kernel_reads = kernel_after.reads - kernel_before.reads;
  const uint64_t kernel_writes = kernel_after.writes - kernel_before.writes;
  const uint64_t kernel_flushes = kernel_after.flushes - kernel_before.flushes;
  ASSERT_GT(kernel_reads, 2000u) << "the load did too little I/O to compare";

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
    w.unended_starts = after.unended_starts - before[name].unended_starts;
    for (const auto& e : out.completions) {
      ASSERT_EQ(e.device, disk);
      if (e.end_ns <= t0 || e.end_ns > t1) continue;
      w.keys[KeyOf(e)].Record(e.wait_ns);
      w.requests.push_back(e);
    }
    for (const auto& h : out.histograms) {
      ASSERT_EQ(h.device, disk);
      LatencyHistogram& k = w.keys[{h.opcode, h.size_class}];
      for (const auto& [index, n] : h.wait.buckets) k.AddToBucket(index, n);
    }
    EXPECT_EQ(after.lost_events, 0u) << name;
    EXPECT_EQ(after.dropped, 0u) << name;
  }

  // Each capture: one sample per request the kernel counted. Reads and
  // flushes are compared directly; the kernel's writes include the
  // data-less preflush writes the driver never sees (one per fsync, the
  // captures count them as unpaired ends). The text reader's counters are
  // only as fresh as its last chunk of text, so its unpaired ends are not
  // windowed to the microsecond like the others'; its write samples are
  // compared per key below.
  for (const auto& [name, w] : windows) {
    uint64_t reads = 0, writes = 0, flushes = 0;
    for (const auto& [key, h] : w.keys) {
      const uint32_t op = std::get<0>(key);
      if (op == 0) reads += h.total_count();
      if (op == 1) writes += h.total_count();
      if (op == 2) flushes += h.total_count();
    }
    EXPECT_NEAR(static_cast<double>(reads + flushes),
                static_cast<double>(kernel_reads + kernel_flushes),
                0.01 * static_cast<double>(kernel_reads + kernel_flushes))
        << name << ": " << reads << " reads and " << flushes << " flushes, the kernel counted "
        << kernel_reads << " and " << kernel_flushes;
    if (name != "text") {
      EXPECT_NEAR(static_cast<double>(writes + w.unpaired_ends), static_cast<double>(kernel_writes),
                  0.01 * static_cast<double>(kernel_writes))
          << name << ": " << writes << " writes + " << w.unpaired_ends
          << " preflush ends, the kernel counted " << kernel_writes;
    }
    EXPECT_LE(writes, kernel_writes) << name;
  }
  // Per key: the same counts, the same waits request by request, and the
  // same p50/p99 bucket.
  //
  // Side by side, a later capture's waits differ from an earlier one's by a
  // near constant (the probes' run times at issue and at the IRQ, ~0.2 us
  // here) and, for the ~1-3% of requests an interrupt hit between the probes
  // at issue, by that interrupt's length (2-50 us under load). Those few
  // pull a broad key's median by more than its mean: removing the mean
  // difference left medians 2-3 buckets apart now and then. Pairing the
  // requests measures both: the offset is the median difference, and the
  // quantiles are compared allowing for the displaced share. A real
  // disagreement (another IRQ, another start, another clock) shows as a
  // large offset or share (CaptureAgreementTest).
  // Text timestamps are whole microseconds (trace_pipe prints us).
  const Window& raw = windows["raw"];
  int compared = 0;
  for (const auto& [key, h] : raw.keys) {
    if (h.total_count() < 500) continue;  // background I/O of other processes
    ++compared;
    const std::string where = absl::StrCat("opcode ", std::get<0>(key), " size class ",
                                           std::get<1>(key));
    std::string line = absl::StrCat(where, ": raw n ", h.total_count(), " p50 ",
                                     static_cast<int64_t>(h.QuantileNs(0.5)), " p99 ",
                                     static_cast<int64_t>(h.QuantileNs(0.99)), " ns");
    for (const char* name : {"bpf", "text"}) {
      const LatencyHistogram& o = windows[name].keys[key];
      EXPECT_NEAR(static_cast<double>(o.total_count()), static_cast<double>(h.total_count()),
                  0.01 * static_cast<double>(h.total_count()))
          << name << " vs raw, " << where << " (" << windows[name].unended_starts
          << " starts of any key never ended)";
      const bool text = std::string(name) == "text";
      const double resolution_ns = text ? 1000 : 0;
      const double tolerance_ns = kToleranceNs + resolution_ns;
      const Agreement g = Agree(windows[name].requests, raw.requests, key, tolerance_ns);
      // bpf: every other request (the ring buffer's); text: all.
      EXPECT_GE(static_cast<double>(g.pairs), 0.4 * static_cast<double>(h.total_count()))
          << name << " vs raw, " << where << ": requests paired";
      EXPECT_LT(std::abs(g.offset_ns), tolerance_ns) << name << " vs raw, " << where;
      EXPECT_LE(g.displaced, kMaxDisplaced) << name << " vs raw, " << where << ": " << g.pairs << " pairs";
      std::string why;
      EXPECT_TRUE(SameQuantile(o, h, 0.5, g, resolution_ns, &why)) << name << " vs raw, " << where << " " << why;
      EXPECT_TRUE(SameQuantile(o, h, 0.99, g, resolution_ns, &why)) << name << " vs raw, " << where << " " << why;
      absl::StrAppend(&line, "; ", name, " n ", o.total_count(), " p50 ",
                      static_cast<int64_t>(o.QuantileNs(0.5)), " p99 ",
                      static_cast<int64_t>(o.QuantileNs(0.99)), " ns, offset ",
                      static_cast<int64_t>(g.offset_ns), " ns, ", 100 * g.displaced, "% of ",
                      g.pairs, " displaced");
    }
    std::cout << line << "\n";
  }
  EXPECT_GE(compared, 3) << "the load's reads and writes of 4 and 64 KiB";
}

// --capture-samples N: every Nth completion comes out of the ring buffer as
// a sample, the others in the histograms; none twice, none lost.
TEST(CaptureLiveTest, SampledCompletionsComeThroughTheRingBuffer) {
  SKIP_UNLESS_LIVE();
  const std::string disk = DiskOf("/var/tmp/");
  ASSERT_FALSE(disk.empty());
  for (uint32_t every : {1u, 4u}) {
    CaptureConfig config;
    config.devices = {disk};
    config.sample_every = every;
    config.histogram_interval = absl::ZeroDuration();
    auto bpf = OpenCapture(CaptureMode::kBpf, config);
    ASSERT_TRUE(bpf.ok()) << bpf.status();
    IoLoadOptions load;
    load.path = "/var/tmp/spintune-capture-test.bin";
    load.file_bytes = 8ull << 20;
    load.sizes = {4096};
    load.fsync_every = 0;
    load.duration = absl::Milliseconds(500);
    // Paced: nobody reads the ring meanwhile, and an unpaced load on a fast
    // disk (45,000 requests/s from one thread here, quiet host) fills its 1 MiB, about
    // 18,700 samples, before the read below.
    load.requests_per_second = 8000;
    ASSERT_TRUE(RunIoLoad(load).ok());
    CaptureOutput out;
    const CaptureStats before = (*bpf)->stats();  // other processes' I/O goes on meanwhile
    ASSERT_TRUE((*bpf)->Take(&out, absl::Milliseconds(100)).ok());
    const CaptureStats s = (*bpf)->stats();
    ASSERT_GT(s.completions, 500u);
    EXPECT_EQ(s.lost_events, 0u) << s.completions << " completions";
    EXPECT_GE(out.CompletionCount(), before.completions) << "every " << every;
    EXPECT_LE(out.CompletionCount(), s.completions) << "every " << every;
    if (every == 1) {
      EXPECT_TRUE(out.histograms.empty());
    } else {
      EXPECT_NEAR(static_cast<double>(out.completions.size()),
                  static_cast<double>(s.completions) / every, s.completions * 0.02 + 2);
    }
    for (const auto& c : out.completions) EXPECT_EQ(c.device, disk);
  }
}

// --capture-windows in raw and text: the instance's events are on for ON
// of every EVERY (windows at multiples of EVERY on the wall clock), the
// start events going off at a window's end and the others after the drain.
// Against the same mode capturing all the time on one load, both read every
// 20 ms, the completions placed in the windows as the capture turned them
// (Capture::window_spans: on a loaded host its thread turns late, and the
// test must not take a turn the host held back for one the capture missed):
// none traced outside a window (a capture that left its events on would
// have all those between them); of the completions certainly inside a
// window, the same ones (within 1%) with the same median, p90 and IRQ-path
// share as the full capture's; no more ends counted as unpaired than the
// full capture counts (those of requests started before a window or in its
// drain are not). About 7 s.
TEST(CaptureLiveTest, RawAndTextCaptureWindowsMeasureTheirShareAndTraceNothingBetween) {
  SKIP_UNLESS_LIVE();
  const std::string disk = DiskOf("/var/tmp/");
  ASSERT_FALSE(disk.empty());
  for (CaptureMode mode : {CaptureMode::kRaw, CaptureMode::kText}) {
    SCOPED_TRACE(CaptureModeName(mode));
    CaptureConfig config;
    config.devices = {disk};
    auto all = OpenCapture(mode, config);
    ASSERT_TRUE(all.ok()) << all.status();
    auto windows = ParseWindows("400ms/1s", "--capture-windows");
    ASSERT_TRUE(windows.ok());
    config.windows = *windows;
    auto some = OpenCapture(mode, config);
    ASSERT_TRUE(some.ok()) << some.status();
    std::vector<CompletionEvent> some_ends, all_ends;
    auto add = [&](const CaptureOutput& out, std::vector<CompletionEvent>* ends) {
      for (const auto& c : out.completions) {
        if (c.device == disk) ends->push_back(c);
      }
    };
    {  // what they traced before the load (the windowed one also before its first turn)
      CaptureOutput before;
      ASSERT_TRUE((*some)->Take(&before, absl::Milliseconds(100)).ok());
      ASSERT_TRUE((*all)->Take(&before, absl::Milliseconds(100)).ok());
    }
    const uint64_t from_ns = MonotonicNs();
    const CaptureStats some_before = (*some)->stats(), all_before = (*all)->stats();
    auto take_both = [&]() -> absl::Status {
      CaptureOutput s, a;
      absl::Status status = (*some)->Take(&s, absl::ZeroDuration());
      if (status.ok()) status = (*all)->Take(&a, absl::ZeroDuration());
      add(s, &some_ends);
      add(a, &all_ends);
      return status;
    };
    IoLoadOptions load;
    load.path = "/var/tmp/spintune-capture-windows-test.bin";
    load.file_bytes = 8ull << 20;
    load.sizes = {4096};
    load.fsync_every = 0;
    load.threads = 2;
    load.requests_per_second = 5000;
    load.duration = absl::Seconds(3);
    testing::TakeWhileLoading(take_both, load);
    if (HasFatalFailure()) return;
    const std::vector<CaptureWindowSpan> spans = (*some)->window_spans();
    ASSERT_GE(spans.size(), 3u) << "windows in a 3 s load";
    // Whether a completion can have been traced in a window (issued while
    // its start events were on, ended before its events went off), and
    // whether it is certainly a window's (issued after they came on, before
    // they went off, ended before the ends went off).
    auto traced_in_one = [&](const CompletionEvent& c) {
      for (const auto& w : spans) {
        if (c.issue_ns >= w.starts_on_from_ns && c.issue_ns <= w.starts_off_to_ns &&
            c.end_ns <= w.ends_off_to_ns) {
          return true;
        }
      }
      return false;
    };
    auto certainly_in_one = [&](const CompletionEvent& c) {
      for (const auto& w : spans) {
        if (c.issue_ns >= w.starts_on_to_ns && c.issue_ns < w.starts_off_from_ns &&
            c.end_ns < w.ends_off_from_ns && w.ends_off_from_ns != UINT64_MAX) {
          return true;
        }
      }
      return false;
    };
    testing::WaitSums all_run, some_run, all_in, some_in;
    auto sum = [&](const std::vector<CompletionEvent>& ends, testing::WaitSums* run,
                   testing::WaitSums* in) {
      for (const auto& c : ends) {
        for (testing::WaitSums* sums : {run, in}) {
          if (sums == in && !certainly_in_one(c)) continue;
          sums->wait.Record(c.wait_ns);
          sums->irq_path += c.path == TracePath::kIrq;
        }
      }
    };
    sum(some_ends, &some_run, &some_in);
    sum(all_ends, &all_run, &all_in);
    uint64_t some_outside = 0, all_outside = 0;
    for (const auto& c : some_ends) some_outside += c.issue_ns >= from_ns && !traced_in_one(c);
    for (const auto& c : all_ends) all_outside += c.issue_ns >= from_ns && !traced_in_one(c);
    const CaptureStats some_after = (*some)->stats(), all_after = (*all)->stats();
    testing::ExpectWindowedLikeAll(all_run, all_in, some_in, 0.01);
    EXPECT_GT(all_outside, 1000u) << "the load ran between windows too";
    EXPECT_EQ(some_outside, 0u) << "completions traced outside the windows";
    // How late into its second the last windows turned on (printed: a
    // loaded host's thread runs late; where the turns are due is
    // CaptureWindowTurnsTest's).
    const int64_t wall_less_mono_ns =
        absl::ToUnixNanos(absl::Now()) - static_cast<int64_t>(MonotonicNs());
    int64_t latest_on_ms = 0;
    for (const auto& w : spans) {
      if (w.starts_on_from_ns == 0) continue;  // on from the capture's start
      const int64_t on_ms =
          (static_cast<int64_t>(w.starts_on_to_ns) + wall_less_mono_ns) / 1'000'000;
      latest_on_ms = std::max(latest_on_ms, on_ms % 1000);
    }
    const double some_n = static_cast<double>(some_after.completions - some_before.completions);
    // Unpaired ends the full capture counts too, no more: not those of the
    // windows' edges.
    EXPECT_LE(static_cast<double>(some_after.unpaired_ends - some_before.unpaired_ends),
              static_cast<double>(all_after.unpaired_ends - all_before.unpaired_ends) + 5 +
                  0.01 * some_n);
    std::cout << CaptureModeName(mode) << ": completions " << some_run.wait.total_count() << "/"
              << all_run.wait.total_count() << " (windows/all), certainly inside the windows "
              << some_in.wait.total_count() << "/" << all_in.wait.total_count()
              << "; traced outside them " << some_outside << "/" << all_outside << "; unpaired "
              << some_after.unpaired_ends - some_before.unpaired_ends << "; lost "
              << some_after.lost_events - some_before.lost_events << "/"
              << all_after.lost_events - all_before.lost_events << "; turned on up to "
              << latest_on_ms << " ms late\n";
  }
}

// What a live agent sends from raw and text (TracefsSource): histogram
// batches once a second, the samples folded into them; with
// --capture-samples N every Nth completion as an individual sample instead;
// with 1 (--record) every completion and dispatch as samples and no
// histograms. Whatever the form, every completion the capture counted is
// sent once: none invented, none lost (those of the load, and
// the disk's other requests meanwhile). About 13 s.
TEST(CaptureLiveTest, RawAndTextSendHistogramBatchesAndEveryNthSample) {
  SKIP_UNLESS_LIVE();
  const std::string disk = DiskOf("/var/tmp/");
  ASSERT_FALSE(disk.empty());
  for (auto [mode, every] : std::vector<std::pair<CaptureMode, uint32_t>>{
           {CaptureMode::kRaw, 0}, {CaptureMode::kText, 0}, {CaptureMode::kRaw, 3},
           {CaptureMode::kRaw, 1}}) {
    SCOPED_TRACE(absl::StrCat(CaptureModeName(mode), " --capture-samples ", every));
    CpuClassInfo cpu;
    cpu.name = "default";
    auto source = TracefsSource::Open({disk}, cpu, 0, "test", CorrelatorOptions{}, mode, every);
    ASSERT_TRUE(source.ok()) << source.status();
    uint64_t samples = 0, folded = 0, dispatch_samples = 0, dispatch_folded = 0;
    size_t histogram_batches = 0;
    auto fill_until = [&](absl::Time until) {
      while (absl::Now() < until) {
        v1::SampleBatch batch;
        auto n = (*source)->Fill(4096, &batch);
        ASSERT_TRUE(n.ok()) << n.status();
        const auto& c = batch.completions();
        samples += static_cast<uint64_t>(c.wait_ns_size());
        dispatch_samples += static_cast<uint64_t>(batch.dispatches().handler_ns_size());
        histogram_batches += batch.histograms_size() > 0 ? 1 : 0;
        uint64_t in_histograms = 0;
        for (const auto& h : batch.histograms()) {
          uint64_t buckets = 0;
          for (uint64_t count : h.wait().bucket_count()) buckets += count;
          EXPECT_EQ(buckets, h.wait().count());
          EXPECT_EQ(h.cpu_class_index(), 0u);
          EXPECT_LE(h.irq_path() + h.spin_path(), h.wait().count());
          in_histograms += h.wait().count();
        }
        for (const auto& d : batch.dispatch_histograms()) dispatch_folded += d.handler().count();
        folded += in_histograms;
        EXPECT_EQ(*n, static_cast<size_t>(c.wait_ns_size()) + in_histograms);
      }
    };
    IoLoadOptions load;
    load.path = "/var/tmp/spintune-capture-test.bin";
    load.file_bytes = 8ull << 20;
    load.sizes = {4096};
    load.fsync_every = 0;
    load.duration = absl::Milliseconds(1300);  // over at least two intervals
    load.requests_per_second = 3000;
    absl::StatusOr<IoLoadResult> done;
    std::thread loader([&] { done = RunIoLoad(load); });
    fill_until(absl::Now() + absl::Milliseconds(1400));
    loader.join();
    ASSERT_TRUE(done.ok()) << done.status();
    const uint64_t load_requests = done->reads + done->writes;
    ASSERT_GT(load_requests, 500u) << "the load did too little I/O";
    // The reader lags the load on a loaded host: it has counted at least
    // the load's requests (others' I/O counts too) once it caught up.
    EXPECT_TRUE(testing::WaitFor([&] {
      fill_until(absl::Now() + absl::Milliseconds(50));
      return (*source)->stats().completions >= load_requests;
    })) << "the capture counted " << (*source)->stats().completions << " of the load's "
        << load_requests << " requests";
    const uint64_t counted_at_end = (*source)->stats().completions;
    // Everything counted by then is sent within the next interval (or a
    // few, when the host runs the reader late), and never more than
    // counted: at least 1.5 s more, until it was sent.
    fill_until(absl::Now() + absl::Milliseconds(1500));
    EXPECT_TRUE(testing::WaitFor([&] {
      fill_until(absl::Now() + absl::Milliseconds(50));
      return samples + folded >= counted_at_end;
    }));
    const uint64_t counted = (*source)->stats().completions;
    const uint64_t sent = samples + folded;
    EXPECT_GE(sent, counted_at_end);
    EXPECT_LE(sent, counted);
    if (every == 1) {
      EXPECT_EQ(folded, 0u);
      EXPECT_EQ(histogram_batches, 0u);
      EXPECT_EQ(dispatch_folded, 0u);
    } else {
      EXPECT_GE(histogram_batches, 2u);
      EXPECT_EQ(dispatch_samples, 0u) << "dispatch times go into the histograms";
      if (every == 0) {
        EXPECT_EQ(samples, 0u);
      } else {
        EXPECT_NEAR(static_cast<double>(samples), static_cast<double>(sent) / every,
                    0.02 * static_cast<double>(sent) + 3);
      }
    }
  }
}

// EndInterval (the agent's clean stop): the next Fill hands over what the
// capture counted in the interval in progress, before the interval ends
// (an hour long here, so that nothing else hands it over). bpf reads its
// maps, raw folds what it holds. About 2 s.
TEST(CaptureLiveTest, EndIntervalHandsOverTheIntervalInProgress) {
  SKIP_UNLESS_LIVE();
  const std::string disk = DiskOf("/var/tmp/");
  ASSERT_FALSE(disk.empty());
  for (CaptureMode mode : {CaptureMode::kBpf, CaptureMode::kRaw}) {
    SCOPED_TRACE(CaptureModeName(mode));
    CpuClassInfo cpu;
    cpu.name = "default";
    auto source = TracefsSource::Open({disk}, cpu, 0, "test", CorrelatorOptions{}, mode,
                                      /*sample_every=*/0, /*wakes=*/{}, /*windows=*/{},
                                      /*histogram_interval=*/absl::Hours(1));
    ASSERT_TRUE(source.ok()) << source.status();
    uint64_t sent = 0;
    auto fill = [&]() {
      v1::SampleBatch batch;
      auto n = (*source)->Fill(4096, &batch);
      EXPECT_TRUE(n.ok()) << n.status();
      for (const auto& h : batch.histograms()) sent += h.wait().count();
      sent += static_cast<uint64_t>(batch.completions().wait_ns_size());
      return batch.histograms_size() > 0;
    };
    IoLoadOptions load;
    load.path = "/var/tmp/spintune-capture-test.bin";
    load.file_bytes = 8ull << 20;
    load.sizes = {4096};
    load.fsync_every = 0;
    load.duration = absl::Milliseconds(300);
    load.requests_per_second = 3000;
    absl::StatusOr<IoLoadResult> done;
    std::thread loader([&] { done = RunIoLoad(load); });
    const absl::Time load_end = absl::Now() + absl::Milliseconds(400);
    while (absl::Now() < load_end) {
      // As the agent does: no call before the source has something.
      absl::SleepFor(std::min((*source)->quiet_until(), load_end) - absl::Now());
      fill();
    }
    loader.join();
    ASSERT_TRUE(done.ok()) << done.status();
    const uint64_t load_requests = done->reads + done->writes;
    ASSERT_GT(load_requests, 200u) << "the load did too little I/O";
    // The capture counted the load (a reader that lags catches up).
    EXPECT_TRUE(testing::WaitFor([&] {
      fill();
      return (*source)->stats().completions >= load_requests;
    }));
    const uint64_t counted_at_end = (*source)->stats().completions;
    EXPECT_EQ(sent, 0u) << "histograms before the interval's end";
    (*source)->EndInterval();
    EXPECT_TRUE(testing::WaitFor(fill)) << "no histograms after EndInterval";
    EXPECT_GE(sent, counted_at_end);
    EXPECT_LE(sent, (*source)->stats().completions);
  }
}

// A disk without hardware (loop) is not discovered but is measured when
// named; a name /sys/block does not have is refused, naming it.
TEST(CaptureLiveTest, ALoopDiskIsMeasuredWhenNamed) {
  SKIP_UNLESS_LIVE();
  std::string loop;
  for (const char* name : {"loop0", "loop1", "loop7"}) {
    if (PathExists(absl::StrCat("/sys/block/", name, "/dev"))) {
      loop = name;
      break;
    }
  }
  if (loop.empty()) GTEST_SKIP() << "no loop device on this kernel";
  EXPECT_EQ(DiscoverDevices().count(loop), 0u);
  CpuClassInfo cpu;
  cpu.name = "default";
  auto named = TracefsSource::Open({loop}, cpu, 0, "test", CorrelatorOptions{}, CaptureMode::kRaw);
  ASSERT_TRUE(named.ok()) << named.status();
  v1::Hello hello;
  (*named)->Describe(&hello);
  ASSERT_EQ(hello.devices_size(), 1);
  EXPECT_EQ(hello.devices(0).name(), loop);
  named->reset();
  auto unknown =
      TracefsSource::Open({"nosuchdisk9"}, cpu, 0, "test", CorrelatorOptions{}, CaptureMode::kRaw);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("'nosuchdisk9'"), std::string::npos)
      << unknown.status();
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


