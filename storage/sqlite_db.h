// The SQLite backend of SqlDb (storage/sql_db.h): a thin RAII layer over the
// SQLite C API, with every error turned into an absl::Status that carries
// sqlite3_errmsg() text. Internal to storage/.
//
// Thread-safety: a SqliteDb and its statements must be used by one thread at
// a time (Store serializes access).
#ifndef SPINTUNE_STORAGE_SQLITE_DB_H_
#define SPINTUNE_STORAGE_SQLITE_DB_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "storage/sql_db.h"

struct sqlite3;
struct sqlite3_stmt;

namespace spintune {

class SqliteDb;

class SqliteStatement : public Statement {
 public:
  SqliteStatement(SqliteDb* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  ~SqliteStatement() override;
  SqliteStatement(const SqliteStatement&) = delete;
  SqliteStatement& operator=(const SqliteStatement&) = delete;

  Statement& Bind(int index, int64_t value) override;
  Statement& Bind(int index, double value) override;
  Statement& Bind(int index, absl::string_view text) override;
  Statement& BindBlob(int index, absl::string_view bytes) override;
  Statement& BindNull(int index) override;
  absl::StatusOr<bool> Step() override;
  void Reset() override;
  int64_t ColumnInt(int column) const override;
  double ColumnDouble(int column) const override;
  std::string ColumnText(int column) const override;
  std::string ColumnBlob(int column) const override;
  bool ColumnIsNull(int column) const override;

 private:
  SqliteDb* db_;
  sqlite3_stmt* stmt_;
  // A write outside a transaction that returned a row (INSERT ... RETURNING)
  // keeps SQLite's write lock, and so its turn at the write gate, until it
  // is stepped to its end or reset.
  bool holds_turn_ = false;
  // Leaves the write gate if this statement holds its turn.
  void ReleaseTurn();
};

class SqliteDb : public SqlDb {
 public:
  // Opens (creating if needed) `path`; ":memory:" for an in-memory database.
  // Sets WAL journaling, synchronous=FULL (an acknowledged batch survives power
  // loss), foreign keys and a busy timeout.
  //
  // Full disk: `reserve_bytes` (0: none) are kept allocated in PATH-reserve.
  // After a write failed for lack of space, every later write first
  // checkpoints the write-ahead log into the database and truncates it
  // (giving up the reserve so that the checkpoint has room); until that
  // succeeds writes fail with ResourceExhausted and write nothing, so the
  // log cannot grow back into space freed meanwhile. The reserve is
  // allocated again once there is room.
  // NotFound for a missing file unless kCreate.
  static absl::StatusOr<std::unique_ptr<SqliteDb>> Open(const std::string& path,
                                                        uint64_t reserve_bytes = 0,
                                                        OpenMode mode = OpenMode::kCreate);
  ~SqliteDb() override;

  absl::Status Exec(absl::string_view sql) override;
  absl::StatusOr<std::unique_ptr<Statement>> Prepare(absl::string_view sql) override;
  int Changes() const override;
  const std::string& name() const override { return path_; }
  absl::Status Begin() override;
  absl::Status BeginDeferredSync() override;
  absl::StatusOr<bool> BeginSnapshot() override;
  void EndSnapshot() override;
  absl::Status Commit() override;
  void Rollback() override;
  std::string Ddl(absl::string_view ddl) const override { return std::string(ddl); }
  absl::string_view ForUpdate() const override { return ""; }
  absl::StatusOr<bool> HasTable(absl::string_view table) override;
  absl::StatusOr<bool> IsEmpty() override;
  absl::StatusOr<int64_t> DataVersion() override;
  absl::Status CheckIntegrity() override;
  void SetWriteGate(std::shared_ptr<WriteGate> gate, WritePriority priority) override {
    gate_ = std::move(gate);
    gate_priority_ = priority;
  }
  void SetCommitCheckpoints(bool on) override;
  // Also restarts the write-ahead log once it holds the log limit (below):
  // this process's writers wait at the write gate meanwhile, for one turn.
  absl::Status Checkpoint() override;
  // The write-ahead log's limit (kDefaultLogLimitBytes unless set):
  // Checkpoint() restarts the log once it holds this much, and this
  // connection's first commit after a restart cuts the file back to it
  // (journal_size_limit).
  static constexpr int64_t kDefaultLogLimitBytes = int64_t{64} << 20;
  absl::Status SetLogLimit(int64_t bytes);
  // Target leases between processes (and between connections of one
  // process): a write lock on byte `target_id` of PATH-leases, an open
  // file description lock (F_OFD_SETLK), which ends with this connection
  // or its process however it ends. In memory: always true.
  absl::StatusOr<bool> TryLockTarget(int64_t target_id) override;
  void UnlockTarget(int64_t target_id) override;

  // Status for the connection's last error, prefixed with `context`.
  // Notes a full disk (see Open()).
  absl::Status Error(absl::string_view context, int rc) const;
  const std::string& path() const { return path_; }

  // OK when a write may start: after a full disk, once the log could be
  // checkpointed and truncated. Called by Begin() and before a write
  // statement outside a transaction.
  absl::Status EnsureRoom();
  // For a write statement outside a transaction (one of its own): takes a
  // turn at the write gate like Begin() does. True if it did; then the
  // caller calls LeaveGate() once the statement has run. False without a
  // gate or inside a transaction's turn.
  bool EnterGate();
  // Leaves the write gate if this connection is inside it.
  void LeaveGate();
  sqlite3* raw() const { return db_; }

 private:
  SqliteDb(sqlite3* db, std::string path, uint64_t reserve_bytes)
      : db_(db), path_(std::move(path)), reserve_bytes_(reserve_bytes) {}
  // Allocates the reserve file if it is missing (best effort).
  void KeepReserve();
  // Back to synchronous=FULL after a BeginDeferredSync() transaction.
  void RestoreSync();
  sqlite3* db_;
  bool deferred_sync_ = false;
  std::string path_;
  uint64_t reserve_bytes_;
  int64_t page_bytes_ = 4096;  // PRAGMA page_size (a log frame holds one page)
  int64_t log_limit_bytes_ = kDefaultLogLimitBytes;  // SetLogLimit()
  mutable bool full_ = false;
  int lease_fd_ = -1;  // PATH-leases, opened at the first TryLockTarget()
  std::shared_ptr<WriteGate> gate_;  // null: none (SetWriteGate)
  WritePriority gate_priority_ = WritePriority::kBackground;
  bool in_gate_ = false;  // between Begin() and the end of its transaction
};

}  // namespace spintune

#endif  // SPINTUNE_STORAGE_SQLITE_DB_H_
