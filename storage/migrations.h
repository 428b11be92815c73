// Schema migrations of the spintune database (storage/SCHEMA.md).
//
// Migration N turns schema version N-1 into N; the runner applies every
// missing one in its own transaction and records the version in
// schema_version. A database newer than this binary is refused. One list
// serves both backends: each step is written for SQLite and translated by
// the backend (SqlDb::Ddl; PostgreSQL: storage/pg_db.cc). A new step is
// appended to the list in migrations.cc.
#ifndef SPINTUNE_STORAGE_MIGRATIONS_H_
#define SPINTUNE_STORAGE_MIGRATIONS_H_

#include "absl/status/status.h"
#include "storage/sql_db.h"

namespace spintune {

// Highest schema version this binary knows.
int LatestSchemaVersion();

// Brings `db` to LatestSchemaVersion(). FailedPrecondition when the database
// was written by a newer spintune.
absl::Status MigrateToLatest(SqlDb* db);

// InvalidArgument unless `db` is a spintune database (it has a schema
// version); FailedPrecondition unless this binary reads its schema as it is:
// not older (a read-only open cannot migrate it) unless `may_migrate`, not
// newer.
absl::Status CheckSpintuneDatabase(SqlDb* db, bool may_migrate);

// The version recorded in `db` (0 for an empty database).
absl::StatusOr<int> SchemaVersion(SqlDb* db);

}  // namespace spintune

#endif  // SPINTUNE_STORAGE_MIGRATIONS_H_
