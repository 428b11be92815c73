#include "storage/store.h"

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <csignal>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "storage/backend_test.h"
#include "storage/migrations.h"
#include "storage/sql_db.h"
#include "storage/sqlite_db.h"
#include "tests/testing/policy_fixtures.h"
#include "tests/testing/store_fixtures.h"
#include "tests/testing/temp_dir.h"

namespace spintune {
namespace {

BatchDelta Batch(uint64_t seq, uint64_t value_ns, uint64_t count) {
  BatchDelta b;
  b.seq = seq;
  KeyEvidence k;
  k.key = {"rocket", "mmc0", 17, 10};
  k.histogram.Record(value_ns, count);
  k.irq_path = count;
  b.keys.push_back(k);
  DispatchRecord d;
  d.cpu_class = "rocket";
  d.device = "mmc0";
  d.handler.Record(3000, 2);
  d.wake.Record(9000, 2);
  b.dispatch.push_back(d);
  b.completion_samples = count;
  b.dispatch_samples = 2;
  return b;
}

class StoreTest : public BackendTest {
 protected:
  // A fresh database with one target, agent-1, whose sample windows hold
  // `window_samples`: store, id.
  void OpenOneTarget(uint64_t window_samples) {
    StoreOptions options;
    options.window_samples = window_samples;
    spec = NewDb(/*file=*/true);
    auto opened = Store::Open(spec, options);
    ASSERT_TRUE(opened.ok()) << opened.status();
    store = std::move(*opened);
    auto target = store->UpsertTarget(testing::RocketBoard("agent-1"));
    ASSERT_TRUE(target.ok()) << target.status();
    id = *target;
  }

