// Histogram batches (SampleBatch.histograms / dispatch_histograms): what the
// agent's BPF capture encodes decodes into the same KeyEvidence a batch of
// the same samples as columns gives, and every malformed delta is refused
// naming its field.
#include "tuner/batch_decoder.h"

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "agent/capture/histogram_batch.h"
#include "gtest/gtest.h"
#include "models/latency_histogram.h"
#include "storage/delta_codec.h"

namespace spintune {
namespace {

v1::Hello TwoDeviceHello() {
  v1::Hello h;
  h.set_agent_id("a");
  h.mutable_target()->set_board("b");
  auto* c = h.mutable_target()->add_cpu_classes();
  c->set_name("default");
  c->mutable_costs()->set_irq_cpu_ns(8000);
  c->mutable_costs()->set_irq_wake_ns(40000);
  c->mutable_costs()->set_poll_read_ns(200);
  c->mutable_costs()->set_timer_cpu_ns(15000);
  c->mutable_costs()->set_timer_wake_ns(15000);
  h.add_devices()->set_name("vda");
  h.add_devices()->set_name("mmc0");
  return h;
}

BucketCounts CountsOf(const std::vector<uint64_t>& waits) {
  LatencyHistogram h;
  BucketCounts b;
  for (uint64_t w : waits) {
    h.Record(w);
    b.sum_ns += w;
  }
  b.buckets = h.buckets();
  b.count = h.total_count();
  return b;
}

// A well-formed batch: one key's delta of three waits.
v1::SampleBatch OneKeyBatch() {
  v1::SampleBatch b;
  b.set_seq(1);
  v1::KeyHistogram* h = b.add_histograms();
  h->set_device_index(0);
  h->set_opcode(1);
  h->set_size_class(13);
  BucketCountsToProto(CountsOf({1000, 2000, 2000}), h->mutable_wait());
  return b;
}

// `b` is refused as InvalidArgument naming `field` first, by decoding and
// by staging (which encodes the batch as it checks it) alike.
void ExpectRefusedNaming(const v1::SampleBatch& b, const v1::Hello& hello,
                         const std::string& field) {
  auto d = DecodeBatch(b, hello);
  ASSERT_FALSE(d.ok()) << field;
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(d.status().message()).rfind(field + ":", 0), 0u)
      << d.status().message() << " (expected " << field << ")";
  EXPECT_EQ(DecodeBatchForStaging(b, hello).status(), d.status());
}

TEST(HistogramBatchTest, DecodesLikeTheSameSamplesAsColumns) {
  const v1::Hello hello = TwoDeviceHello();
  const std::vector<uint64_t> waits = {90, 255, 256, 4000, 4001, 4002, 100000, 123456789, 4000};
  KeyHistogramDelta k;
  k.device = "mmc0";
  k.opcode = 18;
  k.size_class = 13;
  k.wait = CountsOf(waits);
  k.irq_path = 5;
  k.spin_path = 3;
  k.errors = 1;
  DispatchHistogramDelta d;
  d.device = "vda";
  d.handler = CountsOf({1000, 1100, 900});
  d.wake = CountsOf({20000, 30000});
  v1::SampleBatch hist;
  hist.set_seq(7);
  uint64_t dropped = 0;
  EXPECT_EQ(AppendHistograms({k}, {d}, {{"vda", 0}, {"mmc0", 1}}, &hist, &dropped), waits.size());
  EXPECT_EQ(dropped, 0u);

  v1::SampleBatch cols;
  cols.set_seq(7);
  for (size_t i = 0; i < waits.size(); ++i) {
    auto* c = cols.mutable_completions();
    c->add_device_index(1);
    c->add_cpu_class_index(0);
    c->add_opcode(18);
    c->add_bytes(4096);
    c->add_wait_ns(waits[i]);
    c->add_path(i < 5 ? v1::WAIT_PATH_IRQ : i < 8 ? v1::WAIT_PATH_SPIN : v1::WAIT_PATH_UNKNOWN);
    c->add_flags(i == 0 ? 1 : 0);
  }
  auto from_hist = DecodeBatch(hist, hello);
  auto from_cols = DecodeBatch(cols, hello);
  ASSERT_TRUE(from_hist.ok()) << from_hist.status();
  ASSERT_TRUE(from_cols.ok()) << from_cols.status();
  ASSERT_EQ(from_hist->keys.size(), 1u);
  const KeyEvidence& a = from_hist->keys[0];
  const KeyEvidence& b = from_cols->keys[0];
  EXPECT_EQ(a.key.device, "mmc0");
  EXPECT_EQ(a.key.cpu_class, "default");
  EXPECT_EQ(a.key.opcode, 18u);
  EXPECT_EQ(a.key.size_class, b.key.size_class);
  EXPECT_EQ(a.histogram, b.histogram);
  EXPECT_EQ(a.irq_path, b.irq_path);
  EXPECT_EQ(a.spin_path, b.spin_path);
  EXPECT_EQ(a.errors, b.errors);
  EXPECT_EQ(from_hist->completion_samples, waits.size());
  ASSERT_EQ(from_hist->dispatch.size(), 1u);
  EXPECT_EQ(from_hist->dispatch[0].device, "vda");
  EXPECT_EQ(from_hist->dispatch[0].handler.total_count(), 3u);
  EXPECT_EQ(from_hist->dispatch[0].wake.total_count(), 2u);
  EXPECT_EQ(from_hist->dispatch_samples, 3u);
}

// Dispatch columns are counted per bucket, not recorded one by one: the
// histograms must be the ones Record() of every sample gives, per (cpu
// class, device), with a wake of 0 (not measured) left out.
TEST(HistogramBatchTest, DispatchColumnsGiveTheHistogramsOfTheirSamples) {
  const v1::Hello hello = TwoDeviceHello();
  const std::vector<uint64_t> handler = {5000, 900, 5000, 123456, 900, 901, 70, 5000};
  const std::vector<uint64_t> wake = {0, 20000, 20000, 0, 7, 99999999, 20001, 30000};
  const std::vector<uint32_t> device = {1, 0, 1, 1, 0, 1, 1, 0};
  v1::SampleBatch cols;
  cols.set_seq(1);
  LatencyHistogram want_handler[2], want_wake[2];
  for (size_t i = 0; i < handler.size(); ++i) {
    auto* d = cols.mutable_dispatches();
    d->add_cpu_class_index(0);
    d->add_device_index(device[i]);
    d->add_handler_ns(handler[i]);
    d->add_wake_ns(wake[i]);
    want_handler[device[i]].Record(handler[i]);
    if (wake[i] > 0) want_wake[device[i]].Record(wake[i]);
  }
  auto decoded = DecodeBatch(cols, hello);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  ASSERT_EQ(decoded->dispatch.size(), 2u);
  for (const DispatchRecord& r : decoded->dispatch) {
    const int dev = r.device == "vda" ? 0 : 1;
    EXPECT_EQ(r.cpu_class, "default");
    EXPECT_EQ(r.handler, want_handler[dev]) << r.device;
    EXPECT_EQ(r.wake, want_wake[dev]) << r.device;
  }
  EXPECT_EQ(decoded->dispatch_samples, handler.size());
}

TEST(HistogramBatchTest, MalformedDeltasAreRefusedNamingTheField) {
  const v1::Hello hello = TwoDeviceHello();
  auto base = OneKeyBatch;
  ASSERT_TRUE(DecodeBatch(base(), hello).ok());
  const std::vector<std::pair<std::function<void(v1::SampleBatch*)>, std::string>> cases = {
      {[](v1::SampleBatch* b) { b->mutable_histograms(0)->set_device_index(2); },
       "histograms[0].device_index"},
      {[](v1::SampleBatch* b) { b->mutable_histograms(0)->set_cpu_class_index(1); },
       "histograms[0].cpu_class_index"},
      {[](v1::SampleBatch* b) { b->mutable_histograms(0)->set_size_class(65); },
       "histograms[0].size_class"},
      {[](v1::SampleBatch* b) { b->mutable_histograms(0)->set_opcode(0xFFFFFFFFu); },
       "histograms[0].opcode"},
      {[](v1::SampleBatch* b) { b->mutable_histograms(0)->mutable_wait()->set_bucket_index(1, 0); },
       "histograms[0].wait.bucket_index[1]"},
      {[](v1::SampleBatch* b) { b->mutable_histograms(0)->mutable_wait()->set_bucket_index(1, 5000); },
       "histograms[0].wait.bucket_index[1]"},
      {[](v1::SampleBatch* b) { b->mutable_histograms(0)->mutable_wait()->set_bucket_count(0, 0); },
       "histograms[0].wait.bucket_count[0]"},
      {[](v1::SampleBatch* b) { b->mutable_histograms(0)->mutable_wait()->add_bucket_count(1); },
       "histograms[0].wait"},
      {[](v1::SampleBatch* b) { b->mutable_histograms(0)->mutable_wait()->set_count(4); },
       "histograms[0].wait.count"},
      {[](v1::SampleBatch* b) { b->mutable_histograms(0)->mutable_wait()->set_sum_ns(1); },
       "histograms[0].wait.sum_ns"},
      {[](v1::SampleBatch* b) { b->mutable_histograms(0)->set_irq_path(4); }, "histograms[0]"},
      {[](v1::SampleBatch* b) {
         b->mutable_histograms(0)->set_spin_path(1);
         b->mutable_histograms(0)->set_spin_timeouts(2);
       },
       "histograms[0]"},
      {[](v1::SampleBatch* b) { b->add_dispatch_histograms()->set_device_index(9); },
       "dispatch_histograms[0].device_index"},
  };
  for (const auto& [mutate, field] : cases) {
    v1::SampleBatch b = base();
    mutate(&b);
    ExpectRefusedNaming(b, hello, field);
  }
}

// DecodeBatchForStaging: a batch of distinct keys' histogram deltas (encoded
// as they are checked, in the batch's order) and one that is not (a key
// twice, and sample columns: decoded, then encoded) stage what
// EncodeBatchDelta(DecodeBatch()) stages, key for key; the delta kept for
// the ingest worker has the keys and counts but no histograms.
TEST(HistogramBatchTest, StagingEncodesWhatDecodingGives) {
  const v1::Hello hello = TwoDeviceHello();
  auto key_delta = [](uint32_t device, uint32_t opcode, const std::vector<uint64_t>& waits) {
    v1::KeyHistogram h;
    h.set_device_index(device);
    h.set_opcode(opcode);
    h.set_size_class(12);
    h.set_irq_path(1);
    BucketCountsToProto(CountsOf(waits), h.mutable_wait());
    return h;
  };
  v1::SampleBatch distinct;
  distinct.set_seq(3);
  *distinct.add_histograms() = key_delta(1, 18, {90, 255, 256, 4000, 4001, 123456789});
  *distinct.add_histograms() = key_delta(0, 25, {7000});
  *distinct.add_histograms() = key_delta(0, 17, {60000, 60000, 61000});
  auto* d = distinct.add_dispatch_histograms();
  d->set_device_index(1);
  BucketCountsToProto(CountsOf({1000, 1100}), d->mutable_handler());
  BucketCountsToProto(CountsOf({20000}), d->mutable_wake());
  v1::SampleBatch mixed = distinct;
  *mixed.add_histograms() = key_delta(0, 25, {7100, 7200});  // key (0, 25) again
  auto* c = mixed.mutable_completions();
  c->add_device_index(1);
  c->add_cpu_class_index(0);
  c->add_opcode(18);
  c->add_bytes(4096);
  c->add_wait_ns(5000);
  c->add_path(v1::WAIT_PATH_IRQ);
  c->add_flags(0);
  for (const v1::SampleBatch* batch : {&distinct, &mixed}) {
    auto decoded = DecodeBatch(*batch, hello);
    auto staged = DecodeBatchForStaging(*batch, hello);
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    ASSERT_TRUE(staged.ok()) << staged.status();
    auto restored = DecodeBatchDelta(staged->staged);
    ASSERT_TRUE(restored.ok()) << restored.status();
    auto round_trip = DecodeBatchDelta(EncodeBatchDelta(*decoded));
    ASSERT_TRUE(round_trip.ok()) << round_trip.status();
    std::map<PolicyKey, const KeyEvidence*> want;
    for (const KeyEvidence& k : round_trip->keys) want[k.key] = &k;
    ASSERT_EQ(restored->keys.size(), want.size());
    for (const KeyEvidence& k : restored->keys) {
      ASSERT_EQ(want.count(k.key), 1u) << k.key.opcode;
      const KeyEvidence& w = *want[k.key];
      EXPECT_EQ(k.histogram, w.histogram) << k.key.opcode;
      EXPECT_EQ(k.irq_path, w.irq_path);
      EXPECT_EQ(k.errors, w.errors);
    }
    EXPECT_EQ(restored->completion_samples, decoded->completion_samples);
    EXPECT_EQ(restored->dispatch_samples, decoded->dispatch_samples);
    ASSERT_EQ(restored->dispatch.size(), 1u);
    EXPECT_EQ(restored->dispatch[0].handler, decoded->dispatch[0].handler);
    EXPECT_EQ(restored->dispatch[0].wake, decoded->dispatch[0].wake);
    // What the worker keeps.
    EXPECT_EQ(staged->delta.keys.size(), want.size());
    EXPECT_EQ(staged->delta.completion_samples, decoded->completion_samples);
    for (const KeyEvidence& k : staged->delta.keys) EXPECT_EQ(k.histogram.total_count(), 0u);
  }
  EXPECT_EQ(DecodeBatchForStaging(mixed, hello)->staged,
            EncodeBatchDelta(*DecodeBatch(mixed, hello)));
}

// HistogramDelta.buckets (what `spintune-agent --histogram-wire bytes`
// sends): the same buckets as the arrays decode into the same evidence and
// stage into the same bytes, in a smaller message.
TEST(HistogramBatchTest, BucketsAsBytesDecodeAndStageAsTheArraysDo) {
  const v1::Hello hello = TwoDeviceHello();
  v1::SampleBatch arrays;
  arrays.set_seq(4);
  for (uint32_t opcode = 0; opcode < 3; ++opcode) {
    v1::KeyHistogram* h = arrays.add_histograms();
    h->set_device_index(opcode % 2);
    h->set_opcode(opcode);
    h->set_size_class(12);
    std::vector<uint64_t> waits = {90, 255, 256, 4000, 4001, 123456789};
    for (int i = 0; i < 40; ++i) waits.push_back(50000 + 997 * i * (opcode + 1));
    for (int i = 0; i < 30; ++i) waits.push_back(777777);  // a count above 15
    h->set_irq_path(waits.size());
    BucketCountsToProto(CountsOf(waits), h->mutable_wait());
  }
  auto* d = arrays.add_dispatch_histograms();
  d->set_device_index(1);
  BucketCountsToProto(CountsOf({1000, 1100, 1100}), d->mutable_handler());
  BucketCountsToProto(CountsOf({20000}), d->mutable_wake());
  v1::SampleBatch bytes = arrays;
  PackBuckets(&bytes);
  ASSERT_EQ(bytes.histograms(0).wait().bucket_index_size(), 0);
  ASSERT_FALSE(bytes.histograms(0).wait().buckets().empty());
  ASSERT_FALSE(bytes.dispatch_histograms(0).handler().buckets().empty());
  EXPECT_LT(bytes.ByteSizeLong(), arrays.ByteSizeLong() * 3 / 4);

  auto want = DecodeBatch(arrays, hello);
  auto got = DecodeBatch(bytes, hello);
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->keys.size(), want->keys.size());
  for (size_t i = 0; i < want->keys.size(); ++i) {
    EXPECT_EQ(got->keys[i].key, want->keys[i].key);
    EXPECT_EQ(got->keys[i].histogram, want->keys[i].histogram) << i;
    EXPECT_EQ(got->keys[i].irq_path, want->keys[i].irq_path);
  }
  EXPECT_EQ(got->completion_samples, want->completion_samples);
  ASSERT_EQ(got->dispatch.size(), 1u);
  EXPECT_EQ(got->dispatch[0].handler, want->dispatch[0].handler);
  EXPECT_EQ(got->dispatch[0].wake, want->dispatch[0].wake);
  EXPECT_EQ(got->dispatch_samples, want->dispatch_samples);
  auto staged_arrays = DecodeBatchForStaging(arrays, hello);
  auto staged_bytes = DecodeBatchForStaging(bytes, hello);
  ASSERT_TRUE(staged_arrays.ok()) << staged_arrays.status();
  ASSERT_TRUE(staged_bytes.ok()) << staged_bytes.status();
  EXPECT_EQ(staged_bytes->staged, staged_arrays->staged);
  EXPECT_EQ(staged_bytes->delta.completion_samples, want->completion_samples);
}

