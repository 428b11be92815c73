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
    for (uint64_t seq = 1; seq <= 5; ++seq) ASSERT_TRUE((*spool)->Append(Batch(seq, 10)).ok());
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
  EXPECT_EQ((*again)->max_seq(), 5u);
}

TEST(BatchSpoolTest, FullSpoolDropsTheOldestAndRemembersWhatItDropped) {
  testing::TempDir dir;
  const std::string path = dir.File("spool");
  const uint64_t one = Batch(1, 100).SerializeAsString().size();
  {
    auto spool = BatchSpool::Open(path, 3 * one + one / 2);
    ASSERT_TRUE(spool.ok());
    for (uint64_t seq = 1; seq <= 3; ++seq) {
      auto d = (*spool)->Append(Batch(seq, 100));
      ASSERT_TRUE(d.ok());
      EXPECT_TRUE(d->empty());
    }
    auto d = (*spool)->Append(Batch(4, 100));
    ASSERT_TRUE(d.ok());
    ASSERT_EQ(*d, std::vector<uint64_t>{1});
    EXPECT_LE((*spool)->bytes(), 3 * one + one / 2);
    EXPECT_EQ((*spool)->dropped().batches, 1u);
    EXPECT_EQ((*spool)->dropped().samples, 100u);
  }
  auto again = BatchSpool::Open(path, 3 * one + one / 2);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->dropped().samples, 100u) << "kept until the tuner is told";
  (*again)->ClearDropped();
  auto cleared = BatchSpool::Open(path, 3 * one + one / 2);
  EXPECT_EQ((*cleared)->dropped().samples, 0u);
}

TEST(BatchSpoolTest, CrashLeftoversAreCleanedUp) {
  testing::TempDir dir;
  const std::string path = dir.File("spool");
  std::filesystem::create_directories(path);
  std::ofstream(path + "/00000000000000000007.batch") << "\xff\xff garbage";
  std::ofstream(path + "/00000000000000000008.batch.tmp.123") << "half";
  auto spool = BatchSpool::Open(path, 1 << 20);
  ASSERT_TRUE(spool.ok());
  EXPECT_EQ((*spool)->count(), 0u);
  EXPECT_EQ((*spool)->dropped().batches, 1u);
  EXPECT_FALSE(std::filesystem::exists(path + "/00000000000000000008.batch.tmp.123"));
  EXPECT_FALSE(BatchSpool::Open(path, 0).ok());
}

}  // namespace
}  // namespace spintune
