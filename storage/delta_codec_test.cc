#include "storage/delta_codec.h"

#include "gtest/gtest.h"

namespace spintune {
namespace {

TEST(DeltaCodec, RoundTripsEveryField) {
  BatchDelta d;
  KeyEvidence k;
  k.key = {"big", "mmc0", 25, 13};
  k.histogram.Record(20'000, 7);
  k.histogram.Record(300'000, 2);
  k.errors = 1;
  k.irq_timeouts = 2;
  k.spin_timeouts = 3;
  k.irq_path = 4;
  k.spin_path = 5;
  d.keys.push_back(k);
  DispatchRecord r{"big", "mmc0", {}, {}};
  r.handler.Record(3'000, 4);
  r.wake.Record(9'000, 4);
  d.dispatch.push_back(r);
  d.completion_samples = 9;
  d.dispatch_samples = 4;
  auto back = DecodeBatchDelta(EncodeBatchDelta(d));
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->keys.size(), 1u);
  EXPECT_EQ(back->keys[0].key, k.key);
  EXPECT_EQ(back->keys[0].histogram, k.histogram);
  EXPECT_EQ(back->keys[0].errors, 1u);
  EXPECT_EQ(back->keys[0].irq_timeouts, 2u);
  EXPECT_EQ(back->keys[0].spin_timeouts, 3u);
  EXPECT_EQ(back->keys[0].irq_path, 4u);
  EXPECT_EQ(back->keys[0].spin_path, 5u);
  ASSERT_EQ(back->dispatch.size(), 1u);
  EXPECT_EQ(back->dispatch[0].handler, r.handler);
  EXPECT_EQ(back->dispatch[0].wake, r.wake);
  EXPECT_EQ(back->completion_samples, 9u);
  EXPECT_EQ(back->dispatch_samples, 4u);
}

TEST(DeltaCodec, RefusesDamagedBytes) {
  BatchDelta d;
  KeyEvidence k;
  k.key = {"c", "d", 1, 2};
  k.histogram.Record(5, 1);
  d.keys.push_back(k);
  const std::string good = EncodeBatchDelta(d);
  EXPECT_FALSE(DecodeBatchDelta("").ok());
  EXPECT_FALSE(DecodeBatchDelta("\x02" + good.substr(1)).ok()) << "unknown version";
  for (size_t n = 1; n < good.size(); ++n) {
    EXPECT_FALSE(DecodeBatchDelta(good.substr(0, n)).ok()) << "truncated at " << n;
  }
  EXPECT_FALSE(DecodeBatchDelta(good + "x").ok()) << "trailing bytes";
}

}  // namespace
}  // namespace spintune
