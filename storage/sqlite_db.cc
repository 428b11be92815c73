#include "storage/sqlite_db.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <sqlite3.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace spintune {

SqliteStatement::~SqliteStatement() {
  sqlite3_finalize(stmt_);
  ReleaseTurn();
}

void SqliteStatement::ReleaseTurn() {
  if (!holds_turn_) return;
  holds_turn_ = false;
  db_->LeaveGate();
}

Statement& SqliteStatement::Bind(int index, int64_t value) {
  sqlite3_bind_int64(stmt_, index, value);
  return *this;
}
Statement& SqliteStatement::Bind(int index, double value) {
  sqlite3_bind_double(stmt_, index, value);
  return *this;
}
Statement& SqliteStatement::Bind(int index, absl::string_view text) {
  sqlite3_bind_text(stmt_, index, text.data(), static_cast<int>(text.size()),
                    SQLITE_TRANSIENT);
  return *this;
}
Statement& SqliteStatement::BindBlob(int index, absl::string_view bytes) {
  sqlite3_bind_blob(stmt_, index, bytes.data(), static_cast<int>(bytes.size()),
                    SQLITE_TRANSIENT);
  return *this;
}
Statement& SqliteStatement::BindNull(int index) {
  sqlite3_bind_null(stmt_, index);
  return *this;
}

absl::StatusOr<bool> SqliteStatement::Step() {
  // A write outside a transaction is a transaction of its own: it waits
  // for room and for its turn at the write gate like one. Its turn ends
  // with its first step, or, when that step returns a row (an INSERT ...
  // RETURNING, which keeps SQLite's write lock meanwhile), once it is
  // stepped to its end or reset.
  bool own_turn = false;
  if (!sqlite3_stmt_busy(stmt_) && !sqlite3_stmt_readonly(stmt_) &&
      sqlite3_get_autocommit(db_->raw())) {
    own_turn = db_->EnterGate();
    if (absl::Status room = db_->EnsureRoom(); !room.ok()) {
      if (own_turn) db_->LeaveGate();
      return room;
    }
  }
  const int rc = sqlite3_step(stmt_);
  if (own_turn) holds_turn_ = true;
  if (rc == SQLITE_ROW) return true;
  ReleaseTurn();
  if (rc == SQLITE_DONE) return false;
  absl::Status s = db_->Error(sqlite3_sql(stmt_), rc);
  sqlite3_reset(stmt_);
  return s;
}

void SqliteStatement::Reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
  ReleaseTurn();
}

int64_t SqliteStatement::ColumnInt(int c) const { return sqlite3_column_int64(stmt_, c); }
double SqliteStatement::ColumnDouble(int c) const { return sqlite3_column_double(stmt_, c); }
std::string SqliteStatement::ColumnText(int c) const {
  const unsigned char* t = sqlite3_column_text(stmt_, c);
  return t ? std::string(reinterpret_cast<const char*>(t), sqlite3_column_bytes(stmt_, c))
           : std::string();
}
std::string SqliteStatement::ColumnBlob(int c) const {
  const void* b = sqlite3_column_blob(stmt_, c);
  return b ? std::string(static_cast<const char*>(b), sqlite3_column_bytes(stmt_, c))
           : std::string();
}
bool SqliteStatement::ColumnIsNull(int c) const {
  return sqlite3_column_type(stmt_, c) == SQLITE_NULL;
}

namespace {

// How long a statement waits for a lock another connection holds.
constexpr int kBusyTimeoutMs = 10000;
// How long a restart of the write-ahead log waits for readers still in it
// (the writers wait meanwhile).
constexpr int kRestartReaderWaitMs = 20;

// Why a database cannot be opened for writing, when the file system says so.
std::string ReadOnlyHint(const std::string& path) {
  if (path == ":memory:") return "";
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  struct statvfs fs;
  if (statvfs(dir.c_str(), &fs) == 0 && (fs.f_flag & ST_RDONLY)) {
    return "; the file system holding it is mounted read-only (the tuner writes the database "
           "and its -wal and -shm files)";
  }
  if (access(dir.c_str(), W_OK) != 0 || (access(path.c_str(), F_OK) == 0 &&
                                         access(path.c_str(), W_OK) != 0)) {
    return "; the database or its directory is read-only for this user";
  }
  return "";
}

}  // namespace