TEST(HistogramBatchTest, MalformedBucketBytesAreRefusedNamingTheField) {
  const v1::Hello hello = TwoDeviceHello();
  auto base = [] {
    v1::SampleBatch b = OneKeyBatch();
    auto* d = b.add_dispatch_histograms();
    BucketCountsToProto(CountsOf({1000}), d->mutable_handler());
    PackBuckets(&b);
    return b;
  };
  ASSERT_TRUE(DecodeBatch(base(), hello).ok());
  auto wait = [](v1::SampleBatch* b) { return b->mutable_histograms(0)->mutable_wait(); };
  // An escaped bucket: a byte 0, then the gap and the count as varints.
  auto escaped = [](uint64_t gap, uint64_t count) {
    std::string out(1, '\0');
    for (uint64_t v : {gap, count}) {
      while (v >= 0x80) {
        out.push_back(static_cast<char>((v & 0x7F) | 0x80));
        v >>= 7;
      }
      out.push_back(static_cast<char>(v));
    }
    return out;
  };
  const std::vector<std::pair<std::function<void(v1::SampleBatch*)>, std::string>> cases = {
      {[&](v1::SampleBatch* b) { wait(b)->add_bucket_index(1); }, "histograms[0].wait"},
      {[&](v1::SampleBatch* b) { (*wait(b)->mutable_buckets())[0] = '\x01'; },
       "histograms[0].wait.buckets"},
      {[&](v1::SampleBatch* b) { wait(b)->mutable_buckets()->push_back('\0'); },
       "histograms[0].wait.buckets"},  // truncated
      {[&](v1::SampleBatch* b) { *wait(b)->mutable_buckets() += escaped(5000, 1); },
       "histograms[0].wait.buckets"},  // beyond the last bucket
      {[&](v1::SampleBatch* b) { *wait(b)->mutable_buckets() += escaped(1, 0); },
       "histograms[0].wait.buckets"},  // a count of 0
      {[&](v1::SampleBatch* b) {
         *wait(b)->mutable_buckets() += escaped(1, kMaxHistogramCount + 1);
       },
       "histograms[0].wait.buckets[2]"},
      {[&](v1::SampleBatch* b) { *wait(b)->mutable_buckets() += escaped(1, 1); },
       "histograms[0].wait.count"},  // a sample more than `count` says
      {[&](v1::SampleBatch* b) { wait(b)->set_sum_ns(1); }, "histograms[0].wait.sum_ns"},
      {[](v1::SampleBatch* b) {
         b->mutable_dispatch_histograms(0)->mutable_handler()->mutable_buckets()->push_back('\0');
       },
       "dispatch_histograms[0].handler.buckets"},
  };
  for (const auto& [mutate, field] : cases) {
    v1::SampleBatch b = base();
    mutate(&b);
    ExpectRefusedNaming(b, hello, field);
  }
}

