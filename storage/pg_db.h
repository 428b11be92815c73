// The PostgreSQL backend of SqlDb (storage/sql_db.h), through libpq: several
// tuners on several machines share one database (docs/deploy.md).
//
// Statements are prepared on the server once per connection (per SQL text
// and parameter types) with `$N` parameters (the store's `?N` rewritten);
// integers travel as int8, reals as float8, blobs as bytea in binary, text as
// text; results come as text. The schema's DDL (written for SQLite) is
// translated by Ddl(). A lost connection is re-established by the next
// statement outside a transaction; statements in a transaction whose
// connection was lost fail with Unavailable.
//
// Thread-safety: as SqlDb (one thread at a time).
#ifndef SPINTUNE_STORAGE_PG_DB_H_
#define SPINTUNE_STORAGE_PG_DB_H_

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "storage/sql_db.h"

struct pg_conn;
struct pg_result;

namespace spintune {

class PgDb;

class PgStatement : public Statement {
 public:
  // `sql` with `$N` parameters; `used` as DollarParams() sets it.
  PgStatement(PgDb* db, std::string sql, const std::vector<bool>& used);
  ~PgStatement() override;
  PgStatement(const PgStatement&) = delete;
  PgStatement& operator=(const PgStatement&) = delete;

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

  // A bound value: its libpq type (0: let the server infer it) and text
  // (or bytes); null when !set.
  struct Param {
    unsigned type = 0;
    bool set = false;
    bool binary = false;
    std::string value;
  };

 private:
  Statement& Set(int index, unsigned type, std::string value, bool binary);
  PgDb* db_;
  const std::string sql_;
  std::vector<Param> params_;
  pg_result* result_ = nullptr;
  int row_ = -1;
};

class PgDb : public SqlDb {
 public:
  // Connects to `uri` (a libpq connection URI, postgresql://...). The
  // database must exist. kReadOnly makes every transaction read-only.
  // Unavailable with one line (the URI without its password, libpq's
  // reason) when the server cannot be reached or refuses the login.
  static absl::StatusOr<std::unique_ptr<PgDb>> Open(const std::string& uri, OpenMode mode);
  ~PgDb() override;

  absl::Status Exec(absl::string_view sql) override;
  absl::StatusOr<std::unique_ptr<Statement>> Prepare(absl::string_view sql) override;
  int Changes() const override { return changes_; }
  const std::string& name() const override { return name_; }
  absl::Status Begin() override;
  absl::Status BeginDeferredSync() override;
  absl::StatusOr<bool> BeginSnapshot() override;
  void EndSnapshot() override;
  absl::Status Commit() override;
  void Rollback() override;
  std::string Ddl(absl::string_view ddl) const override;
  absl::string_view ForUpdate() const override { return " FOR UPDATE"; }
  absl::StatusOr<bool> HasTable(absl::string_view table) override;
  absl::StatusOr<bool> IsEmpty() override;
  absl::StatusOr<int64_t> DataVersion() override;
  absl::Status CheckIntegrity() override { return absl::OkStatus(); }
  absl::Status LockSchema() override;
  void UnlockSchema() override;
  absl::StatusOr<bool> TryLockTarget(int64_t target_id) override;
  void UnlockTarget(int64_t target_id) override;
  bool HoldsTargetLock(int64_t target_id) const override;
  absl::Status LockTargetForTransaction(int64_t target_id) override;

  // Runs `sql` ($N parameters) prepared with `params`; the result (rows, or
  // none) is the caller's to PQclear. Used by PgStatement.
  absl::StatusOr<pg_result*> Execute(const std::string& sql,
                                     const std::vector<PgStatement::Param>& params);

 private:
  PgDb(std::string uri, bool read_only);
  // Connects (again, after a lost connection) unless connected.
  absl::Status EnsureConnected();
  // OK for a successful result, else its error (`context`: the SQL).
  absl::Status Check(pg_result* result, absl::string_view context);
  const std::string uri_;
  const std::string name_;
  const bool read_only_;
  pg_conn* conn_ = nullptr;
  bool in_tx_ = false;
  // Target locks held by this session (TryLockTarget), and how many went
  // with a lost one, not reported yet (EnsureConnected).
  std::set<int64_t> target_locks_;
  size_t lost_target_locks_ = 0;
  int changes_ = 0;
  // Server-side prepared statements of this connection, by types and SQL.
  absl::flat_hash_map<std::string, std::string> prepared_;
};

// `sql` with SQLite's `?N` (and bare `?`) parameters as `$N`; `*used`
// gets one flag per parameter number up to the highest, true for those the
// SQL names. Quoted text is left alone.
std::string DollarParams(absl::string_view sql, std::vector<bool>* used);

}  // namespace spintune

#endif  // SPINTUNE_STORAGE_PG_DB_H_