absl::StatusOr<std::unique_ptr<SqliteDb>> SqliteDb::Open(const std::string& path,
                                                         uint64_t reserve_bytes, OpenMode mode) {
  const bool memory = path == ":memory:";
  if (!memory && mode != OpenMode::kCreate) {
    struct stat st;
    if (stat(path.c_str(), &st) != 0) {
      return absl::NotFoundError(absl::StrCat("no database ", path,
                                              " (the tuner creates it: spintune-tuner --db ",
                                              path, ")"));
    }
    if (!S_ISREG(st.st_mode)) {
      return absl::InvalidArgumentError(absl::StrCat(path, " is not a file"));
    }
  }
  auto open = [&](const std::string& name, int flags, sqlite3** out) {
    const int rc = sqlite3_open_v2(name.c_str(), out, flags | SQLITE_OPEN_FULLMUTEX, nullptr);
    if (rc == SQLITE_OK) return absl::OkStatus();
    std::string msg = *out ? sqlite3_errmsg(*out) : sqlite3_errstr(rc);
    sqlite3_close(*out);
    *out = nullptr;
    return absl::UnavailableError(
        absl::StrCat("cannot open database ", path, ": ", msg, ReadOnlyHint(path)));
  };
  sqlite3* raw = nullptr;
  if (mode == OpenMode::kReadOnly && !memory) {
    // Read-only: no -shm or -reserve is created, nothing is migrated. On
    // read-only media without a write-ahead log the file is read as
    // immutable (nobody can change it there).
    absl::Status s = open("file:" + path + "?mode=ro", SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, &raw);
    // Wait out a writer that holds the log (a tuner recovering it after a
    // crash, a checkpoint): without the timeout the first read fails at once
    // with SQLITE_BUSY and the open with "cannot read database".
    if (s.ok()) sqlite3_busy_timeout(raw, kBusyTimeoutMs);
    if (!s.ok() || sqlite3_exec(raw, "SELECT 1 FROM sqlite_master LIMIT 1", nullptr, nullptr,
                                nullptr) != SQLITE_OK) {
      sqlite3_close(raw);
      raw = nullptr;
      struct stat wal;
      if (stat((path + "-wal").c_str(), &wal) == 0) {
        return s.ok() ? absl::UnavailableError(absl::StrCat(
                            "cannot read database ", path, " read-only", ReadOnlyHint(path)))
                      : s;
      }
      SPINTUNE_RETURN_IF_ERROR(
          open("file:" + path + "?immutable=1", SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, &raw));
    }
    std::unique_ptr<SqliteDb> db(new SqliteDb(raw, path, 0));
    sqlite3_busy_timeout(raw, kBusyTimeoutMs);
    sqlite3_extended_result_codes(raw, 1);
    return db;
  }
  SPINTUNE_RETURN_IF_ERROR(open(path,
                                SQLITE_OPEN_READWRITE |
                                    (mode == OpenMode::kCreate ? SQLITE_OPEN_CREATE : 0),
                                &raw));
  std::unique_ptr<SqliteDb> db(new SqliteDb(raw, path, memory ? 0 : reserve_bytes));
  sqlite3_busy_timeout(raw, kBusyTimeoutMs);
  sqlite3_extended_result_codes(raw, 1);
  if (!memory) {
    auto mode_row = db->Prepare("PRAGMA journal_mode=WAL");
    auto row = mode_row.ok() ? (*mode_row)->Step() : absl::StatusOr<bool>(mode_row.status());
    if (!row.ok()) {
      return absl::Status(row.status().code(),
                          absl::StrCat(row.status().message(), ReadOnlyHint(path)));
    }
    if (!*row || (*mode_row)->ColumnText(0) != "wal") {
      return absl::FailedPreconditionError(
          absl::StrCat(path, ": cannot switch the database to WAL mode"));
    }
  }
  // A page cache of up to 32 MiB (SQLite's default is 2 MiB): ingest for
  // thousands of targets touches pages all over the tables in each commit,
  // and a small cache reads them back from the file again and again.
  absl::Status s = db->Exec(
      "PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON; PRAGMA cache_size=-32768;");
  if (!s.ok()) return s;
  SPINTUNE_RETURN_IF_ERROR(db->SetLogLimit(kDefaultLogLimitBytes));
  SPINTUNE_ASSIGN_OR_RETURN(auto page_size, db->Prepare("PRAGMA page_size"));
  SPINTUNE_ASSIGN_OR_RETURN(bool page_row, page_size->Step());
  if (page_row) db->page_bytes_ = page_size->ColumnInt(0);
  db->KeepReserve();
  return db;
}

