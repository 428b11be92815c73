#include "storage/pg_db.h"

#include <libpq-fe.h>

#include <cstdlib>
#include <functional>
#include <regex>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace spintune {
namespace {

// libpq type OIDs (catalog/pg_type.h, stable).
constexpr unsigned kInt8Oid = 20;
constexpr unsigned kTextOid = 25;
constexpr unsigned kFloat8Oid = 701;
constexpr unsigned kByteaOid = 17;

// libpq's messages span lines ("...failed: Connection refused\n\tIs the
// server running..."): one line.
std::string OneLine(absl::string_view text) {
  std::string out;
  bool space = false;
  for (char c : text) {
    if (c == '\n' || c == '\t' || c == '\r' || c == ' ') {
      space = !out.empty();
      continue;
    }
    if (space) out.push_back(' ');
    space = false;
    out.push_back(c);
  }
  return out;
}

// The URI as messages show it: no password.
std::string Redacted(const std::string& uri) {
  static const std::regex user_password(R"((://[^:/@?]*):[^@/?]*@)");
  static const std::regex password_param(R"((password=)[^&]*)");
  return std::regex_replace(std::regex_replace(uri, user_password, "$1:***@"), password_param,
                            "$1***");
}

absl::Status ErrorFor(const char* sqlstate, std::string message) {
  const absl::string_view state = sqlstate ? sqlstate : "";
  if (absl::StartsWith(state, "23")) return absl::AlreadyExistsError(message);  // constraints
  if (state == "40001" || state == "40P01" || absl::StartsWith(state, "08") ||
      absl::StartsWith(state, "57P") || state.empty()) {
    return absl::UnavailableError(message);  // serialization, deadlock, connection, shutdown
  }
  if (absl::StartsWith(state, "53")) return absl::ResourceExhaustedError(message);  // disk full
  if (state == "25006" || absl::StartsWith(state, "42501")) {
    return absl::FailedPreconditionError(message);  // read-only transaction, privileges
  }
  return absl::InternalError(message);
}

void IgnoreNotice(void*, const char*) {}

}  // namespace

std::string DollarParams(absl::string_view sql, std::vector<bool>* used) {
  std::string out;
  out.reserve(sql.size() + 8);
  used->clear();
  char quote = 0;
  size_t next = 1;
  for (size_t i = 0; i < sql.size(); ++i) {
    const char c = sql[i];
    if (quote != 0) {
      if (c == quote) quote = 0;
      out.push_back(c);
      continue;
    }
    if (c == '\'' || c == '"') {
      quote = c;
      out.push_back(c);
      continue;
    }
    if (c != '?') {
      out.push_back(c);
      continue;
    }
    size_t n = 0, j = i + 1;
    while (j < sql.size() && absl::ascii_isdigit(static_cast<unsigned char>(sql[j]))) {
      n = n * 10 + static_cast<size_t>(sql[j] - '0');
      ++j;
    }
    if (j == i + 1) n = next;  // a bare ?: the one after the highest so far
    i = j - 1;
    if (used->size() < n) used->resize(n, false);
    (*used)[n - 1] = true;
    next = used->size() + 1;
    absl::StrAppend(&out, "$", n);
  }
  return out;
}

PgStatement::PgStatement(PgDb* db, std::string sql, const std::vector<bool>& used)
    : db_(db), sql_(std::move(sql)), params_(used.size()) {
  // A parameter the SQL never names still needs a type for PREPARE.
  for (size_t i = 0; i < used.size(); ++i) {
    if (!used[i]) params_[i].type = kTextOid;
  }
}

PgStatement::~PgStatement() { PQclear(result_); }

Statement& PgStatement::Set(int index, unsigned type, std::string value, bool binary) {
  if (index < 1 || static_cast<size_t>(index) > params_.size()) return *this;
  Param& p = params_[index - 1];
  if (p.type == kTextOid && type == 0) type = kTextOid;  // unused: keeps its type
  p.type = type;
  p.set = true;
  p.binary = binary;
  p.value = std::move(value);
  return *this;
}

