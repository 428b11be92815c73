#include "storage/sql_db.h"

#include "absl/strings/match.h"
#include "common/status_macros.h"
#include "storage/pg_db.h"
#include "storage/sqlite_db.h"

namespace spintune {

absl::Status Statement::Run() {
  auto row = Step();
  Reset();
  if (!row.ok()) return row.status();
  return absl::OkStatus();
}

absl::StatusOr<Statement*> SqlDb::Cached(absl::string_view sql) {
  auto it = cached_.find(sql);
  if (it == cached_.end()) {
    SPINTUNE_ASSIGN_OR_RETURN(auto stmt, Prepare(sql));
    it = cached_.emplace(std::string(sql), std::move(stmt)).first;
  } else {
    it->second->Reset();
  }
  return it->second.get();
}

absl::Status SqlDb::RunCached(absl::string_view sql) {
  SPINTUNE_ASSIGN_OR_RETURN(Statement * stmt, Cached(sql));
  return stmt->Run();
}

void SqlDb::ResetCached() {
  for (auto& [sql, stmt] : cached_) stmt->Reset();
}

Transaction::~Transaction() {
  if (open_) db_->Rollback();
}

absl::Status Transaction::Begin() {
  absl::Status s = sync_ == CommitSync::kSynced ? db_->Begin() : db_->BeginDeferredSync();
  open_ = s.ok();
  return s;
}

absl::Status Transaction::Commit() {
  absl::Status s = db_->Commit();
  if (s.ok()) open_ = false;
  return s;
}

absl::Status ReadSnapshot::Begin() {
  absl::StatusOr<bool> begun = db_->BeginSnapshot();
  if (!begun.ok()) return begun.status();
  open_ = *begun;
  return absl::OkStatus();
}

absl::StatusOr<DbSpec> ParseDbSpec(const std::string& value) {
  DbSpec spec;
  if (absl::StartsWith(value, "postgresql://") || absl::StartsWith(value, "postgres://")) {
    spec.postgres = true;
    spec.target = value;
  } else if (absl::StartsWith(value, "sqlite:")) {
    spec.target = value.substr(7);
  } else {
    spec.target = value;
  }
  if (spec.target.empty()) {
    return absl::InvalidArgumentError(
        "--db: empty (a file, sqlite:PATH or postgresql://USER@HOST/DATABASE)");
  }
  return spec;
}

absl::StatusOr<std::unique_ptr<SqlDb>> OpenSqlDb(const std::string& value, OpenMode mode) {
  SPINTUNE_ASSIGN_OR_RETURN(DbSpec spec, ParseDbSpec(value));
  if (spec.postgres) {
    SPINTUNE_ASSIGN_OR_RETURN(auto db, PgDb::Open(spec.target, mode));
    return std::unique_ptr<SqlDb>(std::move(db));
  }
  SPINTUNE_ASSIGN_OR_RETURN(auto db, SqliteDb::Open(spec.target, 0, mode));
  return std::unique_ptr<SqlDb>(std::move(db));
}

}  // namespace spintune
