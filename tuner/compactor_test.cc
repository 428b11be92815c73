#include "tuner/compactor.h"

#include <unistd.h>

#include <atomic>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "storage/sql_db.h"

namespace spintune {
namespace {

// The compactor thread bounds the exactly-once ledger: rows past the
// retention go (in chunks), a target's newest and recent rows stay.
TEST(Compactor, PrunesTheLedgerPastItsRetention) {
  const std::string path =
      absl::StrCat(::testing::TempDir(), "/compactor_test_", getpid(), ".db");
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
  auto store = Store::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  TargetRecord board;
  board.agent_id = "agent-1";
  board.board = "sim";
  auto id = (*store)->UpsertTarget(board);
  ASSERT_TRUE(id.ok()) << id.status();
  for (uint64_t seq = 1; seq <= 9; ++seq) {
    SequencedBatch b;
    b.target_id = *id;
    b.seq = b.last_seq = seq;
    b.dropped = true;  // a placeholder: a ledger row and nothing else
    auto r = (*store)->IngestBatches({b});
    ASSERT_TRUE(r.ok() && (*r)[0].outcome == IngestOutcome::kStored) << r.status();
  }
  auto db = OpenSqlDb(path);
  ASSERT_TRUE(db.ok()) << db.status();
  ASSERT_TRUE((*db)->Exec("UPDATE ingested SET received_at = '2020-01-01T00:00:00Z' "
                          "WHERE seq <= 6").ok());
  auto oldest = [&] {
    auto q = (*db)->Prepare("SELECT MIN(seq), COUNT(*) FROM ingested");
    EXPECT_TRUE(q.ok() && *(*q)->Step());
    return std::make_pair((*q)->ColumnInt(0), (*q)->ColumnInt(1));
  };
  CompactorOptions options;
  options.db_path = path;
  options.period = absl::Milliseconds(5);
  options.ledger_chunk_rows = 2;
  std::atomic<int> errors{0};
  auto compactor = Compactor::Create(options, [&](const absl::Status&) { ++errors; });
  ASSERT_TRUE(compactor.ok()) << compactor.status();
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (oldest().first != 7 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
  compactor->reset();
  // 1..6 were received long ago, 7..9 now.
  EXPECT_EQ(oldest(), std::make_pair(int64_t{7}, int64_t{3}));
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(*(*store)->LastDurableSeq(*id), 9u);
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
}

}  // namespace
}  // namespace spintune
