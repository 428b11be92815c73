#include "models/histogram_encoding.h"

#include <random>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "models/latency_histogram.h"
#include "models/varint.h"

namespace spintune {
namespace {

std::vector<std::pair<int, uint64_t>> ReadAll(absl::string_view bytes, absl::Status* status) {
  HistogramReader reader(bytes);
  std::vector<std::pair<int, uint64_t>> out;
  int index = 0;
  uint64_t count = 0;
  while (reader.Next(&index, &count)) out.emplace_back(index, count);
  *status = reader.status();
  return out;
}

TEST(HistogramEncoding, TheReaderGivesBackWhatTheEncoderWrote) {
  // Gaps and counts on both sides of the one-byte form (gap 16, count 15),
  // the first and the last bucket, and more than the encoder's buffer.
  std::vector<std::pair<int, uint64_t>> buckets = {{0, 1}, {16, 15}, {17, 16}, {34, 1}};
  std::mt19937_64 rng(7);
  int index = 34;
  while (true) {
    index += 1 + static_cast<int>(rng() % 40);
    if (index >= LatencyHistogram::kBucketCount - 1) break;
    buckets.emplace_back(index, 1 + rng() % (rng() % 2 ? 15 : uint64_t{1} << 40));
  }
  buckets.emplace_back(LatencyHistogram::kBucketCount - 1, 3);
  std::string bytes;
  {
    HistogramEncoder encoder(&bytes);
    for (const auto& [i, c] : buckets) encoder.Add(i, c);
  }
  ASSERT_EQ(bytes[0], '\x02');
  EXPECT_EQ(bytes[1], '\x01') << "gap 1 (from -1), count 1: one byte";
  EXPECT_EQ(bytes[2], static_cast<char>(0xFF)) << "gap 16, count 15: one byte";
  EXPECT_EQ(bytes[3], '\x00') << "count 16: the escape";
  absl::Status status;
  EXPECT_EQ(ReadAll(bytes, &status), buckets);
  EXPECT_TRUE(status.ok()) << status;
  HistogramReader reader(bytes);
  EXPECT_EQ(reader.version(), 2);
}

TEST(HistogramEncoding, TheReaderReadsVersion1AndNothingFromEmptyBytes) {
  std::string v1 = "\x01";
  PutVarint(&v1, 5);  // gap from -1: index 4
  PutVarint(&v1, 300);
  PutVarint(&v1, 1);
  PutVarint(&v1, 2);
  absl::Status status;
  EXPECT_EQ(ReadAll(v1, &status), (std::vector<std::pair<int, uint64_t>>{{4, 300}, {5, 2}}));
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_TRUE(ReadAll("", &status).empty());
  EXPECT_TRUE(status.ok());
  EXPECT_EQ(HistogramReader("").version(), 0);
}

TEST(HistogramEncoding, TheReaderStopsAtMalformedBytesAndSaysWhy) {
  std::string beyond = "\x02";
  beyond.push_back('\0');
  PutVarint(&beyond, LatencyHistogram::kBucketCount + 1);
  PutVarint(&beyond, 1);
  const std::pair<std::string, std::string> cases[] = {
      {"\x03\x01", "unknown version 3"},
      {std::string("\x02\x01\x00\x05", 4), "truncated"},
      {std::string("\x02\x00\x00\x01", 4), "bucket out of range"},  // a gap of 0
      {beyond, "bucket out of range"},
      {std::string("\x02\x00\x01\x00", 4), "count of 0"},
      {std::string("\x02\x10", 2), "count of 0"},  // a one-byte bucket of count 0
  };
  for (const auto& [bytes, why] : cases) {
    absl::Status status;
    const auto read = ReadAll(bytes, &status);
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << why;
    EXPECT_EQ(status.message(), why);
    // What came before the bad bucket was read; nothing after it.
    EXPECT_LE(read.size(), 1u) << why;
  }
}

}  // namespace
}  // namespace spintune
