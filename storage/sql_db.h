// The SQL connection the store runs on: prepared statements, transactions
// and the few dialect pieces that differ between its two backends, SQLite
// (storage/sqlite_db.h, the embedded default) and PostgreSQL
// (storage/pg_db.h, for fleets of tuners sharing one database). Internal to
// storage/.
//
// Statements are written once for both: `?N` parameters (PostgreSQL's
// backend turns them into `$N`), INTEGER/REAL/TEXT/BLOB columns, upserts as
// INSERT ... ON CONFLICT (...) DO UPDATE, RETURNING instead of a last row id.
// Where the dialects cannot agree (schema DDL, row locks, PRAGMAs) the
// backend supplies the piece.
//
// Thread-safety: a SqlDb and its statements must be used by one thread at a
// time (Store serializes access).
#ifndef SPINTUNE_STORAGE_SQL_DB_H_
#define SPINTUNE_STORAGE_SQL_DB_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "storage/write_gate.h"

namespace spintune {

// A prepared statement. Bind with 1-based indexes, Step() until it returns
// false, Reset() to reuse. Binding an index the SQL does not use is allowed
// (and ignored).
class Statement {
 public:
  virtual ~Statement() = default;

  virtual Statement& Bind(int index, int64_t value) = 0;
  virtual Statement& Bind(int index, double value) = 0;
  virtual Statement& Bind(int index, absl::string_view text) = 0;
  virtual Statement& BindBlob(int index, absl::string_view bytes) = 0;
  virtual Statement& BindNull(int index) = 0;

  // True when a row is available, false when done.
  virtual absl::StatusOr<bool> Step() = 0;
  // Steps once, expecting no row (INSERT/UPDATE/DELETE).
  absl::Status Run();
  // Forgets the result and the bindings.
  virtual void Reset() = 0;

  virtual int64_t ColumnInt(int column) const = 0;
  virtual double ColumnDouble(int column) const = 0;
  virtual std::string ColumnText(int column) const = 0;
  virtual std::string ColumnBlob(int column) const = 0;
  virtual bool ColumnIsNull(int column) const = 0;
};

// How a database is opened.
enum class OpenMode {
  kCreate,    // create it (SQLite: the file; both: the schema) if missing (the tuner)
  kExisting,  // it must exist (tools that write)
  kReadOnly,  // it must exist; never written (SQLite: works on read-only media)
};

class SqlDb {
 public:
  virtual ~SqlDb() = default;

  // Runs `sql` (one or more statements, no parameters).
  virtual absl::Status Exec(absl::string_view sql) = 0;
  virtual absl::StatusOr<std::unique_ptr<Statement>> Prepare(absl::string_view sql) = 0;
  // The statement for `sql`, prepared once and kept (reset, bindings
  // cleared) for the connection's lifetime: for statements run on every
  // batch. The pointer stays valid until the SqlDb is destroyed; the caller
  // must not hold it across another call with the same `sql`.
  absl::StatusOr<Statement*> Cached(absl::string_view sql);
  // Cached(sql)->Run(): for a statement without parameters or rows run
  // often (transaction control), which Exec() would parse every time.
  absl::Status RunCached(absl::string_view sql);
  // Resets every cached statement (SQLite: a stepped, unreset one holds a
  // read snapshot that keeps the write-ahead log from being checkpointed).
  void ResetCached();
  // Rows changed by the last INSERT/UPDATE/DELETE.
  virtual int Changes() const = 0;
  // What the database is called in messages (a PostgreSQL URI without its
  // password).
  virtual const std::string& name() const = 0;

  // Transactions (use Transaction). Begin takes the write lock at once
  // (SQLite BEGIN IMMEDIATE; PostgreSQL locks rows as they are written or
  // read with ForUpdate()).
  virtual absl::Status Begin() = 0;
  virtual absl::Status Commit() = 0;
  virtual void Rollback() = 0;
  // Begin() of a transaction whose commit need not reach the disk before
  // it returns: it is durable once a later synced commit of this database
  // is (both engines write one log in order). SQLite: synchronous=NORMAL
  // for this transaction; PostgreSQL: synchronous_commit off for it.
  virtual absl::Status BeginDeferredSync() = 0;
  // A read of several statements that sees the database as of one moment
  // (use ReadSnapshot): what other connections commit meanwhile is not
  // seen. SQLite: a deferred transaction (no write lock, no write turn)
  // whose first read fixes what it sees; PostgreSQL: REPEATABLE READ, READ
  // ONLY. False, and nothing begun, inside a transaction already open.
  virtual absl::StatusOr<bool> BeginSnapshot() = 0;
  // Ends what a BeginSnapshot() that returned true began.
  virtual void EndSnapshot() = 0;

