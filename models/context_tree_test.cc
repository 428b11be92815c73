#include "models/context_tree.h"

#include <algorithm>
#include <random>

#include "gtest/gtest.h"
#include "models/latency_histogram.h"

namespace spintune {
namespace {

constexpr int kPrev = static_cast<int>(ContextFeature::kPrevWaitNs);
constexpr int kSinceWrite = static_cast<int>(ContextFeature::kSinceWriteNs);
constexpr int kInflight = static_cast<int>(ContextFeature::kInflight);
constexpr int kBytes = static_cast<int>(ContextFeature::kBytes);

TEST(ContextFeatures, AsADriverSeesThemAtIssue) {
  // t=0 a write of 100 ns is issued; t=50 a read of 10 ns (the write is in
  // flight, nothing has completed, no write yet); t=200 a read: both are
  // done, the write last (at 100), so prev 100 and since_write 100.
  const std::vector<DeviceRequest> r = {
      {0, 100, 4096, true}, {50, 10, 512, false}, {200, 7, 0, false}};
  const auto f = ComputeContext(r);
  ASSERT_EQ(f.size(), 3u);
  EXPECT_EQ(f[0][kPrev], 0u);
  EXPECT_EQ(f[0][kSinceWrite], kNoWriteYet);
  EXPECT_EQ(f[0][kInflight], 0u);
  EXPECT_EQ(f[1][kInflight], 1u);
  EXPECT_EQ(f[1][kSinceWrite], kNoWriteYet);
  EXPECT_EQ(f[1][kBytes], 512u);
  EXPECT_EQ(f[2][kPrev], 100u);
  EXPECT_EQ(f[2][kSinceWrite], 100u);
  EXPECT_EQ(f[2][kInflight], 0u);
  // Order of the input does not matter; a completion at the issue instant counts.
  const std::vector<DeviceRequest> shuffled = {r[2], r[0], {100, 1, 0, false}, r[1]};
  const auto g = ComputeContext(shuffled);
  EXPECT_EQ(g[0], (ContextVector{1, 100, 0, 0}));  // the new read completed last, at 101
  EXPECT_EQ(g[1], f[0]);
  EXPECT_EQ(g[2][kInflight], 0u);  // the write completes at 100: not in flight
  EXPECT_EQ(g[2][kPrev], 100u);
  EXPECT_EQ(g[2][kSinceWrite], 0u);
  EXPECT_EQ(g[3], f[1]);
}

TEST(ContextFeatures, NamesRoundTrip) {
  for (int f = 0; f < kContextFeatureCount; ++f) {
    auto parsed = ParseContextFeature(ContextFeatureName(static_cast<ContextFeature>(f)));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(static_cast<int>(*parsed), f);
  }
  EXPECT_FALSE(ParseContextFeature("queue_depth").ok());
}

ContextTree TwoLevelTree() {
  ContextTree t;
  t.Split(0, ContextFeature::kPrevWaitNs, 1000);
  t.Split(1, ContextFeature::kInflight, 2);  // the right leaf splits again
  return t;
}

TEST(ContextTree, RoutesAndListsItsLeavesInOrder) {
  const ContextTree t = TwoLevelTree();
  ASSERT_EQ(t.leaf_count(), 3);
  EXPECT_EQ(t.depth(), 2);
  // Preorder: the root, then its right child; leaves left to right.
  ASSERT_EQ(t.nodes().size(), 2u);
  EXPECT_EQ(t.nodes()[0].left, ~0);
  EXPECT_EQ(t.nodes()[0].right, 1);
  EXPECT_EQ(t.nodes()[1].left, ~1);
  EXPECT_EQ(t.nodes()[1].right, ~2);
  ContextVector v{};
  v[kPrev] = 999;
  EXPECT_EQ(t.Route(v), 0);
  v[kPrev] = 1000;
  v[kInflight] = 1;
  EXPECT_EQ(t.Route(v), 1);
  v[kInflight] = 2;
  EXPECT_EQ(t.Route(v), 2);
  const auto leaves = t.LeafConditions();
  ASSERT_EQ(leaves.size(), 3u);
  ASSERT_EQ(leaves[0].size(), 1u);
  EXPECT_EQ(leaves[0][0], (ContextCondition{ContextFeature::kPrevWaitNs, std::nullopt, 1000}));
  ASSERT_EQ(leaves[2].size(), 2u);
  EXPECT_EQ(leaves[2][0], (ContextCondition{ContextFeature::kPrevWaitNs, 1000, std::nullopt}));
  EXPECT_EQ(leaves[2][1], (ContextCondition{ContextFeature::kInflight, 2, std::nullopt}));
  // And back.
  auto rebuilt = ContextTree::FromLeafConditions(leaves);
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.status();
  EXPECT_TRUE(*rebuilt == t);
  // One leaf: no condition, no node.
  auto one = ContextTree::FromLeafConditions({{}});
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->leaf_count(), 1);
}

TEST(ContextTree, RefusesLeavesThatDoNotTileAsATree) {
  auto leaves = TwoLevelTree().LeafConditions();
  // A gap: the middle leaf starts above where its neighbour ends.
  auto gap = leaves;
  gap[1][0].min = 2000;
  EXPECT_FALSE(ContextTree::FromLeafConditions(gap).ok());
  // Out of tree order.
  auto swapped = leaves;
  std::swap(swapped[0], swapped[2]);
  EXPECT_FALSE(ContextTree::FromLeafConditions(swapped).ok());
  // Two leaves that both claim everything.
  EXPECT_FALSE(ContextTree::FromLeafConditions({{}, {}}).ok());
  // A chain of leaves cut on one feature in a row is rebuilt balanced: 8
  // leaves are a tree of depth 3, 9 are more than a driver walks.
  auto chain = [](int n) {
    std::vector<ContextConditions> out;
    for (int i = 0; i < n; ++i) {
      ContextCondition c{ContextFeature::kBytes, std::nullopt, std::nullopt};
      if (i > 0) c.min = static_cast<uint64_t>(i);
      if (i + 1 < n) c.max = static_cast<uint64_t>(i + 1);
      out.push_back({c});
    }
    return out;
  };
  auto eight = ContextTree::FromLeafConditions(chain(8));
  ASSERT_TRUE(eight.ok()) << eight.status();
  EXPECT_EQ(eight->depth(), 3);
  EXPECT_FALSE(ContextTree::FromLeafConditions(chain(9)).ok());
}

PlatformCosts TwoStateCosts() {
  PlatformCosts c;
  c.irq_cpu_ns = 20'000;
  c.irq_wake_ns = 30'000;
  c.poll_read_ns = 100;
  c.timer_cpu_ns = 5'000;
  c.timer_wake_ns = 50'000;
  return c;
}

// Known answer, derived by hand. One key whose commands come in runs of 50
// fast (X = 10 us) and 50 slow (X = 1 ms), one at a time, every one a read
// of 4 KiB: prev_wait_ns is the only feature that varies. Costs (lambda 1):
// IRQ = 20 + X + 30 us, spinning = 2X, sleeping S = 5 us of CPU + S + 50 us
// of latency.
//  - Fixed, over the whole key: SPIN_THEN_IRQ(T = 10 us) costs 20 on the
//    fast half and 10 + 1050 on the slow half, 540 us per command (IRQ: 555,
//    sleeping 950 us: 1005).
//  - prev_wait < 1 ms: 49 fast, 1 slow per run. SPIN_THEN_IRQ(10 us):
//    (49 x 20 + 1060) / 50 = 40.8 us (spinning through 1 ms: 59.6; IRQ 79.8).
//  - prev_wait >= 1 ms: 49 slow, 1 fast. SLEEP_THEN_SPIN(S = 950 us): every
//    command 5 + 1000 = 1005 us (IRQ: 1030.2; SPIN_THEN_IRQ(10 us): 1039.2).
//  Context: (40.8 + 1005) / 2 = 522.9 us; clairvoyant (20 + 1005) / 2 =
//  512.5 us: the two leaves close (540 - 522.9) / (540 - 512.5) = 62% of the
//  gap. Validation gain per command on the slow side: +55 us for the 49
//  slow, -985 for the fast one: +17.1 us per command, far above the noise.
std::vector<ContextSample> TwoStateStream(size_t n) {
  std::vector<DeviceRequest> requests;
  uint64_t now = 0;
  for (size_t i = 0; i < n; ++i) {
    const uint64_t x = (i / 50) % 2 == 0 ? 10'000 : 1'000'000;
    requests.push_back({now, x, 4096, false});
    now += x + 1'000;
  }
  const auto context = ComputeContext(requests);
  std::vector<ContextSample> out;
  for (size_t i = 0; i < n; ++i) out.push_back({requests[i].wait_ns, context[i]});
  return out;
}

double MeanCost(const std::vector<ContextSample>& s, const std::vector<size_t>& idx,
                const WaitParams& w, const PlatformCosts& c) {
  double sum = 0;
  for (size_t i : idx) {
    const RequestCost r = CostOfRequest(static_cast<double>(s[i].x_ns), w, c);
    sum += r.cpu_ns + r.latency_ns;
  }
  return sum / static_cast<double>(idx.size());
}

TEST(ContextTree, KnownAnswerTwoStateStream) {
  const auto samples = TwoStateStream(3000);
  OptimizerOptions options;
  options.max_spin_ns = 2'000'000;
  const PlatformCosts costs = TwoStateCosts();
  auto fit = FitContextTree(samples, costs, options, ContextOptions{});
  ASSERT_TRUE(fit.ok()) << fit.status();
  // One split, on prev_wait_ns at the slow value: left are the commands
  // after a fast one (and the very first), right those after a slow one.
  ASSERT_EQ(fit->tree.leaf_count(), 2);
  EXPECT_EQ(fit->tree.nodes()[0].feature, ContextFeature::kPrevWaitNs);
  EXPECT_EQ(fit->tree.nodes()[0].threshold, 1'000'000u);
  ASSERT_EQ(fit->leaf_samples.size(), 2u);
  EXPECT_EQ(fit->leaf_samples[0].size() + fit->leaf_samples[1].size(), 3000u);
  EXPECT_NEAR(static_cast<double>(fit->leaf_samples[0].size()), 1501, 1);

  // The leaves' waits, fitted as table entries are (histograms: thresholds
  // land on bucket bounds, within 1%).
  auto fit_leaf = [&](const std::vector<size_t>& idx) {
    LatencyHistogram h;
    for (size_t i : idx) h.Record(samples[i].x_ns);
    return OptimizeWait(WaitDistribution::FromHistogram(h), costs, options);
  };
  auto fast = fit_leaf(fit->leaf_samples[0]);
  auto slow = fit_leaf(fit->leaf_samples[1]);
  ASSERT_TRUE(fast.ok() && slow.ok());
  EXPECT_EQ(fast->params.strategy, Strategy::kSpinThenIrq);
  EXPECT_NEAR(static_cast<double>(fast->params.spin_ns), 10'000, 100);
  EXPECT_EQ(slow->params.strategy, Strategy::kSleepThenSpin);
  EXPECT_NEAR(static_cast<double>(slow->params.sleep_ns), 950'000, 9'500);
  EXPECT_NEAR(MeanCost(samples, fit->leaf_samples[0], fast->params, costs), 40'800, 400);
  EXPECT_NEAR(MeanCost(samples, fit->leaf_samples[1], slow->params, costs), 1'005'000, 10'000);
}

// The in-sample fit (upper bounds only): a stream whose structure is only
// in its first 70% (runs of fast and slow commands, then all fast) has no
// split that pays on the time-ordered held-out part, but the in-sample fit
// finds the two-state split, and every sample lands in exactly one leaf.
TEST(ContextTree, InSampleFitJudgesOnTheSamplesItFits) {
  auto samples = TwoStateStream(3000);
  for (size_t i = 2100; i < samples.size(); ++i) {
    samples[i] = {10'000, {10'000, kNoWriteYet, 0, 4096}};
  }
  OptimizerOptions options;
  options.max_spin_ns = 2'000'000;
  auto held_out = FitContextTree(samples, TwoStateCosts(), options, ContextOptions{});
  ASSERT_TRUE(held_out.ok()) << held_out.status();
  EXPECT_EQ(held_out->tree.leaf_count(), 1);

  ContextOptions in_sample;
  in_sample.in_sample = true;
  auto fit = FitContextTree(samples, TwoStateCosts(), options, in_sample);
  ASSERT_TRUE(fit.ok()) << fit.status();
  ASSERT_GE(fit->tree.leaf_count(), 2);
  EXPECT_EQ(fit->tree.nodes()[0].feature, ContextFeature::kPrevWaitNs);
  EXPECT_EQ(fit->tree.nodes()[0].threshold, 1'000'000u);
  std::vector<int> seen(samples.size(), 0);
  for (const auto& leaf : fit->leaf_samples) {
    for (size_t i : leaf) ++seen[i];
  }
  EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), static_cast<long>(samples.size()));
}

TEST(ContextTree, IidKeysKeepOneLeaf) {
  // Lognormal completion times, and contexts that vary but tell nothing.
  OptimizerOptions options;
  int one_leaf = 0;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    std::mt19937_64 rng(seed);
    std::lognormal_distribution<double> x(std::log(40'000.0), 0.8);
    std::uniform_int_distribution<uint64_t> noise(0, 1'000'000);
    std::vector<ContextSample> s(3000);
    for (auto& v : s) {
      v.x_ns = static_cast<uint64_t>(x(rng));
      v.context = {noise(rng), noise(rng), noise(rng) % 8, 4096};
    }
    auto fit = FitContextTree(s, TwoStateCosts(), options, ContextOptions{});
    ASSERT_TRUE(fit.ok());
    one_leaf += fit->tree.leaf_count() == 1;
  }
  EXPECT_GE(one_leaf, 19);
}

TEST(ContextTree, FewSamplesOrDepthZeroMeanOneLeaf) {
  const auto samples = TwoStateStream(3000);
  ContextOptions no_depth;
  no_depth.max_depth = 0;
  auto fit = FitContextTree(samples, TwoStateCosts(), OptimizerOptions{}, no_depth);
  ASSERT_TRUE(fit.ok());
  EXPECT_EQ(fit->tree.leaf_count(), 1);
  EXPECT_EQ(fit->leaf_samples[0].size(), 3000u);
  auto few = FitContextTree(TwoStateStream(80), TwoStateCosts(), OptimizerOptions{},
                            ContextOptions{});
  ASSERT_TRUE(few.ok());
  EXPECT_EQ(few->tree.leaf_count(), 1);
  EXPECT_FALSE(FitContextTree({}, TwoStateCosts(), OptimizerOptions{}, ContextOptions{}).ok());
}

}  // namespace
}  // namespace spintune