Statement& PgStatement::Bind(int index, int64_t value) {
  return Set(index, kInt8Oid, absl::StrCat(value), false);
}
Statement& PgStatement::Bind(int index, double value) {
  return Set(index, kFloat8Oid, absl::StrFormat("%.17g", value), false);
}
Statement& PgStatement::Bind(int index, absl::string_view text) {
  return Set(index, 0, std::string(text), false);
}
Statement& PgStatement::BindBlob(int index, absl::string_view bytes) {
  return Set(index, kByteaOid, std::string(bytes), true);
}
Statement& PgStatement::BindNull(int index) {
  if (index >= 1 && static_cast<size_t>(index) <= params_.size()) params_[index - 1].set = false;
  return *this;
}

absl::StatusOr<bool> PgStatement::Step() {
  if (result_ == nullptr) {
    SPINTUNE_ASSIGN_OR_RETURN(result_, db_->Execute(sql_, params_));
    row_ = 0;
  } else {
    ++row_;
  }
  return row_ < PQntuples(result_);
}

void PgStatement::Reset() {
  PQclear(result_);
  result_ = nullptr;
  row_ = -1;
  for (Param& p : params_) {
    p.set = false;
    p.value.clear();
  }
}

int64_t PgStatement::ColumnInt(int c) const {
  const char* v = PQgetvalue(result_, row_, c);
  if (v[0] == 't' && v[1] == '\0') return 1;  // a boolean
  return std::strtoll(v, nullptr, 10);
}

double PgStatement::ColumnDouble(int c) const {
  return std::strtod(PQgetvalue(result_, row_, c), nullptr);
}

std::string PgStatement::ColumnText(int c) const {
  return std::string(PQgetvalue(result_, row_, c), PQgetlength(result_, row_, c));
}

std::string PgStatement::ColumnBlob(int c) const {
  if (PQftype(result_, c) != kByteaOid) return ColumnText(c);
  // bytea's text form: \x and two hex digits per byte.
  const char* v = PQgetvalue(result_, row_, c);
  const int n = PQgetlength(result_, row_, c);
  if (n < 2 || v[0] != '\\' || v[1] != 'x') return std::string();
  auto nibble = [](char h) {
    return static_cast<char>(h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
  };
  std::string out((n - 2) / 2, '\0');
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = static_cast<char>(nibble(v[2 + 2 * i]) << 4 | nibble(v[3 + 2 * i]));
  }
  return out;
}

bool PgStatement::ColumnIsNull(int c) const { return PQgetisnull(result_, row_, c) != 0; }

PgDb::PgDb(std::string uri, bool read_only)
    : uri_(std::move(uri)), name_(Redacted(uri_)), read_only_(read_only) {}

PgDb::~PgDb() { PQfinish(conn_); }

absl::StatusOr<std::unique_ptr<PgDb>> PgDb::Open(const std::string& uri, OpenMode mode) {
  std::unique_ptr<PgDb> db(new PgDb(uri, mode == OpenMode::kReadOnly));
  SPINTUNE_RETURN_IF_ERROR(db->EnsureConnected());
  return db;
}

