#include "agent/batch_spool.h"

#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"

namespace spintune {
namespace {

v1::SampleBatch Batch(uint64_t seq, int samples) {
  v1::SampleBatch b;
  b.set_seq(seq);
  for (int i = 0; i < samples; ++i) {
    b.mutable_completions()->add_wait_ns(1000 + static_cast<uint64_t>(i));
    b.mutable_completions()->add_opcode(17);
  }
  return b;
}

TEST(BatchSpoolTest, KeepsBatchesAcrossReopenUntilAcknowledged) {
  testing::TempDir dir;
  const std::string path = dir.File("spool");
  {
    auto spool = BatchSpool::Open(path, 1 << 20);
    ASSERT_TRUE(spool.ok()) << spool.status();
    for (uint64_t seq = 1; seq <= 5; ++seq) ASSERT_TRUE((*spool)->Append(Batch(seq, 10), 1).ok());
    (*spool)->AckThrough(2);
    (*spool)->Remove(4);  // refused for its content
    EXPECT_EQ((*spool)->count(), 2u);
  }
  auto again = BatchSpool::Open(path, 1 << 20);
  ASSERT_TRUE(again.ok());
  auto batches = (*again)->LoadAll();
  ASSERT_TRUE(batches.ok());
  ASSERT_EQ(batches->size(), 2u);
  EXPECT_EQ((*batches)[0].seq(), 3u);
  EXPECT_EQ((*batches)[1].seq(), 5u);
  EXPECT_EQ((*batches)[1].completions().wait_ns_size(), 10);
  EXPECT_EQ((*again)->last_seq(), 5u);
}

TEST(BatchSpoolTest, RemembersTheLastSeqWhenEverythingIsAcknowledged) {
  testing::TempDir dir;
  const std::string path = dir.File("spool");
  {
    auto spool = BatchSpool::Open(path, 1 << 20);
    ASSERT_TRUE(spool.ok());
    for (uint64_t seq = 1; seq <= 3; ++seq) ASSERT_TRUE((*spool)->Append(Batch(seq, 10), 1).ok());
    (*spool)->AckThrough(3);
    EXPECT_EQ((*spool)->count(), 0u);
    EXPECT_EQ((*spool)->last_seq(), 3u);
  }
  auto again = BatchSpool::Open(path, 1 << 20);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->last_seq(), 3u) << "a restarted agent knows where its sequence stands";
}

TEST(BatchSpoolTest, FullSpoolReplacesTheOldestUnsentByOneMergedPlaceholder) {
  testing::TempDir dir;
  const std::string path = dir.File("spool");
  const uint64_t one = Batch(1, 100).SerializeAsString().size();
  {
    auto spool = BatchSpool::Open(path, 3 * one + one / 2);
    ASSERT_TRUE(spool.ok());
    for (uint64_t seq = 1; seq <= 3; ++seq) {
      auto d = (*spool)->Append(Batch(seq, 100), 1);
      ASSERT_TRUE(d.ok());
      EXPECT_EQ(d->batches, 0u);
    }
    // Seq 1 is in flight (may be stored): only 2 and later may go.
    auto d = (*spool)->Append(Batch(4, 100), 2);
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(d->batches, 1u);
    EXPECT_EQ(d->samples, 100u);
    ASSERT_EQ(d->placeholders.size(), 1u);
    EXPECT_EQ(d->placeholders[0].seq(), 2u);
    EXPECT_EQ(d->placeholders[0].dropped().last_seq(), 2u);
    EXPECT_TRUE(d->removed.empty());
    // The next drop extends the placeholder instead of adding one.
    d = (*spool)->Append(Batch(5, 100), 2);
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(d->batches, 1u);
    ASSERT_EQ(d->placeholders.size(), 1u);
    EXPECT_EQ(d->placeholders[0].seq(), 2u);
    EXPECT_EQ(d->placeholders[0].dropped().last_seq(), 3u);
    EXPECT_EQ(d->placeholders[0].dropped().samples(), 200u);
    EXPECT_EQ(d->removed, std::vector<uint64_t>{3});
    EXPECT_LE((*spool)->bytes(), 3 * one + one / 2);
  }
  auto again = BatchSpool::Open(path, 3 * one + one / 2);
  ASSERT_TRUE(again.ok());
  auto batches = (*again)->LoadAll();
  ASSERT_TRUE(batches.ok());
  std::vector<uint64_t> seqs;
  for (const auto& b : *batches) seqs.push_back(b.seq());
  EXPECT_EQ(seqs, (std::vector<uint64_t>{1, 2, 4, 5})) << "no seq is skipped";
  EXPECT_TRUE((*batches)[1].has_dropped());
  EXPECT_EQ((*again)->last_seq(), 5u);
}

TEST(BatchSpoolTest, ShiftRenumbersBatchesAndPlaceholders) {
  testing::TempDir dir;
  const std::string path = dir.File("spool");
  auto spool = BatchSpool::Open(path, 1 << 20);
  ASSERT_TRUE(spool.ok());
  for (uint64_t seq = 1; seq <= 4; ++seq) ASSERT_TRUE((*spool)->Append(Batch(seq, 10), 1).ok());
  ASSERT_TRUE((*spool)->Shift(3).ok());
  auto batches = (*spool)->LoadAll();
  ASSERT_TRUE(batches.ok());
  std::vector<uint64_t> seqs;
  for (const auto& b : *batches) seqs.push_back(b.seq());
  EXPECT_EQ(seqs, (std::vector<uint64_t>{4, 5, 6, 7}));
  ASSERT_TRUE((*spool)->Shift(-2).ok());
  auto reopened = BatchSpool::Open(path, 1 << 20);
  ASSERT_TRUE(reopened.ok());
  batches = (*reopened)->LoadAll();
  seqs.clear();
  for (const auto& b : *batches) seqs.push_back(b.seq());
  EXPECT_EQ(seqs, (std::vector<uint64_t>{2, 3, 4, 5}));
  EXPECT_FALSE((*reopened)->Shift(-2).ok()) << "no seq below 1";
}

TEST(BatchSpoolTest, CrashLeftoversAreCleanedUpAndDamageKeepsItsSeq) {
  testing::TempDir dir;
  const std::string path = dir.File("spool");
  std::filesystem::create_directories(path);
  std::ofstream(path + "/00000000000000000007.batch") << "\xff\xff garbage";
  std::ofstream(path + "/00000000000000000008.batch.tmp.123") << "half";
  auto spool = BatchSpool::Open(path, 1 << 20);
  ASSERT_TRUE(spool.ok());
  EXPECT_EQ((*spool)->unreadable(), 1u);
  auto batches = (*spool)->LoadAll();
  ASSERT_TRUE(batches.ok());
  ASSERT_EQ(batches->size(), 1u);
  EXPECT_EQ((*batches)[0].seq(), 7u);
  EXPECT_EQ((*batches)[0].dropped().last_seq(), 7u) << "sent as one dropped batch";
  EXPECT_FALSE(std::filesystem::exists(path + "/00000000000000000008.batch.tmp.123"));
  EXPECT_FALSE(BatchSpool::Open(path, 0).ok());
}

}  // namespace
}  // namespace spintune
