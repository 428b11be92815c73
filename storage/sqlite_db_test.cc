#include "storage/sqlite_db.h"

#include <sys/stat.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "storage/write_gate.h"
#include "tests/testing/temp_dir.h"

namespace spintune {
namespace {

int64_t FileBytes(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : 0;
}

// The tuner's shape: a writer whose commits never pause (the ingest worker,
// no checkpoints of its own), a checkpointer (the compactor) and readers
// in short snapshots (the fitter, Hellos). A passive checkpoint never finds
// the whole log copied between two commits, so the log grew by every
// commit for as long as they went on (4 GB a minute in a fleet of 2,000
// agents); Checkpoint() restarts it once it holds the limit.
TEST(SqliteDb, TheLogStaysNearItsLimitUnderCommitsThatNeverPause) {
  const testing::TempDir dir;
  const std::string path = dir.File("log.db");
  constexpr int64_t kLimitBytes = int64_t{1} << 20;
  auto gate = std::make_shared<WriteGate>();
  auto open = [&](WritePriority priority) {
    auto db = SqliteDb::Open(path);
    EXPECT_TRUE(db.ok()) << db.status();
    (*db)->SetWriteGate(gate, priority);
    EXPECT_TRUE((*db)->SetLogLimit(kLimitBytes).ok());
    return std::move(*db);
  };
  std::unique_ptr<SqliteDb> writer = open(WritePriority::kUrgent);
  std::unique_ptr<SqliteDb> checkpointer = open(WritePriority::kBackground);
  std::unique_ptr<SqliteDb> reader = open(WritePriority::kBackground);
  writer->SetCommitCheckpoints(false);
  ASSERT_TRUE(writer->Exec("CREATE TABLE t(id INTEGER PRIMARY KEY, b BLOB NOT NULL)").ok());

  std::atomic<bool> done{false};
  std::thread checkpoints([&] {
    while (!done) {
      EXPECT_TRUE(checkpointer->Checkpoint().ok());
      absl::SleepFor(absl::Milliseconds(5));
    }
  });
  std::thread reads([&] {
    auto count = reader->Prepare("SELECT COUNT(*) FROM t");
    ASSERT_TRUE(count.ok()) << count.status();
    while (!done) {
      auto begun = reader->BeginSnapshot();
      ASSERT_TRUE(begun.ok()) << begun.status();
      EXPECT_TRUE((*count)->Step().ok());
      (*count)->Reset();
      if (*begun) reader->EndSnapshot();
    }
  });

  // 32 times the limit, in commits of 64 KiB.
  constexpr int kCommits = 512, kRowsPerCommit = 16;
  const std::string blob(4096, 'x');
  auto insert = writer->Prepare("INSERT INTO t(b) VALUES (?1)");
  ASSERT_TRUE(insert.ok()) << insert.status();
  int64_t longest_log_bytes = 0;
  for (int c = 0; c < kCommits; ++c) {
    ASSERT_TRUE(writer->Begin().ok());
    for (int r = 0; r < kRowsPerCommit; ++r) {
      ASSERT_TRUE((*insert)->BindBlob(1, blob).Step().ok());
      (*insert)->Reset();
    }
    ASSERT_TRUE(writer->Commit().ok());
    longest_log_bytes = std::max(longest_log_bytes, FileBytes(path + "-wal"));
  }
  done = true;
  checkpoints.join();
  reads.join();

  // The limit, plus what arrives between two checkpoints (a few MiB here:
  // this writer commits far faster than an ingest worker); without the
  // restarts the log holds everything written, over 40 MiB.
  EXPECT_LT(longest_log_bytes, 8 * kLimitBytes) << longest_log_bytes;
  auto count = writer->Prepare("SELECT COUNT(*) FROM t");
  ASSERT_TRUE(count.ok() && *(*count)->Step());
  EXPECT_EQ((*count)->ColumnInt(0), kCommits * kRowsPerCommit) << "nothing lost";
}

}  // namespace
}  // namespace spintune