void SqliteDb::KeepReserve() {
  if (reserve_bytes_ == 0) return;
  const std::string reserve = path_ + "-reserve";
  struct stat st;
  if (stat(reserve.c_str(), &st) == 0 && static_cast<uint64_t>(st.st_size) >= reserve_bytes_) {
    return;
  }
  const int fd = open(reserve.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return;
  const int rc = posix_fallocate(fd, 0, static_cast<off_t>(reserve_bytes_));
  close(fd);
  if (rc != 0) unlink(reserve.c_str());  // no room for it now; tried again later
}

absl::Status SqliteDb::EnsureRoom() {
  if (!full_) return absl::OkStatus();
  // Room for the checkpoint: the database file grows by what the log holds.
  if (reserve_bytes_ > 0) unlink((path_ + "-reserve").c_str());
  sqlite3_stmt* stmt = nullptr;
  int busy = 1;
  if (sqlite3_prepare_v2(db_, "PRAGMA wal_checkpoint(TRUNCATE)", -1, &stmt, nullptr) ==
          SQLITE_OK &&
      sqlite3_step(stmt) == SQLITE_ROW) {
    busy = sqlite3_column_int(stmt, 0);
  }
  sqlite3_finalize(stmt);
  if (busy != 0) {
    return absl::ResourceExhaustedError(absl::StrCat(
        path_, ": the disk was full; writes wait until its write-ahead log can be checkpointed"));
  }
  full_ = false;
  KeepReserve();
  return absl::OkStatus();
}

SqliteDb::~SqliteDb() {
  LeaveGate();
  if (lease_fd_ >= 0) close(lease_fd_);  // (ends its leases)
  sqlite3_close_v2(db_);
}

namespace {

// Sets (F_WRLCK) or clears (F_UNLCK) the open file description lock on
// byte `target_id` of `fd`, without waiting; fcntl's result.
int LockLeaseByte(int fd, int64_t target_id, short type) {
  struct flock lock = {};
  lock.l_type = type;
  lock.l_whence = SEEK_SET;
  lock.l_start = target_id;
  lock.l_len = 1;
  return fcntl(fd, F_OFD_SETLK, &lock);
}

}  // namespace

absl::StatusOr<bool> SqliteDb::TryLockTarget(int64_t target_id) {
  if (path_.empty() || path_ == ":memory:") return true;  // no other connection sees it
  if (target_id < 0) return absl::InvalidArgumentError("negative target id");
  if (lease_fd_ < 0) {
    const std::string leases = path_ + "-leases";
    lease_fd_ = open(leases.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lease_fd_ < 0) {
      return absl::UnavailableError(
          absl::StrCat(leases, ": cannot open the target lease file: ", strerror(errno)));
    }
  }
  if (LockLeaseByte(lease_fd_, target_id, F_WRLCK) == 0) return true;
  if (errno == EAGAIN || errno == EACCES) return false;  // another connection's
  return absl::UnavailableError(
      absl::StrCat(path_, "-leases: locking target ", target_id, ": ", strerror(errno)));
}

void SqliteDb::UnlockTarget(int64_t target_id) {
  if (lease_fd_ < 0 || target_id < 0) return;
  LockLeaseByte(lease_fd_, target_id, F_UNLCK);
}

absl::Status SqliteDb::Error(absl::string_view context, int rc) const {
  const std::string msg =
      absl::StrCat(path_, ": ", context, ": ", sqlite3_errmsg(db_), " (", sqlite3_errstr(rc), ")");
  switch (rc & 0xFF) {
    case SQLITE_FULL:
      full_ = true;
      return absl::ResourceExhaustedError(msg);
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_CANTOPEN:
      return absl::FailedPreconditionError(msg);
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_IOERR:
      return absl::UnavailableError(msg);
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return absl::DataLossError(msg);
    case SQLITE_CONSTRAINT:
      return absl::AlreadyExistsError(msg);
    default:
      return absl::InternalError(msg);
  }
}

absl::Status SqliteDb::Exec(absl::string_view sql) {
  char* err = nullptr;
  const std::string text(sql);
  const int rc = sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &err);
  sqlite3_free(err);
  if (rc != SQLITE_OK) return Error(text.substr(0, 60), rc);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Statement>> SqliteDb::Prepare(absl::string_view sql) {
  sqlite3_stmt* stmt = nullptr;
  const int rc =
      sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &stmt, nullptr);
  if (rc != SQLITE_OK) return Error(sql, rc);
  return std::make_unique<SqliteStatement>(this, stmt);
}

int SqliteDb::Changes() const { return sqlite3_changes(db_); }

bool SqliteDb::EnterGate() {
  if (!gate_ || in_gate_) return false;
  gate_->Enter(gate_priority_);
  in_gate_ = true;
  return true;
}

absl::Status SqliteDb::Begin() {
  EnterGate();
  absl::Status s = EnsureRoom();
  if (s.ok()) s = RunCached("BEGIN IMMEDIATE");
  if (!s.ok()) LeaveGate();
  return s;
}

void SqliteDb::LeaveGate() {
  if (!in_gate_) return;
  in_gate_ = false;
  gate_->Leave();
}

absl::Status SqliteDb::BeginDeferredSync() {
  // Set outside the transaction: the pager takes it when one begins.
  SPINTUNE_RETURN_IF_ERROR(RunCached("PRAGMA synchronous=NORMAL"));
  deferred_sync_ = true;
  absl::Status s = Begin();
  if (!s.ok()) RestoreSync();
  return s;
}

