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
  EXPECT_FALSE(DecodeBatchDelta("\x03" + good.substr(1)).ok()) << "unknown version";
  for (size_t n = 1; n < good.size(); ++n) {
    EXPECT_FALSE(DecodeBatchDelta(good.substr(0, n)).ok()) << "truncated at " << n;
  }
  EXPECT_FALSE(DecodeBatchDelta(good + "x").ok()) << "trailing bytes";
}

// Version 2 keeps each outcome's arm; version 1 (staged before migration
// 10) is still read, every outcome on the table arm.
TEST(DeltaCodec, KeepsOutcomeArmsAndReadsVersion1) {
  BatchDelta d;
  OutcomeRecord o;
  o.key = {"c", "d", 1, 2};
  o.version = 3;
  o.moments = {10, 1e4, 2e4, 1e7, 4e7, 2e7};
  d.outcomes.push_back(o);
  o.arm = OutcomeArm::kIncumbent;
  d.outcomes.push_back(o);
  const std::string bytes = EncodeBatchDelta(d);
  auto back = DecodeBatchDelta(bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->outcomes.size(), 2u);
  EXPECT_EQ(back->outcomes[0].arm, OutcomeArm::kTable);
  EXPECT_EQ(back->outcomes[1].arm, OutcomeArm::kIncumbent);
  EXPECT_EQ(back->outcomes[1].moments.requests, 10u);
  // The same delta in version 1: no arm varint after each version.
  BatchDelta one;
  one.outcomes.push_back(d.outcomes[0]);
  std::string v2 = EncodeBatchDelta(one);
  // Key "c","d",1,2 and version 3 precede the arm in the encoding.
  const std::string before_arm = std::string("\x01" "c" "\x01" "d" "\x01\x02\x03", 7);
  const size_t at = v2.find(before_arm);
  ASSERT_NE(at, std::string::npos);
  std::string v1 = v2;
  v1.erase(at + before_arm.size(), 1);
  v1[0] = '\x01';
  auto old = DecodeBatchDelta(v1);
  ASSERT_TRUE(old.ok()) << old.status();
  ASSERT_EQ(old->outcomes.size(), 1u);
  EXPECT_EQ(old->outcomes[0].arm, OutcomeArm::kTable);
  EXPECT_EQ(old->outcomes[0].version, 3u);
  v2[at + before_arm.size()] = '\x02';
  EXPECT_FALSE(DecodeBatchDelta(v2).ok()) << "arm 2";
}

}  // namespace
}  // namespace spintune
