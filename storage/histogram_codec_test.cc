#include "storage/histogram_codec.h"

#include <random>

#include "gtest/gtest.h"

namespace spintune {
namespace {

TEST(HistogramCodec, RoundTrips) {
  std::mt19937_64 rng(1);
  std::lognormal_distribution<double> d(12, 3);
  LatencyHistogram h;
  for (int i = 0; i < 10000; ++i) h.Record(static_cast<uint64_t>(d(rng)));
  h.Record(LatencyHistogram::kMaxValueNs, 3);
  auto back = DecodeHistogram(EncodeHistogram(h));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, h);
  EXPECT_EQ(back->total_count(), h.total_count());
  EXPECT_TRUE(DecodeHistogram("")->empty());
}

TEST(HistogramCodec, RejectsCorruptBytes) {
  LatencyHistogram h;
  h.Record(1000, 5);
  h.Record(5000, 7);
  const std::string good = EncodeHistogram(h);
  EXPECT_EQ(DecodeHistogram("\x02").status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(DecodeHistogram(good.substr(0, good.size() - 1)).status().code(),
            absl::StatusCode::kDataLoss);
  // A gap that walks past the last bucket.
  EXPECT_EQ(DecodeHistogram(std::string("\x01\xff\xff\x03\x01", 5)).status().code(),
            absl::StatusCode::kDataLoss);
  // A zero count.
  EXPECT_EQ(DecodeHistogram(std::string("\x01\x01\x00", 3)).status().code(),
            absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace spintune