absl::StatusOr<bool> SqliteDb::BeginSnapshot() {
  if (!sqlite3_get_autocommit(db_)) return false;  // in a transaction
  SPINTUNE_RETURN_IF_ERROR(RunCached("BEGIN DEFERRED"));
  return true;
}

void SqliteDb::EndSnapshot() {
  if (!RunCached("COMMIT").ok()) Exec("ROLLBACK").IgnoreError();
}

void SqliteDb::RestoreSync() {
  if (!deferred_sync_) return;
  deferred_sync_ = false;
  RunCached("PRAGMA synchronous=FULL").IgnoreError();
}

absl::Status SqliteDb::Commit() {
  absl::Status s = RunCached("COMMIT");
  if (s.ok()) {
    RestoreSync();
    LeaveGate();  // (a failed commit is still open: its Rollback() leaves)
  }
  return s;
}

void SqliteDb::Rollback() {
  Exec("ROLLBACK").IgnoreError();
  RestoreSync();
  LeaveGate();
}

absl::StatusOr<bool> SqliteDb::HasTable(absl::string_view table) {
  SPINTUNE_ASSIGN_OR_RETURN(
      auto q, Prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1"));
  q->Bind(1, table);
  return q->Step();
}

absl::StatusOr<bool> SqliteDb::IsEmpty() {
  SPINTUNE_ASSIGN_OR_RETURN(auto q, Prepare("SELECT 1 FROM sqlite_master LIMIT 1"));
  SPINTUNE_ASSIGN_OR_RETURN(bool any, q->Step());
  return !any;
}

void SqliteDb::SetCommitCheckpoints(bool on) {
  sqlite3_wal_autocheckpoint(db_, on ? 1000 : 0);
}

absl::Status SqliteDb::Checkpoint() {
  // BUSY: another connection was checkpointing; the next call goes on.
  auto status_of = [&](int rc) {
    return rc == SQLITE_OK || rc == SQLITE_BUSY
               ? absl::OkStatus()
               : absl::UnavailableError(
                     absl::StrCat(path_, ": checkpoint: ", sqlite3_errstr(rc)));
  };
  int log_frames = 0;
  int rc =
      sqlite3_wal_checkpoint_v2(db_, nullptr, SQLITE_CHECKPOINT_PASSIVE, &log_frames, nullptr);
  // The log starts again from its beginning only when a writer finds all
  // of it copied and no reader in it. Under continuous commits a passive
  // checkpoint never sees that (frames arrive while it copies), and the log
  // grows by every commit for as long as they go on (4 GB a minute at
  // 2,000 fleet agents). Once it is long: a second passive copy of what
  // came during the first, then the rest with this process's writers held
  // at the gate (they wait for one turn, this one), waiting briefly for
  // the readers still in the log. The next commit then restarts it and
  // cuts the file back (journal_size_limit). Readers that stay longer: the
  // next call tries again.
  if (rc != SQLITE_OK || log_frames * page_bytes_ < log_limit_bytes_) return status_of(rc);
  sqlite3_wal_checkpoint_v2(db_, nullptr, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
  const bool own_turn = EnterGate();
  sqlite3_busy_timeout(db_, kRestartReaderWaitMs);
  rc = sqlite3_wal_checkpoint_v2(db_, nullptr, SQLITE_CHECKPOINT_RESTART, nullptr, nullptr);
  sqlite3_busy_timeout(db_, kBusyTimeoutMs);
  if (own_turn) LeaveGate();
  return status_of(rc);
}

absl::Status SqliteDb::SetLogLimit(int64_t bytes) {
  SPINTUNE_RETURN_IF_ERROR(Exec(absl::StrCat("PRAGMA journal_size_limit=", bytes)));
  log_limit_bytes_ = bytes;
  return absl::OkStatus();
}

absl::StatusOr<int64_t> SqliteDb::DataVersion() {
  SPINTUNE_ASSIGN_OR_RETURN(auto q, Prepare("PRAGMA data_version"));
  SPINTUNE_ASSIGN_OR_RETURN(bool row, q->Step());
  return row ? q->ColumnInt(0) : 0;
}

absl::Status SqliteDb::CheckIntegrity() {
  SPINTUNE_ASSIGN_OR_RETURN(auto q, Prepare("PRAGMA integrity_check"));
  std::string findings;
  while (true) {
    SPINTUNE_ASSIGN_OR_RETURN(bool row, q->Step());
    if (!row) break;
    const std::string line = q->ColumnText(0);
    if (line != "ok") absl::StrAppend(&findings, line, "; ");
  }
  if (!findings.empty()) return absl::DataLossError("database integrity: " + findings);
  return absl::OkStatus();
}

}  // namespace spintune
