// Thin RAII layer over the SQLite C API: a connection, prepared statements
// and transactions, with every error turned into an absl::Status that
// carries sqlite3_errmsg() text. Internal to storage/.
//
// Thread-safety: a SqliteDb and its statements must be used by one thread at
// a time (Store serializes access).
#ifndef SPINTUNE_STORAGE_SQLITE_DB_H_
#define SPINTUNE_STORAGE_SQLITE_DB_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

struct sqlite3;
struct sqlite3_stmt;

namespace spintune {

class SqliteDb;

// A prepared statement. Bind with 1-based indexes, Step() until it returns
// false, Reset() to reuse.
class Statement {
 public:
  Statement(SqliteDb* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  ~Statement();
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& Bind(int index, int64_t value);
  Statement& Bind(int index, double value);
  Statement& Bind(int index, absl::string_view text);
  Statement& BindBlob(int index, absl::string_view bytes);
  Statement& BindNull(int index);

  // True when a row is available, false when done.
  absl::StatusOr<bool> Step();
  // Steps once, expecting no row (INSERT/UPDATE/DELETE).
  absl::Status Run();
  void Reset();

  int64_t ColumnInt(int column) const;
  double ColumnDouble(int column) const;
  std::string ColumnText(int column) const;
  std::string ColumnBlob(int column) const;
  bool ColumnIsNull(int column) const;

 private:
  SqliteDb* db_;
  sqlite3_stmt* stmt_;
};

// How Open() treats the file.
enum class OpenMode {
  kCreate,    // create it if missing (the tuner)
  kExisting,  // it must exist (tools that write)
  kReadOnly,  // it must exist; never written, works on read-only media
};

class SqliteDb {
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
  ~SqliteDb();

  absl::Status Exec(absl::string_view sql);
  absl::StatusOr<std::unique_ptr<Statement>> Prepare(absl::string_view sql);
  // The statement for `sql`, prepared once and kept (reset, bindings
  // cleared) for the connection's lifetime: for statements run on every
  // batch. The pointer stays valid until the SqliteDb is destroyed; the
  // caller must not hold it across another call with the same `sql`.
  absl::StatusOr<Statement*> Cached(absl::string_view sql);
  // Resets every cached statement (a stepped, unreset one holds a read
  // snapshot that keeps the write-ahead log from being checkpointed).
  void ResetCached();
  int64_t LastInsertRowId() const;
  int Changes() const;

  // Status for the connection's last error, prefixed with `context`.
  // Notes a full disk (see Open()).
  absl::Status Error(absl::string_view context, int rc) const;
  const std::string& path() const { return path_; }

  // OK when a write may start: after a full disk, once the log could be
  // checkpointed and truncated. Called by Transaction::Begin() and before
  // a write statement outside a transaction.
  absl::Status EnsureRoom();
  sqlite3* raw() const { return db_; }

 private:
  SqliteDb(sqlite3* db, std::string path, uint64_t reserve_bytes)
      : db_(db), path_(std::move(path)), reserve_bytes_(reserve_bytes) {}
  // Allocates the reserve file if it is missing (best effort).
  void KeepReserve();
  sqlite3* db_;
  std::string path_;
  uint64_t reserve_bytes_;
  // Declared after db_: destroyed (finalized) after sqlite3_close_v2 marked
  // the connection for closing, which then completes.
  absl::flat_hash_map<std::string, std::unique_ptr<Statement>> cached_;
  mutable bool full_ = false;
};

// Runs BEGIN IMMEDIATE; rolls back on destruction unless Commit() succeeded.
class Transaction {
 public:
  explicit Transaction(SqliteDb* db) : db_(db) {}
  ~Transaction();
  absl::Status Begin();
  absl::Status Commit();

 private:
  SqliteDb* db_;
  bool open_ = false;
};

}  // namespace spintune

#endif  // SPINTUNE_STORAGE_SQLITE_DB_H_