  std::string spec;  // the database, to open it again
  std::unique_ptr<Store> store;
  int64_t id = 0;
};
INSTANTIATE_SPINTUNE_BACKENDS(StoreTest);

// A Hello's description is committed without a sync of its own
// (Store::UpsertTarget): the setting holds for that transaction only,
// committed or rolled back, and what it wrote is there.
TEST_P(StoreTest, ADeferredSyncTransactionKeepsItsRowsAndEndsWithIt) {
  auto db = OpenSqlDb(NewDb(/*file=*/true));
  ASSERT_TRUE(db.ok()) << db.status();
  SqlDb& sql = **db;
  ASSERT_TRUE(sql.Exec("CREATE TABLE t (x INTEGER)").ok());
  // SQLite: synchronous 2 = FULL, 1 = NORMAL; PostgreSQL: synchronous_commit.
  auto setting = [&] {
    auto q = sql.Prepare(postgres() ? "SHOW synchronous_commit" : "PRAGMA synchronous");
    EXPECT_TRUE(q.ok()) << q.status();
    auto row = (*q)->Step();
    EXPECT_TRUE(row.ok() && *row);
    return (*q)->ColumnText(0);
  };
  const std::string synced = postgres() ? "on" : "2";
  const std::string deferred = postgres() ? "off" : "1";
  ASSERT_EQ(setting(), synced);
  {
    Transaction tx(&sql, CommitSync::kDeferred);
    ASSERT_TRUE(tx.Begin().ok());
    EXPECT_EQ(setting(), deferred);
    ASSERT_TRUE(sql.Exec("INSERT INTO t VALUES (1)").ok());
    ASSERT_TRUE(tx.Commit().ok());
  }
  EXPECT_EQ(setting(), synced);
  {
    Transaction tx(&sql, CommitSync::kDeferred);
    ASSERT_TRUE(tx.Begin().ok());
    ASSERT_TRUE(sql.Exec("INSERT INTO t VALUES (2)").ok());
  }  // rolled back
  EXPECT_EQ(setting(), synced);
  auto count = sql.Prepare("SELECT COUNT(*), MAX(x) FROM t");
  ASSERT_TRUE(count.ok());
  ASSERT_TRUE(*(*count)->Step());
  EXPECT_EQ((*count)->ColumnInt(0), 1);
  EXPECT_EQ((*count)->ColumnInt(1), 1);
}

TEST_P(StoreTest, IngestsEachBatchExactlyOnce) {
  auto store = Store::Open(NewDb());
  ASSERT_TRUE(store.ok()) << store.status();
  auto id = (*store)->UpsertTarget(testing::RocketBoard("agent-1"));
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(*(*store)->LastDurableSeq(*id), 0u);
  EXPECT_TRUE(*(*store)->IngestBatch(*id, Batch(1, 1000, 10)));
  EXPECT_TRUE(*(*store)->IngestBatch(*id, Batch(2, 2000, 5)));
  // A resend of batch 1 changes nothing.
  EXPECT_FALSE(*(*store)->IngestBatch(*id, Batch(1, 1000, 10)));
  EXPECT_EQ(*(*store)->LastDurableSeq(*id), 2u);
  auto keys = (*store)->LoadKeys(*id);
  ASSERT_TRUE(keys.ok());
  ASSERT_EQ(keys->size(), 1u);
  EXPECT_EQ((*keys)[0].histogram.total_count(), 15u);
  EXPECT_EQ((*keys)[0].irq_path, 15u);
  auto target = (*store)->FindTarget("agent-1");
  ASSERT_TRUE(target.ok() && target->has_value());
  EXPECT_EQ((*target)->total_samples, 15u);
  EXPECT_EQ((*target)->total_dispatch_samples, 4u);
  auto dispatch = (*store)->LoadDispatch(*id);
  ASSERT_TRUE(dispatch.ok());
  ASSERT_EQ(dispatch->size(), 1u);
  EXPECT_EQ((*dispatch)[0].wake.total_count(), 4u);
}

// Fingerprints of version 2 (of a batch's bytes as received) since
// migration 12; rows stored before keep version 1 (of the batch's
// serialization again). Across that upgrade, a resend of an earlier row is
// compared with the resend's version 1 fingerprint (taken at its word when
// the tuner has none), a resend of a later row with its version 2 one.
TEST_P(StoreTest, ResendsAcrossTheFingerprintUpgradeStayExactlyOnce) {
  const std::string spec = NewDb(/*file=*/true);
  auto batch = [](uint64_t seq, uint64_t fingerprint, uint64_t legacy) {
    SequencedBatch b;
    b.target_id = 1;
    b.seq = b.last_seq = seq;
    b.fingerprint = fingerprint;
    b.legacy_fingerprint = legacy;
    static const BatchDelta delta = Batch(1, 1000, 10);
    b.delta = &delta;
    return b;
  };
  auto outcome = [](Store& store, const SequencedBatch& b) {
    auto r = store.IngestBatches({b});
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? (*r)[0].outcome : IngestOutcome::kOutOfOrder;
  };
  {
    // Stored by a tuner before migration 12 (schema 11, version 1 values).
    {
      auto store = Store::Open(spec);
      ASSERT_TRUE(store.ok()) << store.status();
      ASSERT_EQ(*(*store)->UpsertTarget(testing::RocketBoard("agent-1")), 1);
      EXPECT_EQ(outcome(**store, batch(1, 555, 0)), IngestOutcome::kStored);
    }
    auto db = OpenSqlDb(spec);
    ASSERT_TRUE(db.ok()) << db.status();
    // (Migration 13 runs again as it is: it copies pending_deltas.)
    ASSERT_TRUE((*db)->Exec("ALTER TABLE ingested DROP COLUMN fingerprint_version; "
                            "ALTER TABLE keys DROP COLUMN changed_through; "
                            "DELETE FROM schema_version WHERE version >= 12").ok());
    EXPECT_EQ(*SchemaVersion(db->get()), 11);
  }
  auto store = Store::Open(spec);  // migrates to 12 (and on)
  ASSERT_TRUE(store.ok()) << store.status();
  Store& s = **store;
  EXPECT_EQ(outcome(s, batch(1, 999, 555)), IngestOutcome::kDuplicate);
  EXPECT_EQ(outcome(s, batch(1, 555, 556)), IngestOutcome::kConflict);
  EXPECT_EQ(outcome(s, batch(1, 999, 0)), IngestOutcome::kDuplicate);  // no version 1 at hand
  EXPECT_EQ(outcome(s, batch(2, 777, 0)), IngestOutcome::kStored);
  EXPECT_EQ(outcome(s, batch(2, 777, 123)), IngestOutcome::kDuplicate);
  EXPECT_EQ(outcome(s, batch(2, 778, 777)), IngestOutcome::kConflict);
  EXPECT_EQ(*s.LastDurableSeq(1), 2u);
}

// The exactly-once ledger is bounded (Store::PruneLedger): rows received
// before the cutoff go, each target's oldest first, in chunks of at most
// max_rows rows (and targets looked at); a target's newest row stays. A
// resend of a pruned seq is a duplicate (taken at its word: nothing stored
// again), one of a kept seq with other content still a conflict.
TEST_P(StoreTest, PrunesLedgerRowsPastTheRetentionAndResendsStayExactlyOnce) {
  const std::string spec = NewDb(/*file=*/true);
  auto store = Store::Open(spec);
  ASSERT_TRUE(store.ok()) << store.status();
  Store& s = **store;
  auto db = OpenSqlDb(spec);  // a second connection, to age rows by hand
  ASSERT_TRUE(db.ok()) << db.status();
  const int64_t a = *s.UpsertTarget(testing::RocketBoard("agent-a"));
  const int64_t b = *s.UpsertTarget(testing::RocketBoard("agent-b"));
  const BatchDelta delta = Batch(1, 1000, 10);
  auto batch = [&](int64_t target, uint64_t seq, uint64_t fingerprint) {
    SequencedBatch sb;
    sb.target_id = target;
    sb.seq = sb.last_seq = seq;
    sb.fingerprint = fingerprint;
    sb.delta = &delta;
    return sb;
  };
  auto outcome = [&](const SequencedBatch& sb) {
    auto r = s.IngestBatches({sb});
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? (*r)[0].outcome : IngestOutcome::kOutOfOrder;
  };
  for (uint64_t seq = 1; seq <= 10; ++seq) {
    ASSERT_EQ(outcome(batch(a, seq, 100 + seq)), IngestOutcome::kStored);
  }
  for (uint64_t seq = 1; seq <= 3; ++seq) {
    ASSERT_EQ(outcome(batch(b, seq, 200 + seq)), IngestOutcome::kStored);
  }
  EXPECT_EQ(outcome(batch(a, 2, 999)), IngestOutcome::kConflict);  // before pruning
  // Received long ago: a's seqs 1..6, all of b's.
  ASSERT_TRUE((*db)->Exec(absl::StrCat("UPDATE ingested SET received_at = '2020-01-01T00:00:00Z' "
                                       "WHERE (target_id = ", a, " AND seq <= 6) OR target_id = ",
                                       b)).ok());
  auto seqs = [&](int64_t target) {
    std::vector<int64_t> out;
    auto q = (*db)->Prepare("SELECT seq FROM ingested WHERE target_id = ?1 ORDER BY seq");
    EXPECT_TRUE(q.ok()) << q.status();
    (*q)->Bind(1, target);
    while (true) {
      auto row = (*q)->Step();
      EXPECT_TRUE(row.ok()) << row.status();
      if (!row.ok() || !*row) break;
      out.push_back((*q)->ColumnInt(0));
    }
    return out;
  };
  auto summary = [&](int64_t target) {
    auto t = s.FindTarget(target == a ? "agent-a" : "agent-b");
    EXPECT_TRUE(t.ok() && t->has_value());
    auto keys = s.LoadKeys(target);
    EXPECT_TRUE(keys.ok() && keys->size() == 1u);
    auto dispatch = s.LoadDispatch(target);
    EXPECT_TRUE(dispatch.ok() && dispatch->size() == 1u);
    return std::vector<uint64_t>{(*t)->total_samples, (*t)->total_dispatch_samples, (*t)->last_seq,
                                 (*keys)[0].histogram.total_count(),
                                 (*dispatch)[0].wake.total_count()};
  };
  const auto a_before = summary(a), b_before = summary(b);
  EXPECT_EQ(a_before, (std::vector<uint64_t>{100, 20, 10, 100, 20}));

  const absl::Time cutoff = absl::Now() - absl::Hours(24 * 7);
  auto prune = [&](uint64_t max_rows, int64_t from) {
    auto r = s.PruneLedger(cutoff, max_rows, from);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : LedgerPrune{};
  };
  LedgerPrune p = prune(4, 0);  // a's 1..4: the chunk is full, a may have more
  EXPECT_EQ(p.deleted, 4u);
  EXPECT_EQ(p.next_target, a);
  EXPECT_EQ(seqs(a), (std::vector<int64_t>{5, 6, 7, 8, 9, 10}));
  p = prune(4, p.next_target);  // a's 5, 6 (7 is recent); b's 1, 2
  EXPECT_EQ(p.deleted, 4u);
  EXPECT_EQ(p.next_target, b);
  p = prune(4, p.next_target);  // b's 3 is its newest row: the resume point
  EXPECT_EQ(p.deleted, 0u);
  EXPECT_EQ(p.next_target, 0);
  EXPECT_EQ(seqs(a), (std::vector<int64_t>{7, 8, 9, 10}));
  EXPECT_EQ(seqs(b), (std::vector<int64_t>{3}));
  // Nothing left to prune: a call looks at most at max_rows targets.
  p = prune(1, 0);
  EXPECT_EQ(p.deleted, 0u);
  EXPECT_EQ(p.next_target, a + 1);

  // Resends of pruned seqs are duplicates, whatever their fingerprint; kept
  // seqs are checked as before.
  EXPECT_EQ(outcome(batch(a, 2, 999)), IngestOutcome::kDuplicate);
  EXPECT_EQ(outcome(batch(a, 6, 106)), IngestOutcome::kDuplicate);
  EXPECT_EQ(outcome(batch(a, 8, 108)), IngestOutcome::kDuplicate);
  EXPECT_EQ(outcome(batch(a, 8, 999)), IngestOutcome::kConflict);
  EXPECT_EQ(outcome(batch(b, 1, 999)), IngestOutcome::kDuplicate);
  EXPECT_EQ(outcome(batch(b, 3, 999)), IngestOutcome::kConflict);
  EXPECT_EQ(outcome(batch(a, 12, 112)), IngestOutcome::kOutOfOrder);
  EXPECT_EQ(summary(a), a_before);  // nothing stored twice, resume points kept
  EXPECT_EQ(summary(b), b_before);
  EXPECT_EQ(*s.LastDurableSeq(a), 10u);
  EXPECT_EQ(*s.LastDurableSeq(b), 3u);
  EXPECT_EQ(outcome(batch(a, 11, 111)), IngestOutcome::kStored);
  // A seq without a row above the oldest one (inside a placeholder's range)
  // was not pruned: a conflict, as before.
  SequencedBatch placeholder = batch(a, 12, 112);
  placeholder.last_seq = 13;
  placeholder.dropped = true;
  placeholder.delta = nullptr;
  EXPECT_EQ(outcome(placeholder), IngestOutcome::kStored);
  EXPECT_EQ(outcome(batch(a, 13, 113)), IngestOutcome::kConflict);
  EXPECT_FALSE(s.PruneLedger(cutoff, 0).ok());
}

// Ingest stages each batch; compaction folds them into the histograms. What
// a reader sees is the same before and after, and after a reopen.
TEST_P(StoreTest, StagedBatchesReadTheSameBeforeAndAfterCompaction) {
  auto store = Store::Open(NewDb());
  ASSERT_TRUE(store.ok());
  auto id = (*store)->UpsertTarget(testing::RocketBoard("agent-1"));
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(*(*store)->IngestBatch(*id, Batch(1, 1000, 10)));
  BatchDelta second = Batch(2, 2000, 5);
  second.keys[0].errors = 1;
  KeyEvidence other;
  other.key = {"rocket", "mmc0", 18, 12};
  other.histogram.Record(70'000, 3);
  other.spin_path = 3;
  second.keys.push_back(other);
  ASSERT_TRUE(*(*store)->IngestBatch(*id, second));
  auto before = (*store)->LoadKeys(*id);
  auto dispatch_before = (*store)->LoadDispatch(*id);
  auto keys_before = (*store)->ListKeys(*id);
  ASSERT_TRUE(before.ok() && dispatch_before.ok() && keys_before.ok());
  ASSERT_EQ(before->size(), 2u);
  EXPECT_EQ((*before)[0].histogram.total_count(), 15u);
  EXPECT_EQ((*before)[0].errors, 1u);
  EXPECT_EQ((*before)[1].spin_path, 3u);
  EXPECT_EQ((*dispatch_before)[0].handler.total_count(), 4u);
  EXPECT_EQ(keys_before->size(), 2u);
  auto due = (*store)->TargetsToCompact(2, absl::Hours(1));
  ASSERT_TRUE(due.ok());
  EXPECT_EQ(*due, std::vector<int64_t>{*id});
  EXPECT_EQ(*(*store)->Compact(*id), 2u);
  EXPECT_EQ(*(*store)->Compact(*id), 0u) << "nothing left to fold";
  EXPECT_TRUE((*store)->TargetsToCompact(1, absl::Hours(1))->empty());
  auto after = (*store)->LoadKeys(*id);
  auto dispatch_after = (*store)->LoadDispatch(*id);
  ASSERT_TRUE(after.ok() && dispatch_after.ok());
  ASSERT_EQ(after->size(), before->size());
  for (size_t i = 0; i < after->size(); ++i) {
    EXPECT_EQ((*after)[i].key, (*before)[i].key);
    EXPECT_EQ((*after)[i].histogram, (*before)[i].histogram);
    EXPECT_EQ((*after)[i].errors, (*before)[i].errors);
    EXPECT_EQ((*after)[i].spin_path, (*before)[i].spin_path);
  }
  EXPECT_EQ((*dispatch_after)[0].handler, (*dispatch_before)[0].handler);
  EXPECT_EQ((*dispatch_after)[0].wake, (*dispatch_before)[0].wake);
  // A third batch staged on top of compacted evidence, with a timer record.
  BatchDelta third = Batch(3, 1000, 1);
  third.keys[0].errors = 2;
  TimerRecord timer;
  timer.cpu_class = "rocket";
  timer.oversleep.Record(12'000, 4);
  third.timers.push_back(timer);
  ASSERT_TRUE(*(*store)->IngestBatch(*id, third));
  EXPECT_EQ((*(*store)->LoadKeys(*id))[0].histogram.total_count(), 16u);
  // Compacted onto the stored rows: it reads the same again.
  auto staged = (*store)->LoadKeys(*id);
  auto dispatch_staged = (*store)->LoadDispatch(*id);
  auto timers_staged = (*store)->LoadTimerOversleep(*id);
  ASSERT_TRUE(staged.ok() && dispatch_staged.ok() && timers_staged.ok());
  EXPECT_EQ(*(*store)->Compact(*id), 1u);
  auto compacted = (*store)->LoadKeys(*id);
  auto dispatch_compacted = (*store)->LoadDispatch(*id);
  auto timers_compacted = (*store)->LoadTimerOversleep(*id);
  ASSERT_TRUE(compacted.ok() && dispatch_compacted.ok() && timers_compacted.ok());
  ASSERT_EQ(compacted->size(), 2u);
  for (size_t i = 0; i < compacted->size(); ++i) {
    EXPECT_EQ((*compacted)[i].histogram, (*staged)[i].histogram);
    EXPECT_EQ((*compacted)[i].errors, (*staged)[i].errors);
    EXPECT_EQ((*compacted)[i].irq_path, (*staged)[i].irq_path);
    EXPECT_EQ((*compacted)[i].spin_path, (*staged)[i].spin_path);
  }
  EXPECT_EQ((*compacted)[0].errors, 3u);
  EXPECT_EQ((*compacted)[0].irq_path, 16u);
  EXPECT_EQ((*dispatch_compacted)[0].handler.total_count(), 6u);
  EXPECT_EQ((*dispatch_compacted)[0].handler, (*dispatch_staged)[0].handler);
  EXPECT_EQ((*dispatch_compacted)[0].wake, (*dispatch_staged)[0].wake);
  ASSERT_EQ(timers_compacted->size(), 1u);
  EXPECT_EQ((*timers_compacted)[0].oversleep, (*timers_staged)[0].oversleep);
  EXPECT_EQ((*timers_compacted)[0].oversleep.total_count(), 4u);
}

// A writer killed with its write-ahead log unrecovered (its wal-index
// zeroed): read-only opens, the CLI's and the tuner's own pre-check, still
// read it (SQLite needs write access to recover the log), and a writer
// opens it.
TEST(Store, OpensADatabaseWhoseWriterDiedWithAnUnrecoveredLog) {
  const testing::TempDir dir;
  const std::string path = dir.File("crashed.db");
  ASSERT_TRUE(Store::Open(path).ok());  // created, migrated, closed
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto store = Store::Open(path);
    if (!store.ok() || !(*store)->UpsertTarget(testing::RocketBoard("survivor")).ok()) _exit(1);
    _exit(0);  // no close: the log keeps the frames, nothing checkpoints
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ASSERT_GT(std::filesystem::file_size(path + "-wal"), 0u);
  {  // the wal-index header zeroed, as by a crash in the middle of its update
    const auto shm_bytes = std::filesystem::file_size(path + "-shm");
    std::filesystem::resize_file(path + "-shm", 0);
    std::filesystem::resize_file(path + "-shm", shm_bytes);
  }
  {
    auto reader = Store::Open(path, {}, OpenMode::kReadOnly);
    ASSERT_TRUE(reader.ok()) << reader.status();
    auto found = (*reader)->FindTarget("survivor");
    ASSERT_TRUE(found.ok()) << found.status();
    EXPECT_TRUE(found->has_value());
    EXPECT_FALSE((*reader)->UpsertTarget(testing::RocketBoard("intruder")).ok()) << "the reader stays read-only";
  }
  auto writer = Store::Open(path);
  ASSERT_TRUE(writer.ok()) << writer.status();
  auto found = (*writer)->FindTarget("survivor");
  ASSERT_TRUE(found.ok() && found->has_value());
}

// A tuner killed at its first start, after the file was switched to WAL
// mode (a write) but before the schema's first step committed, leaves a
// file with no table: the next start creates the database in it, as in a
// new file. A read-only open still says it is no spintune database, and a
// file with another program's table is still refused.
TEST(Store, CreatesTheDatabaseInAFileAStartCutShortLeftWithNoTable) {
  const testing::TempDir dir;
  const std::string path = dir.File("cut.db");
  {
    auto db = SqliteDb::Open(path, 0, OpenMode::kCreate);
    ASSERT_TRUE(db.ok()) << db.status();
  }
  ASSERT_GT(std::filesystem::file_size(path), 0u);
  auto reader = Store::Open(path, {}, OpenMode::kReadOnly);
  EXPECT_EQ(reader.status().code(), absl::StatusCode::kInvalidArgument) << reader.status();
  {
    auto store = Store::Open(path);
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_TRUE((*store)->UpsertTarget(testing::RocketBoard("agent-1")).ok());
  }
  auto again = Store::Open(path, {}, OpenMode::kReadOnly);
  ASSERT_TRUE(again.ok()) << again.status();
  auto t = (*again)->FindTarget("agent-1");
  EXPECT_TRUE(t.ok() && t->has_value());

  const std::string other = dir.File("other.db");
  {
    auto db = SqliteDb::Open(other, 0, OpenMode::kCreate);
    ASSERT_TRUE(db.ok()) << db.status();
    ASSERT_TRUE((*db)->Exec("CREATE TABLE notes (text TEXT)").ok());
  }
  auto refused = Store::Open(other);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << refused.status();
  EXPECT_NE(refused.status().message().find("is not a spintune database"), std::string::npos);

  const std::string text = dir.File("notes.db");  // no SQLite file at all
  { std::ofstream(text) << "not a database at all\n"; }
  auto not_sqlite = Store::Open(text);
  EXPECT_EQ(not_sqlite.status().code(), absl::StatusCode::kInvalidArgument) << not_sqlite.status();
  EXPECT_NE(not_sqlite.status().message().find("is not a spintune database"), std::string::npos)
      << not_sqlite.status();
}

// Tuners sharing a database refit a target one at a time: the lease is one
// store's (one connection's) until it releases it or closes (PostgreSQL:
// its server process ends a moment later).
TEST_P(StoreTest, ATargetLeaseIsOneStoresUntilReleasedOrItsStoreCloses) {
  const std::string db = NewDb(/*file=*/true);
  auto a = Store::Open(db);
  auto b = Store::Open(db);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(*(*a)->LeaseTarget(1));
  EXPECT_FALSE(*(*b)->LeaseTarget(1));
  EXPECT_TRUE(*(*b)->LeaseTarget(2)) << "one lease per target";
  (*a)->ReleaseTarget(1);
  EXPECT_TRUE(*(*b)->LeaseTarget(1));
  EXPECT_FALSE(*(*a)->LeaseTarget(1));
  b->reset();
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (!*(*a)->LeaseTarget(1) && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(10));
  EXPECT_TRUE(*(*a)->LeaseTarget(1));
  EXPECT_TRUE(*(*a)->LeaseTarget(2));
}

// On SQLite the lease is a lock between processes too, ending with its
// process however it ends (SIGKILL here).
TEST(Store, ATargetLeaseOnSqliteEndsWithItsProcess) {
  const testing::TempDir dir;
  const std::string path = dir.File("leases.db");
  ASSERT_TRUE(Store::Open(path).ok());
  // Another process takes target 3 and is killed holding it.
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto store = Store::Open(path);
    const bool leased = store.ok() && *(*store)->LeaseTarget(3);
    const char c = leased ? 'y' : 'n';
    if (write(ready[1], &c, 1) != 1) _exit(1);
    pause();  // until killed
    _exit(0);
  }
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  close(ready[0]);
  close(ready[1]);
  EXPECT_EQ(c, 'y');
  auto parent = Store::Open(path);
  ASSERT_TRUE(parent.ok());
  EXPECT_FALSE(*(*parent)->LeaseTarget(3)) << "the other process holds it";
  EXPECT_TRUE(*(*parent)->LeaseTarget(4));
  kill(child, SIGKILL);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(*(*parent)->LeaseTarget(3)) << "it ended with the process";
}

TEST_P(StoreTest, UpsertKeepsTheTargetAndReplacesItsDescription) {
  auto store = Store::Open(NewDb());
  ASSERT_TRUE(store.ok());
  auto a = (*store)->UpsertTarget(testing::RocketBoard("agent-1"));
  auto before = a.ok() ? (*store)->LoadTarget(*a) : a.status();
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_EQ(before->max_blob_format, 0u) << "an agent that did not say";
  TargetRecord changed = testing::RocketBoard("agent-1");
  changed.board = "renamed";
  changed.devices[0].model = "new card";
  changed.max_blob_format = 3;
  auto b = (*store)->UpsertTarget(changed);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);
  auto loaded = (*store)->LoadTarget(*a);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->board, "renamed");
  EXPECT_EQ(loaded->max_blob_format, 3u);
  ASSERT_EQ(loaded->devices.size(), 1u);
  EXPECT_EQ(loaded->devices[0].model, "new card");
  ASSERT_EQ(loaded->devices[0].default_rules.size(), 1u);
  EXPECT_EQ(loaded->devices[0].default_rules[0].wait, WaitParams::PollSleep(5000));
  EXPECT_EQ(loaded->cpu_classes[0].irq_overhead_cpu_ns, 600);
}

TEST_P(StoreTest, PolicyVersionsIncreaseAndRoundTrip) {
  auto store = Store::Open(NewDb());
  ASSERT_TRUE(store.ok());
  auto id = (*store)->UpsertTarget(testing::RocketBoard("agent-1"));
  ASSERT_TRUE(id.ok());
  EXPECT_FALSE((*(*store)->LoadPolicy(*id, 0)).has_value());
  PolicyTable t;
  t.board = "b";
  t.cpu_classes = {{"rocket", 50'000, {}}};
  t.devices = {{"mmc0", "litex-mmc", "", {}}};
  PolicyEntry fb;
  fb.key = {kAnyCpuClass, "mmc0", 0, 0};
  fb.fallback = true;
  t.entries = {fb};
  EXPECT_EQ(*(*store)->AppendPolicyVersion(*id, &t, 0), 1u);
  EXPECT_EQ(t.version, 1u);
  EXPECT_FALSE(t.fitted_at.empty());
  t.entries[0].wait = WaitParams::SpinThenIrq(5000);
  EXPECT_EQ(*(*store)->AppendPolicyVersion(*id, &t, 1), 2u);
  auto latest = (*store)->LoadPolicy(*id, 0);
  ASSERT_TRUE(latest.ok() && latest->has_value());
  EXPECT_EQ((*latest)->version, 2u);
  EXPECT_EQ((*latest)->entries[0].wait, WaitParams::SpinThenIrq(5000));
  auto first = (*store)->LoadPolicy(*id, 1);
  ASSERT_TRUE(first.ok() && first->has_value());
  EXPECT_EQ((*first)->entries[0].wait, WaitParams::Irq());
  ASSERT_TRUE((*store)->RecordApplied(*id, 2, "").ok());
  auto target = (*store)->FindTarget("agent-1");
  EXPECT_EQ((*target)->applied_version, 2u);
  EXPECT_EQ((*target)->current_version, 2u);

  // A rollback pins: fitted versions are refused until unpinned.
  PolicyTable old = **first;
  EXPECT_EQ(*(*store)->AppendPinnedVersion(*id, &old), 3u);
  EXPECT_EQ(old.origin, "rollback");
  EXPECT_EQ((*(*store)->FindTarget("agent-1"))->pinned_version, 3u);
  EXPECT_TRUE(absl::IsFailedPrecondition((*store)->AppendPolicyVersion(*id, &t, 3).status()));
  EXPECT_EQ((*(*(*store)->LoadPolicy(*id, 0))).version, 3u);
  ASSERT_TRUE((*store)->Unpin(*id).ok());
  EXPECT_EQ((*(*store)->FindTarget("agent-1"))->pinned_version, 0u);
  // A table built on version 2 after 3 was stored (another tuner's fit
  // building on what the rollback undid): refused, nothing stored.
  auto stale = (*store)->AppendPolicyVersion(*id, &t, 2);
  EXPECT_TRUE(absl::IsAborted(stale.status())) << stale.status();
  EXPECT_EQ((*(*(*store)->LoadPolicy(*id, 0))).version, 3u);
  EXPECT_EQ(*(*store)->AppendPolicyVersion(*id, &t, 3), 4u);
}

// A verification's rollback stores its version, its verdicts and its key
// holds together or not at all: a refused rollback (another version was
// stored meanwhile) leaves no verdict saying it rolled back, and no hold.
// A refit releases the hold it read, not a newer one of the same key.
TEST_P(StoreTest, ARollbackStoresItsVerdictsAndHoldsWithItsVersionOrNothing) {
  ASSERT_NO_FATAL_FAILURE(OpenOneTarget(1000));
  PolicyTable t = testing::SampleTable();
  ASSERT_EQ(*store->AppendPolicyVersion(id, &t, 0), 1u);
  VersionVerdicts verdicts;
  VerificationRecord v;
  v.key = {"rocket", "mmc0", 17, 10};
  v.version = 1;
  v.verdict = "worse";
  v.rollback_version = 2;
  verdicts.verifications.push_back(v);
  verdicts.holds.push_back({v.key, WaitParams::Irq(), 500});
  PolicyTable rollback = testing::SampleTable();
  auto stale = store->AppendPolicyVersion(id, &rollback, 0, &verdicts);
  EXPECT_TRUE(absl::IsAborted(stale.status())) << stale.status();
  EXPECT_TRUE(store->ListVerifications(id)->empty());
  EXPECT_TRUE(store->ListHeldKeys(id)->empty());
  EXPECT_EQ(*store->AppendPolicyVersion(id, &rollback, 1, &verdicts), 2u);
  auto verifications = store->ListVerifications(id);
  auto holds = store->ListHeldKeys(id);
  ASSERT_TRUE(verifications.ok() && holds.ok());
  ASSERT_EQ(verifications->size(), 1u);
  EXPECT_EQ((*verifications)[0].rollback_version, 2u);
  ASSERT_EQ(holds->size(), 1u);
  EXPECT_EQ((*holds)[0].samples_at_hold, 500u);
  // A refit that read an earlier hold of the key releases that one only.
  HeldKey earlier = (*holds)[0];
  earlier.samples_at_hold = 200;
  ASSERT_TRUE(store->ReleaseKey(id, earlier).ok());
  EXPECT_EQ(store->ListHeldKeys(id)->size(), 1u) << "the newer hold stays";
  ASSERT_TRUE(store->ReleaseKey(id, (*holds)[0]).ok());
  EXPECT_TRUE(store->ListHeldKeys(id)->empty());
}

TEST_P(StoreTest, SurvivesReopenAndRefusesNewerSchemas) {
  const std::string path = NewDb(/*file=*/true);
  {
    auto store = Store::Open(path);
    ASSERT_TRUE(store.ok()) << store.status();
    auto id = (*store)->UpsertTarget(testing::RocketBoard("agent-1"));
    ASSERT_TRUE((*store)->IngestBatch(*id, Batch(1, 1000, 10)).ok());
  }
  {
    auto store = Store::Open(path);
    ASSERT_TRUE(store.ok());
    auto t = (*store)->FindTarget("agent-1");
    ASSERT_TRUE(t.ok() && t->has_value());
    EXPECT_EQ((*t)->total_samples, 10u);
    EXPECT_FALSE(*(*store)->IngestBatch((*t)->id, Batch(1, 1000, 10)));
  }
  {
    auto db = OpenSqlDb(path);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE((*db)->Exec("INSERT INTO schema_version VALUES (999)").ok());
  }
  auto store = Store::Open(path);
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(store.status().message().find("newer"), std::string::npos);
}

}  // namespace
}  // namespace spintune

namespace spintune {
namespace {

BatchDelta Lognormal(uint64_t seq, double median, int n, std::mt19937_64& rng) {
  BatchDelta b;
  b.seq = seq;
  KeyEvidence k;
  k.key = {"rocket", "mmc0", 25, 13};
  std::lognormal_distribution<double> d(std::log(median), 0.3);
  for (int i = 0; i < n; ++i) k.histogram.Record(static_cast<uint64_t>(d(rng)));
  b.keys.push_back(k);
  b.completion_samples = n;
  return b;
}

TEST_P(StoreTest, DetectsADistributionChangeAndFitsOnlyWhatCameAfter) {
  ASSERT_NO_FATAL_FAILURE(OpenOneTarget(1000));
  std::mt19937_64 rng(1);
  uint64_t seq = 0;
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(store->IngestBatch(id, Lognormal(++seq, 150e3, 500, rng)).ok());
  // Stationary so far: no change, evidence is everything.
  auto none = store->DetectChanges(id, ChangeTest());
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->empty());
  // The card starts garbage collection: waits 20x longer for a window.
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(store->IngestBatch(id, Lognormal(++seq, 3e6, 500, rng)).ok());
  auto changed = store->DetectChanges(id, ChangeTest());
  ASSERT_TRUE(changed.ok());
  ASSERT_EQ(changed->size(), 1u);
  EXPECT_EQ((*changed)[0].opcode, 25u);
  auto keys = store->LoadKeys(id);
  ASSERT_TRUE(keys.ok());
  ASSERT_EQ(keys->size(), 1u);
  EXPECT_EQ((*keys)[0].histogram.total_count(), 1000u);  // the new window only
  EXPECT_GT((*keys)[0].histogram.QuantileNs(0.5), 1e6);
  // The target's total still counts everything.
  EXPECT_EQ((*store->FindTarget("agent-1"))->total_samples, 5000u);
}

// A key with a tenth of its target's samples (100 of each batch's 1,000, one
// window each) never has 512 samples in one window: its window rows span
// several windows (kMinWindowSamples), its latest rows are judged together,
// and its evidence after the change starts at the row the change falls in.
// The busy key beside it stays as it was.
TEST_P(StoreTest, DetectsAChangeOfAKeyWithASmallShareOfItsTargetsSamples) {
  ASSERT_NO_FATAL_FAILURE(OpenOneTarget(1000));
  std::mt19937_64 rng(2);
  auto batch = [&](uint64_t seq, double sparse_median) {
    BatchDelta b = Lognormal(seq, 150e3, 900, rng);
    BatchDelta sparse = Lognormal(seq, sparse_median, 100, rng);
    sparse.keys[0].key.opcode = 18;
    b.keys.push_back(sparse.keys[0]);
    b.completion_samples += sparse.completion_samples;
    return b;
  };
  uint64_t seq = 0;
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(*store->IngestBatch(id, batch(++seq, 40e3)));
  auto none = store->DetectChanges(id, ChangeTest());
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->empty());
  // CMD18 slows down 20x from window 10 on.
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(*store->IngestBatch(id, batch(++seq, 800e3)));
  auto changed = store->DetectChanges(id, ChangeTest());
  ASSERT_TRUE(changed.ok()) << changed.status();
  ASSERT_EQ(changed->size(), 1u);
  EXPECT_EQ((*changed)[0].opcode, 18u);
  // The window rows: one per window for the busy key; for CMD18 the two
  // since the change (the first, 0-5, is pruned with the change).
  {
    auto db = OpenSqlDb(spec);
    ASSERT_TRUE(db.ok()) << db.status();
    auto rows = (*db)->Prepare(
        "SELECT k.opcode, COUNT(*), MIN(w.samples) FROM histogram_windows w JOIN keys k "
        "ON k.id = w.key_id GROUP BY k.opcode ORDER BY k.opcode");
    ASSERT_TRUE(rows.ok()) << rows.status();
    std::vector<std::array<int64_t, 3>> seen;
    while (*(*rows)->Step()) {
      seen.push_back({(*rows)->ColumnInt(0), (*rows)->ColumnInt(1), (*rows)->ColumnInt(2)});
    }
    EXPECT_EQ(seen, (std::vector<std::array<int64_t, 3>>{{18, 2, 400}, {25, 16, 900}}));
  }
  // CMD18's rows: windows 0-5 (600 samples, then the row is full), 6-11
  // (400 before the change, 200 after) and 12-15 (400 after). The latest
  // two are the recent evidence (1,000 >= 512), the first the before.
  auto drift = store->LoadDriftWindows(id);
  ASSERT_TRUE(drift.ok());
  EXPECT_EQ(drift->at((*changed)[0]), 6u);
  auto keys = store->LoadKeys(id);
  ASSERT_TRUE(keys.ok());
  for (const auto& k : *keys) {
    if (k.key.opcode == 18) {
      EXPECT_EQ(k.histogram.total_count(), 1000u) << "the rows since the change";
      EXPECT_GT(k.histogram.QuantileNs(0.5), 400e3);
    } else {
      EXPECT_EQ(k.histogram.total_count(), 16u * 900u);
    }
  }
  // Six more windows of the slow CMD18 (rows 12-17, then 18-21): the row
  // the change fell in (6-11, a third after it) differs from the rows after
  // it. That is the same change found again: the evidence moves on to row
  // 12, but no change is reported.
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(*store->IngestBatch(id, batch(++seq, 800e3)));
  auto refined = store->DetectChanges(id, ChangeTest());
  ASSERT_TRUE(refined.ok()) << refined.status();
  EXPECT_TRUE(refined->empty());
  drift = store->LoadDriftWindows(id);
  ASSERT_TRUE(drift.ok());
  EXPECT_EQ(drift->at((*changed)[0]), 12u);
  keys = store->LoadKeys(id);
  ASSERT_TRUE(keys.ok());
  for (const auto& k : *keys) {
    if (k.key.opcode != 18) continue;
    EXPECT_EQ(k.histogram.total_count(), 1000u) << "rows 12 and 18";
    EXPECT_GT(k.histogram.QuantileNs(0.02), 200e3) << "nothing from before the change";
  }
  // CMD18 is fast again (rows 18-23, 24-29): compared with rows 12 and 18,
  // after the last change's evidence, a change of its own.
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(*store->IngestBatch(id, batch(++seq, 40e3)));
  auto again = store->DetectChanges(id, ChangeTest());
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_EQ(again->size(), 1u);
  EXPECT_EQ((*again)[0].opcode, 18u);
}

// Outcomes are kept per (key, version, arm) with the span of sample windows
// they were stored in, the same before and after compaction.
TEST_P(StoreTest, OutcomesKeepTheirArmAndWindows) {
  ASSERT_NO_FATAL_FAILURE(OpenOneTarget(10));
  for (uint64_t seq = 1; seq <= 3; ++seq) {
    BatchDelta b = Batch(seq, 1000, 10);  // one window each: 0, 1, 2
    OutcomeRecord o;
    o.key = b.keys[0].key;
    o.version = 1;
    o.moments.Add(1000, 2000);
    b.outcomes.push_back(o);
    if (seq == 2) {
      o.arm = OutcomeArm::kIncumbent;
      b.outcomes.push_back(o);
    }
    ASSERT_TRUE(*store->IngestBatch(id, b));
  }
  for (bool compacted : {false, true}) {
    if (compacted) {
      ASSERT_TRUE(store->Compact(id).ok());
    }
    auto outcomes = store->LoadOutcomes(id);
    ASSERT_TRUE(outcomes.ok()) << outcomes.status();
    ASSERT_EQ(outcomes->size(), 2u) << compacted;
    const OutcomeRecord& table = (*outcomes)[0];
    const OutcomeRecord& incumbent = (*outcomes)[1];
    EXPECT_EQ(table.arm, OutcomeArm::kTable);
    EXPECT_EQ(table.moments.requests, 3u);
    EXPECT_EQ(table.first_window, 0u);
    EXPECT_EQ(table.last_window, 2u);
    EXPECT_EQ(incumbent.arm, OutcomeArm::kIncumbent);
    EXPECT_EQ(incumbent.moments.requests, 1u);
    EXPECT_EQ(incumbent.first_window, 1u);
    EXPECT_EQ(incumbent.last_window, 1u);
  }
}

// Several tuners on one PostgreSQL database each run a compactor over every
// target, so two compactions of one target overlap. The second must not
// fold what the first is folding: here the first (this store) is held
// inside its transaction by a row lock on one of its staged rows, after
// it wrote the sums, while the second (another store) compacts. Each batch
// and each outcome is counted once.
TEST_P(StoreTest, TwoStoresCompactingOneTargetAtOnceCountEachBatchOnce) {
  if (!postgres()) {
    GTEST_SKIP() << "SQLite: BEGIN IMMEDIATE lets one writer in at a time, and the row "
                    "lock this test interleaves the two compactions with is PostgreSQL's";
  }
  ASSERT_NO_FATAL_FAILURE(OpenOneTarget(1000));
  auto other = Store::Open(spec);
  auto blocker = OpenSqlDb(spec);
  auto watcher = OpenSqlDb(spec);
  ASSERT_TRUE(other.ok()) << other.status();
  ASSERT_TRUE(blocker.ok()) << blocker.status();
  ASSERT_TRUE(watcher.ok()) << watcher.status();
  for (uint64_t seq = 1; seq <= 2; ++seq) {
    BatchDelta b = Batch(seq, 1000, 2 + seq);  // 3 and 4 samples
    OutcomeRecord o;
    o.key = b.keys[0].key;
    o.version = 1;
    o.moments.Add(1000, 2000);
    b.outcomes.push_back(o);
    ASSERT_TRUE(*store->IngestBatch(id, b));
  }
  // Sessions of this database waiting for a lock.
  auto lock_waits = [&]() -> int64_t {
    auto q = (*watcher)->Prepare(
        "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() AND "
        "wait_event_type = 'Lock'");
    if (!q.ok() || !*(*q)->Step()) return -1;
    return (*q)->ColumnInt(0);
  };
  auto await_lock_waits = [&](int64_t n) {
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (lock_waits() < n && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
    return lock_waits() >= n;
  };
  ASSERT_TRUE((*blocker)->Begin().ok());
  auto hold = (*blocker)->Prepare(
      "SELECT seq FROM pending_deltas WHERE target_id = ?1 AND seq = 2 FOR UPDATE");
  ASSERT_TRUE(hold.ok()) << hold.status();
  (*hold)->Bind(1, id);
  ASSERT_TRUE(*(*hold)->Step());
  absl::StatusOr<uint64_t> first_folded, second_folded;
  std::thread first([&] { first_folded = store->Compact(id); });
  // The first wrote its sums and waits to delete seq 2.
  ASSERT_TRUE(await_lock_waits(1));
  std::thread second([&] { second_folded = (*other)->Compact(id); });
  ASSERT_TRUE(await_lock_waits(2)) << "the second compaction did not wait for the first";
  (*hold)->Reset();
  (*blocker)->Rollback();
  first.join();
  second.join();
  ASSERT_TRUE(first_folded.ok()) << first_folded.status();
  ASSERT_TRUE(second_folded.ok()) << second_folded.status();
  EXPECT_EQ(*first_folded, 2u);
  EXPECT_EQ(*second_folded, 0u) << "the second found both batches folded";
  auto keys = (*other)->LoadKeys(id);
  auto outcomes = (*other)->LoadOutcomes(id);
  ASSERT_TRUE(keys.ok() && outcomes.ok());
  ASSERT_EQ(keys->size(), 1u);
  EXPECT_EQ((*keys)[0].histogram.total_count(), 7u);
  EXPECT_EQ((*keys)[0].irq_path, 7u);
  ASSERT_EQ(outcomes->size(), 1u);
  EXPECT_EQ((*outcomes)[0].moments.requests, 2u) << "one per batch";
  EXPECT_EQ(*(*other)->Compact(id), 0u);
}

// A reader (the fitter's store) adds the staged rows to the compacted ones;
// a compaction (the compactor's store) that commits between its reads of
// the two must not make batches vanish from what it reads, nor count them
// twice. One store stages a batch of one sample and compacts, over and
// over, while another reads: every read holds every batch staged before
// it began, and none it has not seen staged.
TEST_P(StoreTest, AReaderSeesEveryBatchOnceWhileAnotherStoreCompacts) {
  ASSERT_NO_FATAL_FAILURE(OpenOneTarget(1'000'000));
  auto reader = Store::Open(spec);
  ASSERT_TRUE(reader.ok()) << reader.status();
  // 64 keys with many buckets each: reading them back takes a while.
  BatchDelta wide;
  wide.seq = 1;
  for (uint32_t i = 0; i < 64; ++i) {
    KeyEvidence k;
    k.key = {"rocket", "mmc0", 17, i};
    for (uint64_t ns = 1000; ns < 50'000'000; ns = ns * 21 / 20) k.histogram.Record(ns, 1);
    wide.keys.push_back(k);
    wide.completion_samples += k.histogram.total_count();
  }
  ASSERT_TRUE(*store->IngestBatch(id, wide));
  ASSERT_TRUE(store->Compact(id).ok());
  std::atomic<uint64_t> staged{1};  // batches staged so far
  std::atomic<uint64_t> started{1};  // and the one being staged
  std::atomic<bool> done{false};
  absl::Status writer_status;
  std::thread writer([&] {
    for (uint64_t seq = 2; seq <= 400 && writer_status.ok() && !done; ++seq) {
      started = seq;
      auto stored = store->IngestBatch(id, Batch(seq, 1000, 1));
      if (!stored.ok()) writer_status = stored.status();
      staged = seq;
      if (seq % 2 == 0 && writer_status.ok()) writer_status = store->Compact(id).status();
    }
    done = true;
  });
  // Key 10 ("size class" 10, Batch()'s) holds wide's one sample per bucket
  // plus one per later batch.
  const uint64_t base = wide.keys[10].histogram.total_count() - 1;
  uint64_t reads = 0;
  std::string wrong;  // the first wrong read
  while (!done && wrong.empty()) {
    const uint64_t before = staged;
    auto keys = (*reader)->LoadKeys(id);
    const uint64_t after = started;
    ++reads;
    if (!keys.ok() || keys->size() != 64) {
      wrong = keys.ok() ? absl::StrCat(keys->size(), " keys") : keys.status().ToString();
      break;
    }
    const uint64_t seen = (*keys)[10].histogram.total_count() - base;
    if (seen < before || seen > after) {
      wrong = absl::StrCat(seen, " batches, ", before, " staged before the read, at most ",
                           after, " after it");
    }
  }
  done = true;
  writer.join();
  EXPECT_EQ(wrong, "") << "read " << reads;
  ASSERT_TRUE(writer_status.ok()) << writer_status;
  EXPECT_GT(reads, 10u);
}

// Migration 10 keeps a version 9 database's outcomes, on the table arm.
TEST(Store, Migration10KeepsOutcomesOnTheTableArm) {
  const testing::TempDir dir;
  const std::string path = dir.File("outcomes_v9.db");
  {
    auto store = Store::Open(path);
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->UpsertTarget(testing::RocketBoard("agent-1")).ok());
  }
  {
    // Back to version 9: its outcomes table with one row, no method (and
    // no targets.max_blob_format, migration 11).
    auto db = OpenSqlDb(path);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE((*db)->Exec(R"sql(
DROP TABLE outcomes;
CREATE TABLE outcomes (
  target_id INTEGER NOT NULL REFERENCES targets(id) ON DELETE CASCADE,
  cpu_class TEXT NOT NULL, device TEXT NOT NULL, opcode INTEGER NOT NULL,
  size_class INTEGER NOT NULL, version INTEGER NOT NULL, requests INTEGER NOT NULL,
  cpu_ns_sum REAL NOT NULL, latency_ns_sum REAL NOT NULL, cpu_ns_sq_sum REAL NOT NULL,
  latency_ns_sq_sum REAL NOT NULL, cpu_latency_ns_sum REAL NOT NULL,
  PRIMARY KEY (target_id, cpu_class, device, opcode, size_class, version)) WITHOUT ROWID;
INSERT INTO outcomes VALUES (1, 'rocket', 'mmc0', 17, 10, 4, 2, 10, 20, 50, 200, 100);
ALTER TABLE verifications DROP COLUMN method;
ALTER TABLE targets DROP COLUMN max_blob_format;
ALTER TABLE ingested DROP COLUMN fingerprint_version;
ALTER TABLE keys DROP COLUMN changed_through;
DELETE FROM schema_version WHERE version >= 10;
)sql").ok());
    EXPECT_EQ(*SchemaVersion(db->get()), 9);
  }
  {
    auto store = Store::Open(path);
    ASSERT_TRUE(store.ok()) << store.status();
    auto outcomes = (*store)->LoadOutcomes(1);
    ASSERT_TRUE(outcomes.ok()) << outcomes.status();
    ASSERT_EQ(outcomes->size(), 1u);
    EXPECT_EQ((*outcomes)[0].version, 4u);
    EXPECT_EQ((*outcomes)[0].arm, OutcomeArm::kTable);
    EXPECT_EQ((*outcomes)[0].moments.requests, 2u);
    VerificationRecord v;
    v.key = (*outcomes)[0].key;
    v.version = 4;
    v.verdict = "better";
    ASSERT_TRUE((*store)->RecordVerification(1, v).ok());
    auto verified = (*store)->ListVerifications(1);
    ASSERT_TRUE(verified.ok() && verified->size() == 1u);
    EXPECT_EQ((*verified)[0].method, "before_after");
  }
}

}  // namespace
}  // namespace spintune
