#include "models/histogram_sum.h"

#include <random>

#include "gtest/gtest.h"

namespace spintune {
namespace {

TEST(HistogramSum, TakeEqualsMergingTheHistograms) {
  std::mt19937_64 rng(5);
  std::lognormal_distribution<double> d(11, 3);
  HistogramSum sum;
  LatencyHistogram merged;
  for (int h = 0; h < 200; ++h) {
    LatencyHistogram part;
    for (int k = 0; k < 100; ++k) part.Record(static_cast<uint64_t>(d(rng)));
    if (h == 7) part.Record(0, 3);  // the first and last buckets
    if (h == 8) part.Record(LatencyHistogram::kMaxValueNs, 2);
    sum.Add(part);
    merged.Merge(part);
  }
  EXPECT_EQ(sum.total_count(), merged.total_count());
  const LatencyHistogram taken = sum.Take();
  EXPECT_EQ(taken, merged);
  EXPECT_EQ(taken.total_count(), merged.total_count());
}

TEST(HistogramSum, TakeClears) {
  HistogramSum sum;
  LatencyHistogram a;
  a.Record(1000, 2);
  a.Record(64, 1);
  sum.Add(a);
  EXPECT_EQ(sum.Take(), a);
  EXPECT_EQ(sum.total_count(), 0u);
  EXPECT_TRUE(sum.Take().empty()) << "a second Take holds nothing";
  LatencyHistogram b;
  b.Record(5'000'000);
  sum.Add(b);
  const LatencyHistogram taken = sum.Take();
  EXPECT_EQ(taken, b) << "nothing of the first sum is left";
  EXPECT_EQ(taken.total_count(), 1u);
}

TEST(HistogramSum, EmptyHistogramsAddNothing) {
  HistogramSum sum;
  sum.Add(LatencyHistogram());
  EXPECT_TRUE(sum.Take().empty());
}

}  // namespace
}  // namespace spintune