absl::Status PgDb::EnsureConnected() {
  if (conn_ != nullptr && PQstatus(conn_) == CONNECTION_OK) return absl::OkStatus();
  if (in_tx_) {
    return absl::UnavailableError(absl::StrCat(name_, ": connection lost in a transaction"));
  }
  if (conn_ == nullptr) {
    // Defaults first: what the URI says wins.
    const char* keys[] = {"connect_timeout",     "keepalives_idle", "keepalives_interval",
                          "keepalives_count",    "fallback_application_name", "dbname",
                          nullptr};
    const char* values[] = {"10", "10", "5", "3", "spintune", uri_.c_str(), nullptr};
    conn_ = PQconnectdbParams(keys, values, /*expand_dbname=*/1);
  } else {
    PQreset(conn_);
    // Session-level advisory locks end with the session: a target lease
    // taken before is gone, and another tuner may hold it now.
    lost_target_locks_ += target_locks_.size();
    target_locks_.clear();
  }
  if (conn_ == nullptr || PQstatus(conn_) != CONNECTION_OK) {
    return absl::UnavailableError(
        absl::StrCat("cannot connect to PostgreSQL ", name_, ": ",
                     conn_ ? OneLine(PQerrorMessage(conn_)) : "out of memory"));
  }
  PQsetNoticeProcessor(conn_, IgnoreNotice, nullptr);
  prepared_.clear();  // a new session has none
  auto set_up = [this]() -> absl::Status {
    // A tuner cut off by the network loses its target locks within about
    // 25 s (the server's keepalive probes; nothing on a Unix socket).
    SPINTUNE_RETURN_IF_ERROR(Exec("SET tcp_keepalives_idle = 10; SET tcp_keepalives_interval = 5; "
                                  "SET tcp_keepalives_count = 3"));
    // The tuner acknowledges a batch after its commit: the commit must be
    // durable, whatever the server's default (a stronger setting is kept).
    SPINTUNE_RETURN_IF_ERROR(
        Exec("SELECT set_config('synchronous_commit', 'on', false) "
             "WHERE current_setting('synchronous_commit') IN ('off', 'local')"));
    if (read_only_) return Exec("SET default_transaction_read_only = on");
    return absl::OkStatus();
  };
  if (absl::Status s = set_up(); !s.ok()) {
    // Not a session to use: the next statement connects and sets up anew.
    PQfinish(conn_);
    conn_ = nullptr;
    return s;
  }
  if (lost_target_locks_ > 0) {
    // The statement that connected again fails: its caller was working
    // under a lease it no longer holds (HoldsTargetLock() says which).
    const size_t lost = lost_target_locks_;
    lost_target_locks_ = 0;
    return absl::UnavailableError(absl::StrCat(
        name_, ": the connection was lost and made again; the ", lost,
        " target lease(s) held on it ended with it"));
  }
  return absl::OkStatus();
}

absl::Status PgDb::Check(pg_result* result, absl::string_view context) {
  const ExecStatusType status = result ? PQresultStatus(result) : PGRES_FATAL_ERROR;
  if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) {
    const char* tuples = PQcmdTuples(result);
    changes_ = tuples[0] ? std::atoi(tuples) : 0;
    return absl::OkStatus();
  }
  const char* sqlstate = result ? PQresultErrorField(result, PG_DIAG_SQLSTATE) : nullptr;
  const char* primary = result ? PQresultErrorField(result, PG_DIAG_MESSAGE_PRIMARY) : nullptr;
  std::string message = OneLine(primary ? primary : PQerrorMessage(conn_));
  if (sqlstate == nullptr && PQstatus(conn_) != CONNECTION_OK) {
    message = absl::StrCat("connection lost: ", message);
  }
  return ErrorFor(sqlstate, absl::StrCat(name_, ": ", context.substr(0, 80), ": ", message,
                                         sqlstate ? absl::StrCat(" (", sqlstate, ")") : ""));
}

absl::Status PgDb::Exec(absl::string_view sql) {
  SPINTUNE_RETURN_IF_ERROR(EnsureConnected());
  const std::string text(sql);
  PGresult* r = PQexec(conn_, text.c_str());
  absl::Status s = Check(r, text);
  PQclear(r);
  return s;
}

absl::StatusOr<std::unique_ptr<Statement>> PgDb::Prepare(absl::string_view sql) {
  std::vector<bool> used;
  std::string text = DollarParams(sql, &used);
  return std::make_unique<PgStatement>(this, std::move(text), used);
}

