#include "agent/capture/bpf/histogram_slot.h"

#include <vector>

#include "gtest/gtest.h"

namespace spintune {
namespace {

// Two CPUs' histograms of one slot, as the program lays them out.
struct TwoCpus {
  std::vector<stc_hist> h = std::vector<stc_hist>(2);
  // What the program does for a value in `bucket` on `cpu`, `count` last.
  void Add(int cpu, int bucket, uint64_t ns, bool counted = true) {
    ++h[cpu].buckets[bucket];
    h[cpu].sum_ns += ns;
    if (counted) ++h[cpu].count;
  }
};

std::vector<uint64_t> Zeros() { return std::vector<uint64_t>(STC_BUCKET_COUNT, 0); }

TEST(HistogramSlotTest, DeltasAreWhatEachCpuAddedSinceTheLastRead) {
  TwoCpus t;
  HistogramSlot slot(2);
  t.Add(0, 7, 7);
  t.Add(1, 7, 7);
  t.Add(1, 300, 300);
  auto d = Zeros();
  bool moved = false;
  HistogramSlot::Totals totals = slot.Read(t.h.data(), &d, &moved);
  EXPECT_TRUE(moved);
  EXPECT_EQ(d[7], 2u);
  EXPECT_EQ(d[300], 1u);
  EXPECT_EQ(totals.sum_ns, 314u);

  t.Add(0, 7, 7);
  d = Zeros();
  slot.Read(t.h.data(), &d, &moved);
  EXPECT_TRUE(moved);
  EXPECT_EQ(d[7], 1u);
  EXPECT_EQ(d[300], 0u);
}

TEST(HistogramSlotTest, AnUnmovedCpuIsNotScannedOnceItSettled) {
  TwoCpus t;
  HistogramSlot slot(2);
  t.Add(0, 1, 1);
  auto d = Zeros();
  bool moved = false;
  slot.Read(t.h.data(), &d, &moved);  // the first read scans every CPU
  EXPECT_EQ(slot.scanned(), 2u);
  slot.Read(t.h.data(), &d, &moved);  // CPU 0 moved at the last read: once more
  EXPECT_EQ(slot.scanned(), 1u);
  EXPECT_FALSE(moved);
  slot.Read(t.h.data(), &d, &moved);
  EXPECT_EQ(slot.scanned(), 0u);
  t.Add(1, 2, 2);
  slot.Read(t.h.data(), &d, &moved);
  EXPECT_EQ(slot.scanned(), 1u);
  EXPECT_TRUE(moved);
  EXPECT_EQ(d[1], 1u);
  EXPECT_EQ(d[2], 1u);
}

TEST(HistogramSlotTest, ABucketThatShowsAfterItsCountIsTakenAtTheNextRead) {
  TwoCpus t;
  HistogramSlot slot(2);
  auto d = Zeros();
  bool moved = false;
  slot.Read(t.h.data(), &d, &moved);
  slot.Read(t.h.data(), &d, &moved);
  ASSERT_EQ(slot.scanned(), 0u);
  // A weakly ordered CPU: the reader sees `count` move before the bucket.
  ++t.h[1].count;
  slot.Read(t.h.data(), &d, &moved);
  EXPECT_FALSE(moved);
  ++t.h[1].buckets[40];
  t.h[1].sum_ns += 40;
  slot.Read(t.h.data(), &d, &moved);  // `count` did not move since, the bucket did
  EXPECT_TRUE(moved);
  EXPECT_EQ(d[40], 1u);
}

TEST(HistogramSlotTest, DeltasWrapModuloTwoToThe32PerCpu) {
  TwoCpus t;
  HistogramSlot slot(2);
  t.h[0].buckets[5] = 0xFFFFFFFFu;
  t.h[0].count = 1;
  auto d = Zeros();
  bool moved = false;
  slot.Read(t.h.data(), &d, &moved);
  d = Zeros();
  t.h[0].buckets[5] = 3;  // four more, wrapped
  ++t.h[0].count;
  slot.Read(t.h.data(), &d, &moved);
  EXPECT_EQ(d[5], 4u);
}

}  // namespace
}  // namespace spintune
