#include "models/latency_histogram.h"

#include <random>

#include "gtest/gtest.h"

namespace spintune {
namespace {

using H = LatencyHistogram;

TEST(LatencyHistogram, BucketsAreContiguousAndCoverTheRange) {
  EXPECT_EQ(H::BucketLowerNs(0), 0u);
  for (int i = 0; i + 1 < H::kBucketCount; ++i) {
    ASSERT_LE(H::BucketLowerNs(i), H::BucketUpperNs(i)) << i;
    ASSERT_EQ(H::BucketUpperNs(i) + 1, H::BucketLowerNs(i + 1)) << i;
  }
  EXPECT_EQ(H::BucketUpperNs(H::kBucketCount - 1), H::kMaxValueNs);
  // The product needs 1 ns to at least 60 s.
  EXPECT_GE(H::kMaxValueNs, 60'000'000'000u);
}

TEST(LatencyHistogram, RelativeBucketErrorIsBelowOnePercent) {
  for (int i = 1; i < H::kBucketCount; ++i) {
    const double lower = static_cast<double>(H::BucketLowerNs(i));
    const double upper = static_cast<double>(H::BucketUpperNs(i));
    // Any value in the bucket is within 1% of any other value in it.
    ASSERT_LE((upper - lower) / lower, 0.01) << "bucket " << i;
  }
}

TEST(LatencyHistogram, ValuesMapIntoTheirBucket) {
  std::mt19937_64 rng(7);
  for (int k = 0; k < 100000; ++k) {
    const uint64_t v = rng() >> (rng() % 64);
    const int i = H::BucketIndex(v);
    const uint64_t clamped = std::min(v, H::kMaxValueNs);
    ASSERT_LE(H::BucketLowerNs(i), clamped);
    ASSERT_GE(H::BucketUpperNs(i), clamped);
  }
  EXPECT_EQ(H::BucketIndex(0), 0);
  EXPECT_EQ(H::BucketIndex(255), 255);
  EXPECT_EQ(H::BucketIndex(256), 256);
  EXPECT_EQ(H::BucketIndex(~uint64_t{0}), H::kBucketCount - 1);
}

TEST(LatencyHistogram, EveryBucketBoundMapsToItsBucket) {
  // Pins the layout that BPF programs and stored data share: BucketIndex is
  // bit arithmetic, the bounds are computed the long way.
  for (int i = 0; i < H::kBucketCount; ++i) {
    ASSERT_EQ(H::BucketIndex(H::BucketLowerNs(i)), i);
    ASSERT_EQ(H::BucketIndex(H::BucketUpperNs(i)), i);
  }
  EXPECT_EQ(H::BucketIndex(H::kMaxValueNs + 1), H::kBucketCount - 1);
}

TEST(LatencyHistogram, MergeEqualsRecordingEverything) {
  std::mt19937_64 rng(11);
  std::lognormal_distribution<double> d(10.0, 2.0);
  H a, b, all;
  for (int k = 0; k < 20000; ++k) {
    const auto v = static_cast<uint64_t>(d(rng));
    (k % 3 == 0 ? a : b).Record(v);
    all.Record(v);
  }
  H merged = a;
  merged.Merge(b);
  EXPECT_EQ(merged, all);
  EXPECT_EQ(merged.total_count(), 20000u);
  // Merge is commutative.
  H other = b;
  other.Merge(a);
  EXPECT_EQ(other, merged);
}

TEST(LatencyHistogram, QuantilesAndMeanAreWithinBucketResolution) {
  H h;
  for (uint64_t v = 1; v <= 100000; ++v) h.Record(v * 1000);  // 1 us .. 100 ms
  EXPECT_NEAR(h.QuantileNs(0.5), 50'000'000, 50'000'000 * 0.005);
  EXPECT_NEAR(h.QuantileNs(0.99), 99'000'000, 99'000'000 * 0.005);
  EXPECT_NEAR(h.MeanNs(), 50'000'500, 50'000'500 * 0.005);
  EXPECT_EQ(H().QuantileNs(0.5), 0.0);
}

TEST(LatencyHistogram, SmallValuesAreExact) {
  H h;
  h.Record(3, 5);
  h.Record(200);
  EXPECT_EQ(h.total_count(), 6u);
  EXPECT_EQ(h.QuantileNs(0.5), 3.0);
  EXPECT_EQ(h.QuantileNs(1.0), 200.0);
}

}  // namespace
}  // namespace spintune
