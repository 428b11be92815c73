#include "models/change_detector.h"

#include <random>

#include "gtest/gtest.h"

namespace spintune {
namespace {

LatencyHistogram Draw(std::mt19937_64& rng, int n, double median, double slow_share) {
  std::uniform_real_distribution<double> u(0, 1);
  std::lognormal_distribution<double> fast(std::log(median), 0.4), slow(std::log(median * 50), 0.4);
  LatencyHistogram h;
  for (int i = 0; i < n; ++i) h.Record(static_cast<uint64_t>(u(rng) < slow_share ? slow(rng) : fast(rng)));
  return h;
}

TEST(ChangeDetector, DisjointDistributionsAreDistanceOne) {
  LatencyHistogram a, b;
  a.Record(100, 10);
  b.Record(100000, 10);
  EXPECT_DOUBLE_EQ(KsDistance(a, b), 1.0);
  EXPECT_DOUBLE_EQ(KsDistance(a, a), 0.0);
}

TEST(ChangeDetector, StationaryStreamsRaiseNoAlarm) {
  std::mt19937_64 rng(1);
  for (int trial = 0; trial < 200; ++trial) {
    EXPECT_FALSE(DistributionChanged(Draw(rng, 8000, 150e3, 0.03), Draw(rng, 512, 150e3, 0.03)));
  }
}

TEST(ChangeDetector, GarbageCollectionOnsetAndClockChangeAreDetected) {
  std::mt19937_64 rng(2);
  // The card starts garbage collection: 3% -> 30% slow writes.
  EXPECT_TRUE(DistributionChanged(Draw(rng, 8000, 150e3, 0.03), Draw(rng, 512, 150e3, 0.30)));
  // The CPU clock halves: the CPU-clocked completion time doubles.
  EXPECT_TRUE(DistributionChanged(Draw(rng, 8000, 150e3, 0.0), Draw(rng, 512, 300e3, 0.0)));
}

// The drift decision the store carries out for each key's windows.
TEST(ChangeDetector, JudgeWindowsChangesOrPrunesOnlyOnEnoughEvidence) {
  std::mt19937_64 rng(3);
  std::vector<std::pair<int64_t, LatencyHistogram>> w;
  for (int64_t i = 0; i < 40; ++i) w.emplace_back(i, Draw(rng, 600, 150e3, 0.03));
  // Stationary: no change; the last 32 windows kept.
  WindowVerdict v = JudgeWindows(w, 0, -1, ChangeTest(), 512, 32);
  EXPECT_FALSE(v.changed);
  EXPECT_EQ(v.keep_from, 39 - 32);
  // Never before the key's evidence starts.
  EXPECT_EQ(JudgeWindows({w.begin() + 20, w.end()}, 20, -1, ChangeTest(), 512, 32).keep_from, 20);
  // Too few samples in all windows after the first, or a single window: no
  // verdict.
  EXPECT_EQ(JudgeWindows(w, 0, -1, ChangeTest(), 39 * 600 + 1, 32).keep_from, 0);
  EXPECT_EQ(JudgeWindows({w.back()}, 39, -1, ChangeTest(), 512, 32).keep_from, 0);
  // Garbage collection starts: evidence from the latest window on.
  w.emplace_back(40, Draw(rng, 600, 150e3, 0.30));
  v = JudgeWindows(w, 0, -1, ChangeTest(), 512, 32);
  EXPECT_TRUE(v.changed);
  EXPECT_EQ(v.since, 40);
  EXPECT_EQ(v.keep_from, 40);
}

// A key with a small share of its target's samples (here 100 in each
// window of the target's): no window of its own holds min_recent samples,
// so its latest windows are judged together, and the change starts where
// they do.
TEST(ChangeDetector, JudgeWindowsJudgesASparseKeyOnItsLatestWindowsTogether) {
  std::mt19937_64 rng(5);
  std::vector<std::pair<int64_t, LatencyHistogram>> w;
  for (int64_t i = 0; i < 40; ++i) w.emplace_back(i, Draw(rng, 100, 150e3, 0.03));
  // Stationary: judged (windows 34-39 hold 600 >= 512), no change. It keeps
  // the last 32 windows, which hold more than it needs.
  WindowVerdict v = JudgeWindows(w, 0, -1, ChangeTest(), 512, 32);
  EXPECT_FALSE(v.changed);
  EXPECT_EQ(v.keep_from, 39 - 32);
  // With 4 windows kept it still keeps the 6 + 6 the verdict needs.
  EXPECT_EQ(JudgeWindows(w, 0, -1, ChangeTest(), 512, 4).keep_from, 28);
  // Garbage collection starts at window 40. One window of it is not enough
  // evidence: windows 35-39 join it, and a sixth of them changed...
  auto changed_from_40 = w;
  changed_from_40.emplace_back(40, Draw(rng, 100, 150e3, 0.30));
  EXPECT_FALSE(JudgeWindows(changed_from_40, 0, -1, ChangeTest(), 512, 32).changed);
  // ...six are: windows 40-45, the fewest latest ones with 512 samples,
  // differ, and the key's evidence starts at the first of them.
  for (int64_t i = 41; i < 46; ++i) changed_from_40.emplace_back(i, Draw(rng, 100, 150e3, 0.30));
  v = JudgeWindows(changed_from_40, 0, -1, ChangeTest(), 512, 32);
  EXPECT_TRUE(v.changed);
  EXPECT_EQ(v.since, 40);
  EXPECT_EQ(v.keep_from, 40);
}

// A change inside a window: the window that detects it mixes the
// distributions before and after it, and the next judgement finds the pure
// windows after it differ from that mixed one. That is the same change,
// located later (refined), not a second; a change against windows after
// the mixed one is a new change.
TEST(ChangeDetector, AChangeInsideAWindowIsRefinedNotDetectedTwice) {
  auto expect_change = [](const WindowVerdict& v, bool refined, int64_t since, int64_t through) {
    EXPECT_TRUE(v.changed);
    EXPECT_EQ(v.refined, refined);
    EXPECT_EQ(v.since, since);
    EXPECT_EQ(v.through, through);
  };
  std::mt19937_64 rng(7);
  std::vector<std::pair<int64_t, LatencyHistogram>> w;
  for (int64_t i = 0; i < 40; ++i) w.emplace_back(i, Draw(rng, 600, 150e3, 0.03));
  LatencyHistogram mixed = Draw(rng, 300, 150e3, 0.03);
  mixed.Merge(Draw(rng, 300, 150e3, 0.60));
  w.emplace_back(40, mixed);
  expect_change(JudgeWindows(w, 0, -1, ChangeTest(), 512, 32), false, 40, 40);
  // The next window is all after the change; the mixed one differs from it.
  std::vector<std::pair<int64_t, LatencyHistogram>> after = {w.back()};
  after.emplace_back(41, Draw(rng, 600, 150e3, 0.60));
  expect_change(JudgeWindows(after, 40, 40, ChangeTest(), 512, 32), true, 41, 40);
  // Without the last change's span it would count as a change of its own.
  EXPECT_FALSE(JudgeWindows(after, 40, -1, ChangeTest(), 512, 32).refined);
  // Stationary after it: nothing.
  after.erase(after.begin());
  for (int64_t i = 42; i < 46; ++i) after.emplace_back(i, Draw(rng, 600, 150e3, 0.60));
  EXPECT_FALSE(JudgeWindows(after, 41, 40, ChangeTest(), 512, 32).changed);
  // The distribution changes back: compared with windows 41-45, after the
  // last change's evidence, a new change.
  after.emplace_back(46, Draw(rng, 600, 150e3, 0.03));
  expect_change(JudgeWindows(after, 41, 40, ChangeTest(), 512, 32), false, 46, 46);
}

}  // namespace
}  // namespace spintune
