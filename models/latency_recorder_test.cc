#include "models/latency_recorder.h"

#include <random>

#include "gtest/gtest.h"

namespace spintune {
namespace {

TEST(LatencyRecorder, FlushEqualsRecordingIntoTheHistogram) {
  std::mt19937_64 rng(3);
  std::lognormal_distribution<double> d(11, 3);
  LatencyRecorder recorder;
  LatencyHistogram direct, flushed;
  // Edges of the layout and values beyond its range, then a wide spread.
  std::vector<uint64_t> values = {0,   1,   127, 128, 255, 256, 511, 512, 1023, 1024,
                                  LatencyHistogram::kMaxValueNs,
                                  LatencyHistogram::kMaxValueNs + 1, ~uint64_t{0}};
  for (int k = 0; k < 50000; ++k) values.push_back(static_cast<uint64_t>(d(rng)));
  for (uint64_t v : values) {
    recorder.Record(v);
    direct.Record(v);
  }
  EXPECT_EQ(recorder.total_count(), values.size());
  recorder.FlushTo(&flushed);
  EXPECT_EQ(flushed, direct);
  EXPECT_EQ(flushed.total_count(), direct.total_count());
  EXPECT_EQ(recorder.total_count(), 0u);
}

TEST(LatencyRecorder, FlushAddsToWhatTheHistogramHolds) {
  LatencyHistogram h;
  h.Record(1000, 2);
  LatencyRecorder recorder;
  recorder.Record(1000);
  recorder.Record(5'000'000);
  recorder.FlushTo(&h);
  // A flush clears: a second one adds nothing.
  recorder.FlushTo(&h);
  LatencyHistogram expected;
  expected.Record(1000, 3);
  expected.Record(5'000'000);
  EXPECT_EQ(h, expected);
  EXPECT_EQ(h.total_count(), 4u);
}

}  // namespace
}  // namespace spintune