absl::StatusOr<pg_result*> PgDb::Execute(const std::string& sql,
                                         const std::vector<PgStatement::Param>& params) {
  SPINTUNE_RETURN_IF_ERROR(EnsureConnected());
  std::string key;
  std::vector<Oid> types;
  std::vector<const char*> values;
  std::vector<int> lengths, formats;
  for (const auto& p : params) {
    absl::StrAppend(&key, p.type, ",");
    types.push_back(p.type);
    values.push_back(p.set ? p.value.c_str() : nullptr);
    lengths.push_back(static_cast<int>(p.value.size()));
    formats.push_back(p.binary ? 1 : 0);
  }
  absl::StrAppend(&key, ";", sql);
  auto it = prepared_.find(key);
  if (it == prepared_.end()) {
    const std::string name = absl::StrCat("s", prepared_.size() + 1);
    PGresult* r = PQprepare(conn_, name.c_str(), sql.c_str(), static_cast<int>(types.size()),
                            types.data());
    absl::Status s = Check(r, sql);
    PQclear(r);
    SPINTUNE_RETURN_IF_ERROR(s);
    it = prepared_.emplace(std::move(key), name).first;
  }
  PGresult* r = PQexecPrepared(conn_, it->second.c_str(), static_cast<int>(values.size()),
                               values.data(), lengths.data(), formats.data(), 0);
  absl::Status s = Check(r, sql);
  if (!s.ok()) {
    PQclear(r);
    return s;
  }
  return r;
}

absl::Status PgDb::Begin() {
  SPINTUNE_RETURN_IF_ERROR(Exec("BEGIN"));
  in_tx_ = true;
  return absl::OkStatus();
}

absl::Status PgDb::BeginDeferredSync() {
  SPINTUNE_RETURN_IF_ERROR(Begin());
  // SET LOCAL ends with the transaction.
  absl::Status s = Exec("SET LOCAL synchronous_commit = off");
  if (!s.ok()) Rollback();
  return s;
}

absl::StatusOr<bool> PgDb::BeginSnapshot() {
  if (in_tx_) return false;
  SPINTUNE_RETURN_IF_ERROR(Exec("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY"));
  in_tx_ = true;
  return true;
}

void PgDb::EndSnapshot() {
  if (!Commit().ok()) Rollback();
}

absl::Status PgDb::Commit() {
  if (PQstatus(conn_) != CONNECTION_OK) {
    return absl::UnavailableError(absl::StrCat(name_, ": connection lost in a transaction"));
  }
  PGresult* r = PQexec(conn_, "COMMIT");
  absl::Status s = Check(r, "COMMIT");
  // COMMIT of a transaction that failed earlier answers ROLLBACK.
  if (s.ok() && std::string(PQcmdStatus(r)) != "COMMIT") {
    s = absl::AbortedError(absl::StrCat(name_, ": the transaction was rolled back"));
  }
  PQclear(r);
  in_tx_ = false;
  return s;
}

void PgDb::Rollback() {
  if (PQstatus(conn_) == CONNECTION_OK) PQclear(PQexec(conn_, "ROLLBACK"));
  in_tx_ = false;
}

std::string PgDb::Ddl(absl::string_view ddl) const {
  static const std::pair<std::regex, const char*> kRewrites[] = {
      {std::regex(R"(\bid INTEGER PRIMARY KEY\b)"),
       "id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY"},
      {std::regex(R"(\bINTEGER\b)"), "BIGINT"},
      {std::regex(R"(\bREAL\b)"), "DOUBLE PRECISION"},
      {std::regex(R"(\bBLOB\b)"), "BYTEA"},
      // Byte order, as SQLite compares text, whatever the database's locale.
      {std::regex(R"(\bTEXT\b)"), "TEXT COLLATE \"C\""},
      {std::regex(R"(\)\s*WITHOUT ROWID)"), ")"},
      // A reserved word in PostgreSQL.
      {std::regex(R"(\bwindow\b)"), "\"window\""},
  };
  std::string out(ddl);
  for (const auto& [from, to] : kRewrites) out = std::regex_replace(out, from, to);
  return out;
}