  // Dialect pieces.
  // `ddl` (written for SQLite: INTEGER, REAL, TEXT, BLOB, INTEGER PRIMARY
  // KEY, WITHOUT ROWID) as this backend runs it.
  virtual std::string Ddl(absl::string_view ddl) const = 0;
  // Appended to a SELECT of one row that the transaction will update: locks
  // it against other connections ("" where Begin() locked everything).
  virtual absl::string_view ForUpdate() const = 0;
  virtual absl::StatusOr<bool> HasTable(absl::string_view table) = 0;
  // True when the database holds no table at all.
  virtual absl::StatusOr<bool> IsEmpty() = 0;
  // Changes whenever another connection may have committed since the last
  // call (SQLite: PRAGMA data_version; PostgreSQL: also on own commits).
  virtual absl::StatusOr<int64_t> DataVersion() = 0;
  // OK, or DataLoss with what the engine found (SQLite's integrity_check;
  // PostgreSQL checks its pages itself: OK).
  virtual absl::Status CheckIntegrity() = 0;
  // Serializes schema migrations of several processes starting at once
  // (PostgreSQL: an advisory lock; SQLite: BEGIN IMMEDIATE does it).
  virtual absl::Status LockSchema() { return absl::OkStatus(); }
  virtual void UnlockSchema() {}
  // A lock between processes on `target_id`, held by this connection until
  // UnlockTarget() or the connection's end (PostgreSQL: an advisory lock,
  // freed when its process dies; SQLite: a lock on a byte of a file beside
  // the database, freed when its connection closes or its process dies).
  // False when another connection holds it.
  virtual absl::StatusOr<bool> TryLockTarget(int64_t target_id) {
    (void)target_id;
    return true;
  }
  virtual void UnlockTarget(int64_t target_id) { (void)target_id; }
  // Whether this connection still holds the lock TryLockTarget() took
  // (PostgreSQL: not after the connection was lost and made again; the
  // statement that made it again failed, saying so). SQLite: true.
  virtual bool HoldsTargetLock(int64_t target_id) const {
    (void)target_id;
    return true;
  }
  // Inside a transaction: waits until no other connection's transaction
  // holds this lock on `target_id`, then holds it until this transaction
  // ends (commit or rollback). Serializes compactions of a target across
  // processes (PostgreSQL: a transaction-level advisory lock, apart from
  // TryLockTarget's). SQLite: nothing to do, Begin() took the write lock.
  virtual absl::Status LockTargetForTransaction(int64_t target_id) {
    (void)target_id;
    return absl::OkStatus();
  }
  // SQLite: whether this connection's commits copy the write-ahead log into
  // the database file once it is long (wal_autocheckpoint; on by default).
  // Off, another connection must (Checkpoint()). PostgreSQL: nothing.
  virtual void SetCommitCheckpoints(bool on) { (void)on; }
  // SQLite: copies what the write-ahead log holds into the database file as
  // far as readers allow, waiting for no one (a passive checkpoint); once
  // the log is long, restarts it (SqliteDb::Checkpoint). PostgreSQL:
  // nothing.
  virtual absl::Status Checkpoint() { return absl::OkStatus(); }
  // SQLite: this connection's write transactions (Begin() to Commit() or
  // Rollback(), and a write statement outside one) take turns with the other connections of this process
  // handed the same gate, as `priority` (storage/write_gate.h). PostgreSQL:
  // nothing (its writers wait on row locks in order).
  virtual void SetWriteGate(std::shared_ptr<WriteGate> gate, WritePriority priority) {
    (void)gate;
    (void)priority;
  }

 private:
  // Destroyed after the derived class closed the connection (SQLite:
  // sqlite3_close_v2 then completes when the statements are finalized).
  absl::flat_hash_map<std::string, std::unique_ptr<Statement>> cached_;
};

// How a transaction's commit reaches the disk (SqlDb::BeginDeferredSync).
enum class CommitSync { kSynced, kDeferred };

// Begin() in the constructor's database; rolls back on destruction unless
// Commit() succeeded.
class Transaction {
 public:
  explicit Transaction(SqlDb* db, CommitSync sync = CommitSync::kSynced)
      : db_(db), sync_(sync) {}
  ~Transaction();
  absl::Status Begin();
  absl::Status Commit();

 private:
  SqlDb* db_;
  const CommitSync sync_;
  bool open_ = false;
};

// The reads made while one lives see the database as of one moment
// (SqlDb::BeginSnapshot): a reader that adds the staged rows to the
// compacted ones sees each batch once while another connection compacts.
// Declared before the statements it covers: they are reset or finalized
// before it ends.
class ReadSnapshot {
 public:
  explicit ReadSnapshot(SqlDb* db) : db_(db) {}
  ~ReadSnapshot() {
    if (open_) db_->EndSnapshot();
  }
  ReadSnapshot(const ReadSnapshot&) = delete;
  ReadSnapshot& operator=(const ReadSnapshot&) = delete;
  absl::Status Begin();

 private:
  SqlDb* db_;
  bool open_ = false;
};

// Which backend a --db value names.
struct DbSpec {
  bool postgres = false;
  std::string target;  // the SQLite path, or the PostgreSQL connection URI
};
// "postgresql://..." or "postgres://..." (a libpq URI), "sqlite:PATH", or a
// bare PATH (SQLite). InvalidArgument for an empty value.
absl::StatusOr<DbSpec> ParseDbSpec(const std::string& value);

// Opens the database `spec` names, as it is (no migration, no check that it
// is a spintune database: Store::Open does those). For tools and tests.
absl::StatusOr<std::unique_ptr<SqlDb>> OpenSqlDb(const std::string& spec,
                                                 OpenMode mode = OpenMode::kCreate);

}  // namespace spintune

#endif  // SPINTUNE_STORAGE_SQL_DB_H_
