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

}  // namespace
}  // namespace spintune