absl::StatusOr<bool> PgDb::HasTable(absl::string_view table) {
  SPINTUNE_ASSIGN_OR_RETURN(auto q, Prepare("SELECT 1 FROM pg_catalog.pg_tables WHERE "
                                            "schemaname = current_schema() AND tablename = ?1"));
  q->Bind(1, table);
  return q->Step();
}

absl::StatusOr<bool> PgDb::IsEmpty() {
  SPINTUNE_ASSIGN_OR_RETURN(auto q, Prepare("SELECT 1 FROM pg_catalog.pg_tables WHERE "
                                            "schemaname = current_schema() LIMIT 1"));
  SPINTUNE_ASSIGN_OR_RETURN(bool any, q->Step());
  return !any;
}

absl::StatusOr<int64_t> PgDb::DataVersion() {
  // The whole snapshot (oldest running transaction, first one not
  // completed, the ones running in between), hashed: it changes whenever
  // a writer's transaction ends, this connection's too. Its xmax alone
  // stays put when a transaction older than the newest completed one
  // commits (it is one past the newest completed).
  SPINTUNE_ASSIGN_OR_RETURN(auto q, Prepare("SELECT CAST(pg_current_snapshot() AS TEXT)"));
  SPINTUNE_ASSIGN_OR_RETURN(bool row, q->Step());
  return row ? static_cast<int64_t>(std::hash<std::string>()(q->ColumnText(0))) : 0;
}

// The advisory lock keys: spintune's schema migrations ("spin" in ASCII),
// and (as the first of two keys, the target id the second) target leases
// and a target's compactions.
constexpr int64_t kSchemaLock = 0x7370696e;
constexpr int64_t kTargetLock = 0x74617267;  // "targ"
constexpr int64_t kFoldLock = 0x666f6c64;    // "fold"

absl::Status PgDb::LockSchema() {
  return Exec(absl::StrCat("SELECT pg_advisory_lock(", kSchemaLock, ")"));
}

void PgDb::UnlockSchema() {
  Exec(absl::StrCat("SELECT pg_advisory_unlock(", kSchemaLock, ")")).IgnoreError();
}

absl::StatusOr<bool> PgDb::TryLockTarget(int64_t target_id) {
  SPINTUNE_ASSIGN_OR_RETURN(
      auto q, Prepare(absl::StrCat("SELECT pg_try_advisory_lock(", kTargetLock,
                                   ", CAST(?1 AS INTEGER))")));
  q->Bind(1, target_id);
  SPINTUNE_ASSIGN_OR_RETURN(bool row, q->Step());
  const bool locked = row && q->ColumnInt(0) == 1;
  if (locked) target_locks_.insert(target_id);
  return locked;
}

void PgDb::UnlockTarget(int64_t target_id) {
  target_locks_.erase(target_id);
  // A lost session's locks ended with it: nothing to unlock, and no
  // reconnect here to swallow the report of other lost locks.
  if (conn_ == nullptr || PQstatus(conn_) != CONNECTION_OK) return;
  Exec(absl::StrCat("SELECT pg_advisory_unlock(", kTargetLock, ", ", target_id, ")"))
      .IgnoreError();
}

bool PgDb::HoldsTargetLock(int64_t target_id) const {
  // A session found dead (a failed statement) took its locks with it.
  return conn_ != nullptr && PQstatus(conn_) == CONNECTION_OK && target_locks_.count(target_id) > 0;
}

absl::Status PgDb::LockTargetForTransaction(int64_t target_id) {
  SPINTUNE_ASSIGN_OR_RETURN(
      auto q, Cached(absl::StrCat("SELECT pg_advisory_xact_lock(", kFoldLock,
                                  ", CAST(?1 AS INTEGER))")));
  q->Bind(1, target_id);
  absl::Status s = q->Step().status();
  q->Reset();
  return s;
}

}  // namespace spintune
