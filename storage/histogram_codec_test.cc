#include "storage/histogram_codec.h"

#include <cmath>
#include <random>

#include "absl/strings/escaping.h"

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
  EXPECT_EQ(DecodeHistogram("\x03").status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(DecodeHistogram(good.substr(0, good.size() - 1)).status().code(),
            absl::StatusCode::kDataLoss);
  // A gap that walks past the last bucket.
  EXPECT_EQ(DecodeHistogram(std::string("\x01\xff\xff\x03\x01", 5)).status().code(),
            absl::StatusCode::kDataLoss);
  // A zero count.
  EXPECT_EQ(DecodeHistogram(std::string("\x01\x01\x00", 3)).status().code(),
            absl::StatusCode::kDataLoss);
}

// Version 2 (HistogramEncoder): one byte per bucket with a small gap and
// count, the escape otherwise (a count of 16, a gap of 17, the last bucket);
// what it writes decodes to the same histogram in fewer bytes.
TEST(HistogramCodec, PackedVersionRoundTripsInFewerBytes) {
  std::mt19937_64 rng(2);
  std::lognormal_distribution<double> d(std::log(80'000.0), 0.3);
  LatencyHistogram h;
  for (int i = 0; i < 100; ++i) h.Record(static_cast<uint64_t>(d(rng)));
  h.Record(2'000'000, 16);
  h.Record(2'040'000, 15);
  h.Record(LatencyHistogram::kMaxValueNs, 1ull << 40);
  std::string packed = "prefix";
  {
    HistogramEncoder encoder(&packed);
    for (const auto& [index, count] : h.buckets()) encoder.Add(index, count);
  }
  ASSERT_EQ(packed.substr(0, 6), "prefix");
  auto back = DecodeHistogram(absl::string_view(packed).substr(6));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, h);
  EXPECT_LT(packed.size() - 6, EncodeHistogram(h).size() * 7 / 10);
  // A count nibble of 0 with a gap, a truncated escape, a gap past the end.
  for (const std::string& bad : {std::string("\x02\x10", 2), std::string("\x02\x00\x05", 3),
                                 std::string("\x02\x00\xff\xff\x03\x01", 6)}) {
    EXPECT_EQ(DecodeHistogram(bad).status().code(), absl::StatusCode::kDataLoss)
        << absl::CEscape(bad);
  }
}

}  // namespace
}  // namespace spintune