// Outcomes of the two arms of an A/B trial (issue 12): one entry per key,
// version and arm; an unknown arm is refused naming the field.
TEST(OutcomeBatchTest, KeepsEachArmOfAKeyAndVersion) {
  const v1::Hello hello = TwoDeviceHello();
  v1::SampleBatch batch;
  batch.set_seq(1);
  for (auto arm : {v1::OUTCOME_ARM_TABLE, v1::OUTCOME_ARM_INCUMBENT}) {
    v1::KeyOutcome* o = batch.add_outcomes();
    o->set_device_index(1);
    o->set_opcode(17);
    o->set_size_class(10);
    o->set_policy_version(3);
    o->set_requests(2);
    o->set_cpu_ns_sum(20);
    o->set_latency_ns_sum(40);
    o->set_cpu_ns_sq_sum(200);
    o->set_latency_ns_sq_sum(800);
    o->set_cpu_latency_ns_sum(400);
    o->set_arm(arm);
  }
  auto decoded = DecodeBatch(batch, hello);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  ASSERT_EQ(decoded->outcomes.size(), 2u);
  EXPECT_EQ(decoded->outcomes[0].arm, OutcomeArm::kTable);
  EXPECT_EQ(decoded->outcomes[1].arm, OutcomeArm::kIncumbent);
  v1::SampleBatch twice = batch;
  twice.mutable_outcomes(0)->set_arm(v1::OUTCOME_ARM_INCUMBENT);
  EXPECT_FALSE(DecodeBatch(twice, hello).ok()) << "the same key, version and arm twice";
  v1::SampleBatch unknown = batch;
  unknown.mutable_outcomes(1)->set_arm(static_cast<v1::OutcomeArm>(7));
  auto refused = DecodeBatch(unknown, hello);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("outcomes[1].arm"), std::string::npos)
      << refused.status();
}

}  // namespace
}  // namespace spintune
