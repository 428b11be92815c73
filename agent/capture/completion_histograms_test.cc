// The raw and text captures' samples folded into histogram deltas: the same
// buckets, sums and path counts as the samples, per (device, opcode, size
// class), each interval's deltas apart.
#include "agent/capture/completion_histograms.h"

#include <map>
#include <random>
#include <tuple>

#include "gtest/gtest.h"
#include "models/latency_histogram.h"
#include "policy/default_rule.h"

namespace spintune {
namespace {

CompletionEvent Completion(const std::string& device, uint32_t opcode, uint64_t bytes,
                           uint64_t wait_ns, TracePath path, bool error = false) {
  CompletionEvent e;
  e.device = device;
  e.opcode = opcode;
  e.bytes = bytes;
  e.wait_ns = wait_ns;
  e.path = path;
  e.error = error;
  return e;
}

TEST(CompletionHistogramsTest, FoldsSamplesIntoTheirKeysBuckets) {
  struct Want {
    LatencyHistogram wait;
    uint64_t sum_ns = 0, irq = 0, spin = 0, errors = 0;
  };
  std::map<std::tuple<std::string, uint32_t, uint32_t>, Want> want;
  CompletionHistograms h;
  std::mt19937_64 rng(5);
  const std::vector<uint64_t> sizes = {0, 512, 4096, 4097, 65536};
  for (int i = 0; i < 20000; ++i) {
    const std::string device = i % 3 == 0 ? "mmc0" : "vda";
    const uint32_t opcode = static_cast<uint32_t>(rng() % 3);
    const uint64_t bytes = sizes[rng() % sizes.size()];
    const uint64_t wait_ns = rng() >> (20 + rng() % 40);  // 0 .. 2^44: some past the last bucket
    const TracePath path = static_cast<TracePath>(rng() % 3);
    const bool error = rng() % 50 == 0;
    h.Add(Completion(device, opcode, bytes, wait_ns, path, error));
    Want& w = want[{device, opcode, SizeClassOf(bytes)}];
    w.wait.Record(wait_ns);
    w.sum_ns += std::min(wait_ns, LatencyHistogram::kMaxValueNs);
    w.irq += path == TracePath::kIrq;
    w.spin += path == TracePath::kSpin;
    w.errors += error;
  }
  EXPECT_EQ(h.completions(), 20000u);
  std::vector<KeyHistogramDelta> keys;
  std::vector<DispatchHistogramDelta> dispatches;
  h.Flush(&keys, &dispatches);
  EXPECT_EQ(h.completions(), 0u);
  EXPECT_TRUE(dispatches.empty());
  ASSERT_EQ(keys.size(), want.size());
  auto w = want.begin();  // both in key order
  for (const KeyHistogramDelta& k : keys) {
    SCOPED_TRACE(k.device + " " + std::to_string(k.opcode) + " " + std::to_string(k.size_class));
    EXPECT_EQ(std::tie(k.device, k.opcode, k.size_class), w->first);
    EXPECT_EQ(k.cpu_class, 0u);
    EXPECT_EQ(k.wait.buckets, w->second.wait.buckets());
    EXPECT_EQ(k.wait.count, w->second.wait.total_count());
    EXPECT_EQ(k.wait.sum_ns, w->second.sum_ns);
    EXPECT_EQ(k.irq_path, w->second.irq);
    EXPECT_EQ(k.spin_path, w->second.spin);
    EXPECT_EQ(k.errors, w->second.errors);
    ++w;
  }
}

TEST(CompletionHistogramsTest, EachFlushHasOnlyItsIntervalsTimes) {
  CompletionHistograms h;
  h.Add(Completion("vda", 0, 4096, 100'000, TracePath::kIrq));
  h.Add(Completion("vda", 1, 4096, 300, TracePath::kSpin));
  DispatchEvent d;
  d.device = "vda";
  d.handler_ns = 5'000;
  d.wake_ns = 40'000;
  h.Add(d);
  d.handler_ns = 7'000;
  d.wake_ns.reset();  // not measured: a handler time alone
  h.Add(d);
  std::vector<KeyHistogramDelta> keys;
  std::vector<DispatchHistogramDelta> dispatches;
  h.Flush(&keys, &dispatches);
  ASSERT_EQ(keys.size(), 2u);
  ASSERT_EQ(dispatches.size(), 1u);
  EXPECT_EQ(dispatches[0].device, "vda");
  EXPECT_EQ(dispatches[0].handler.count, 2u);
  EXPECT_EQ(dispatches[0].handler.sum_ns, 12'000u);
  EXPECT_EQ(dispatches[0].wake.count, 1u);
  ASSERT_EQ(dispatches[0].wake.buckets.size(), 1u);
  EXPECT_EQ(dispatches[0].wake.buckets[0].first, LatencyHistogram::BucketIndex(40'000));

  // The next interval: only what came since, and keys without completions
  // left out.
  keys.clear();
  dispatches.clear();
  h.Add(Completion("vda", 1, 4096, 500, TracePath::kSpin));
  h.Flush(&keys, &dispatches);
  ASSERT_EQ(keys.size(), 1u);
  EXPECT_EQ(keys[0].opcode, 1u);
  EXPECT_EQ(keys[0].wait.count, 1u);
  EXPECT_EQ(keys[0].wait.sum_ns, 500u);
  ASSERT_EQ(keys[0].wait.buckets.size(), 1u);
  EXPECT_EQ(keys[0].wait.buckets[0], std::make_pair(LatencyHistogram::BucketIndex(500), uint64_t{1}));
  EXPECT_EQ(keys[0].spin_path, 1u);
  EXPECT_EQ(keys[0].irq_path, 0u);
  EXPECT_TRUE(dispatches.empty());

  keys.clear();
  h.Flush(&keys, &dispatches);
  EXPECT_TRUE(keys.empty());
}

}  // namespace
}  // namespace spintune
