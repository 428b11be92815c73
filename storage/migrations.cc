#include "storage/migrations.h"

#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace spintune {
namespace {

// Index i holds the SQL of migration i + 1. Never edit a shipped entry: add
// a new one at the end. Written for SQLite, run on PostgreSQL through
// SqlDb::Ddl(): columns INTEGER (64-bit), REAL, TEXT or BLOB; `id INTEGER
// PRIMARY KEY` for a generated id; plain CREATE/ALTER/UPDATE/INSERT that
// both engines take (no PRAGMA, no SQLite-only functions).
const std::vector<const char*>& Migrations() {
  static const std::vector<const char*> kMigrations = {
      // 1: the foundation schema.
      R"sql(
CREATE TABLE targets (
  id INTEGER PRIMARY KEY,
  agent_id TEXT NOT NULL UNIQUE,
  board TEXT NOT NULL,
  cpu_model TEXT NOT NULL DEFAULT '',
  kernel_release TEXT NOT NULL DEFAULT '',
  agent_version TEXT NOT NULL DEFAULT '',
  total_samples INTEGER NOT NULL DEFAULT 0,
  total_dispatch_samples INTEGER NOT NULL DEFAULT 0,
  applied_version INTEGER NOT NULL DEFAULT 0,
  applied_error TEXT NOT NULL DEFAULT '',
  first_seen TEXT NOT NULL,
  last_seen TEXT NOT NULL
);
CREATE TABLE cpu_classes (
  target_id INTEGER NOT NULL REFERENCES targets(id) ON DELETE CASCADE,
  name TEXT NOT NULL,
  idx INTEGER NOT NULL,
  cpu_khz INTEGER NOT NULL,
  irq_cpu_ns INTEGER NOT NULL,
  irq_wake_ns INTEGER NOT NULL,
  poll_read_ns INTEGER NOT NULL,
  timer_cpu_ns INTEGER NOT NULL,
  timer_wake_ns INTEGER NOT NULL,
  irq_overhead_cpu_ns INTEGER NOT NULL,
  PRIMARY KEY (target_id, name)
);
CREATE TABLE devices (
  target_id INTEGER NOT NULL REFERENCES targets(id) ON DELETE CASCADE,
  name TEXT NOT NULL,
  idx INTEGER NOT NULL,
  driver TEXT NOT NULL,
  model TEXT NOT NULL,
  default_rules_json TEXT NOT NULL,
  PRIMARY KEY (target_id, name)
);
CREATE TABLE keys (
  id INTEGER PRIMARY KEY,
  target_id INTEGER NOT NULL REFERENCES targets(id) ON DELETE CASCADE,
  cpu_class TEXT NOT NULL,
  device TEXT NOT NULL,
  opcode INTEGER NOT NULL,
  size_class INTEGER NOT NULL,
  UNIQUE (target_id, cpu_class, device, opcode, size_class)
);
CREATE TABLE histograms (
  key_id INTEGER PRIMARY KEY REFERENCES keys(id) ON DELETE CASCADE,
  samples INTEGER NOT NULL,
  errors INTEGER NOT NULL,
  irq_timeouts INTEGER NOT NULL,
  spin_timeouts INTEGER NOT NULL,
  irq_path INTEGER NOT NULL,
  spin_path INTEGER NOT NULL,
  buckets BLOB NOT NULL
);
CREATE TABLE dispatch_stats (
  target_id INTEGER NOT NULL REFERENCES targets(id) ON DELETE CASCADE,
  cpu_class TEXT NOT NULL,
  device TEXT NOT NULL,
  samples INTEGER NOT NULL,
  handler_buckets BLOB NOT NULL,
  wake_buckets BLOB NOT NULL,
  PRIMARY KEY (target_id, cpu_class, device)
);
CREATE TABLE ingested (
  target_id INTEGER NOT NULL REFERENCES targets(id) ON DELETE CASCADE,
  seq INTEGER NOT NULL,
  samples INTEGER NOT NULL,
  dispatch_samples INTEGER NOT NULL,
  received_at TEXT NOT NULL,
  PRIMARY KEY (target_id, seq)
) WITHOUT ROWID;
CREATE TABLE policy_versions (
  target_id INTEGER NOT NULL REFERENCES targets(id) ON DELETE CASCADE,
  version INTEGER NOT NULL,
  created_at TEXT NOT NULL,
  samples INTEGER NOT NULL,
  table_json TEXT NOT NULL,
  PRIMARY KEY (target_id, version)
);
)sql",
      // 2: windowed histograms for drift detection.
      R"sql(
ALTER TABLE keys ADD COLUMN since_window INTEGER NOT NULL DEFAULT 0;
CREATE TABLE histogram_windows (
  key_id INTEGER NOT NULL REFERENCES keys(id) ON DELETE CASCADE,
  window INTEGER NOT NULL,
  samples INTEGER NOT NULL,
  buckets BLOB NOT NULL,
  PRIMARY KEY (key_id, window)
) WITHOUT ROWID;
)sql",
      // 3: what agents' spools dropped during outages.
      R"sql(
ALTER TABLE targets ADD COLUMN dropped_batches INTEGER NOT NULL DEFAULT 0;
ALTER TABLE targets ADD COLUMN dropped_samples INTEGER NOT NULL DEFAULT 0;
)sql",
      // 4: bearer tokens (SHA-256 of the token; the token itself is shown once).
      R"sql(
CREATE TABLE tokens (
  name TEXT PRIMARY KEY,
  sha256 TEXT NOT NULL UNIQUE,
  target TEXT NOT NULL DEFAULT '',
  admin INTEGER NOT NULL,
  created_at TEXT NOT NULL,
  revoked_at TEXT NOT NULL DEFAULT ''
);
)sql",
      // 5: named profiles (docs/profiles.md) and pinned (rolled back) targets.
      R"sql(
CREATE TABLE profiles (
  name TEXT PRIMARY KEY,
  target TEXT NOT NULL,
  source_version INTEGER NOT NULL,
  created_at TEXT NOT NULL,
  note TEXT NOT NULL,
  tool_version TEXT NOT NULL,
  parent TEXT NOT NULL,
  samples INTEGER NOT NULL,
  keys INTEGER NOT NULL,
  profile_json TEXT NOT NULL
);
ALTER TABLE targets ADD COLUMN pinned_version INTEGER NOT NULL DEFAULT 0;
)sql",
      // 6: strict sequences (issue #17): a batch is stored only as the
      // target's last seq + 1; placeholders of dropped batches cover a seq
      // range; a refused batch uses its seq up; resends are checked against
      // the stored fingerprint (NULL: stored before this migration).
      R"sql(
ALTER TABLE ingested ADD COLUMN last_seq INTEGER NOT NULL DEFAULT 0;
UPDATE ingested SET last_seq = seq;
ALTER TABLE ingested ADD COLUMN fingerprint INTEGER;
ALTER TABLE ingested ADD COLUMN refused_code INTEGER NOT NULL DEFAULT 0;
ALTER TABLE ingested ADD COLUMN refused_message TEXT NOT NULL DEFAULT '';
ALTER TABLE targets ADD COLUMN last_seq INTEGER NOT NULL DEFAULT 0;
UPDATE targets SET last_seq = (SELECT COALESCE(MAX(seq), 0) FROM ingested
                               WHERE ingested.target_id = targets.id);
ALTER TABLE targets ADD COLUMN refused_batches INTEGER NOT NULL DEFAULT 0;
ALTER TABLE targets ADD COLUMN refused_samples INTEGER NOT NULL DEFAULT 0;
)sql",
      // 7: ingest stages each batch's delta as one row; Store::Compact folds
      // them into the per-key histograms later, many batches at once.
      R"sql(
CREATE TABLE pending_deltas (
  target_id INTEGER NOT NULL REFERENCES targets(id) ON DELETE CASCADE,
  seq INTEGER NOT NULL,
  window INTEGER NOT NULL,
  staged_at INTEGER NOT NULL,
  delta BLOB NOT NULL,
  PRIMARY KEY (target_id, seq)
) WITHOUT ROWID;
)sql",
      // 8: every push is verified: measured outcomes per (key, version),
      // learnt timer oversleep, verdicts and held (rolled back) keys.
      R"sql(
CREATE TABLE outcomes (
  target_id INTEGER NOT NULL REFERENCES targets(id) ON DELETE CASCADE,
  cpu_class TEXT NOT NULL,
  device TEXT NOT NULL,
  opcode INTEGER NOT NULL,
  size_class INTEGER NOT NULL,
  version INTEGER NOT NULL,
  requests INTEGER NOT NULL,
  cpu_ns_sum REAL NOT NULL,
  latency_ns_sum REAL NOT NULL,
  cpu_ns_sq_sum REAL NOT NULL,
  latency_ns_sq_sum REAL NOT NULL,
  cpu_latency_ns_sum REAL NOT NULL,
  PRIMARY KEY (target_id, cpu_class, device, opcode, size_class, version)
) WITHOUT ROWID;
CREATE TABLE timer_oversleep (
  target_id INTEGER NOT NULL REFERENCES targets(id) ON DELETE CASCADE,
  cpu_class TEXT NOT NULL,
  samples INTEGER NOT NULL,
  buckets BLOB NOT NULL,
  PRIMARY KEY (target_id, cpu_class)
) WITHOUT ROWID;
CREATE TABLE verifications (
  target_id INTEGER NOT NULL REFERENCES targets(id) ON DELETE CASCADE,
  version INTEGER NOT NULL,
  cpu_class TEXT NOT NULL,
  device TEXT NOT NULL,
  opcode INTEGER NOT NULL,
  size_class INTEGER NOT NULL,
  verdict TEXT NOT NULL,
  predicted_cost_ns REAL NOT NULL,
  measured_cost_ns REAL NOT NULL,
  measured_low_ns REAL NOT NULL,
  measured_high_ns REAL NOT NULL,
  requests INTEGER NOT NULL,
  incumbent_version INTEGER NOT NULL,
  incumbent_cost_ns REAL NOT NULL,
  incumbent_low_ns REAL NOT NULL,
  incumbent_high_ns REAL NOT NULL,
  rollback_version INTEGER NOT NULL,
  reason TEXT NOT NULL,
  decided_at TEXT NOT NULL,
  PRIMARY KEY (target_id, version, cpu_class, device, opcode, size_class)
) WITHOUT ROWID;
CREATE TABLE held_keys (
  target_id INTEGER NOT NULL REFERENCES targets(id) ON DELETE CASCADE,
  cpu_class TEXT NOT NULL,
  device TEXT NOT NULL,
  opcode INTEGER NOT NULL,
  size_class INTEGER NOT NULL,
  strategy INTEGER NOT NULL,
  spin_ns INTEGER NOT NULL,
  sleep_ns INTEGER NOT NULL,
  poll_interval_ns INTEGER NOT NULL,
  samples_at_hold INTEGER NOT NULL,
  PRIMARY KEY (target_id, cpu_class, device, opcode, size_class)
) WITHOUT ROWID;
)sql",
      // 9: knob experiments (issue 13, docs/knobs.md): each experiment with
      // its declaration and conclusion, its trials, and the knob settings in
      // force per target.
      R"sql(
CREATE TABLE experiments (
  id INTEGER PRIMARY KEY,
  target_id INTEGER NOT NULL REFERENCES targets(id) ON DELETE CASCADE,
  name TEXT NOT NULL,
  fingerprint INTEGER NOT NULL,
  space_json TEXT NOT NULL,
  start_json TEXT NOT NULL,
  metric TEXT NOT NULL,
  metric_unit TEXT NOT NULL,
  lower_is_better INTEGER NOT NULL,
  constraints TEXT NOT NULL,
  workload TEXT NOT NULL,
  max_trials INTEGER NOT NULL,
  apply_winner INTEGER NOT NULL,
  seed INTEGER NOT NULL,
  state TEXT NOT NULL,
  abort_requested INTEGER NOT NULL DEFAULT 0,
  verdict TEXT NOT NULL DEFAULT '',
  best_json TEXT NOT NULL DEFAULT '[]',
  applied_json TEXT NOT NULL DEFAULT '[]',
  ratio REAL NOT NULL DEFAULT 0,
  ci_low REAL NOT NULL DEFAULT 0,
  ci_high REAL NOT NULL DEFAULT 0,
  confidence REAL NOT NULL DEFAULT 0.95,
  trials INTEGER NOT NULL DEFAULT 0,
  statement TEXT NOT NULL DEFAULT '',
  created_at TEXT NOT NULL,
  finished_at TEXT NOT NULL DEFAULT '',
  end_result TEXT NOT NULL DEFAULT ''
);
CREATE INDEX experiments_by_target ON experiments(target_id, name);
CREATE TABLE knob_trials (
  experiment_id INTEGER NOT NULL REFERENCES experiments(id) ON DELETE CASCADE,
  trial INTEGER NOT NULL,
  phase TEXT NOT NULL,
  setting_json TEXT NOT NULL,
  metric REAL NOT NULL,
  metrics_json TEXT NOT NULL,
  feasible INTEGER NOT NULL,
  error TEXT NOT NULL,
  duration_ns INTEGER NOT NULL,
  measured_at TEXT NOT NULL,
  PRIMARY KEY (experiment_id, trial)
) WITHOUT ROWID;
CREATE TABLE knob_settings (
  target_id INTEGER NOT NULL REFERENCES targets(id) ON DELETE CASCADE,
  declaration TEXT NOT NULL,
  coordinate TEXT NOT NULL,
  idx INTEGER NOT NULL,
  value INTEGER NOT NULL,
  label TEXT NOT NULL,
  register_name TEXT NOT NULL,
  shift INTEGER NOT NULL,
  width INTEGER NOT NULL,
  experiment_id INTEGER NOT NULL,
  evidence TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  PRIMARY KEY (target_id, declaration, coordinate)
) WITHOUT ROWID;
)sql",
      // 10: A/B verification (docs/verification.md): outcomes per arm of a
      // trial (0: the table's wait, 1: the incumbent's) with the sample
      // windows they were stored in; how each verdict was reached.
      R"sql(
CREATE TABLE outcomes_v10 (
  target_id INTEGER NOT NULL REFERENCES targets(id) ON DELETE CASCADE,
  cpu_class TEXT NOT NULL,
  device TEXT NOT NULL,
  opcode INTEGER NOT NULL,
  size_class INTEGER NOT NULL,
  version INTEGER NOT NULL,
  arm INTEGER NOT NULL,
  requests INTEGER NOT NULL,
  cpu_ns_sum REAL NOT NULL,
  latency_ns_sum REAL NOT NULL,
  cpu_ns_sq_sum REAL NOT NULL,
  latency_ns_sq_sum REAL NOT NULL,
  cpu_latency_ns_sum REAL NOT NULL,
  first_window INTEGER NOT NULL,
  last_window INTEGER NOT NULL,
  PRIMARY KEY (target_id, cpu_class, device, opcode, size_class, version, arm)
) WITHOUT ROWID;
INSERT INTO outcomes_v10 SELECT target_id, cpu_class, device, opcode, size_class, version, 0,
  requests, cpu_ns_sum, latency_ns_sum, cpu_ns_sq_sum, latency_ns_sq_sum, cpu_latency_ns_sum,
  0, 0 FROM outcomes;
DROP TABLE outcomes;
ALTER TABLE outcomes_v10 RENAME TO outcomes;
ALTER TABLE verifications ADD COLUMN method TEXT NOT NULL DEFAULT 'before_after';
)sql",
      // 11: the highest policy blob format the target's drivers read, from
      // its agent's Hello (0: not said); A/B trials need 3.
      R"sql(
ALTER TABLE targets ADD COLUMN max_blob_format INTEGER NOT NULL DEFAULT 0;
)sql",
      // 12: fingerprints of version 2 (of a batch's bytes as received, not
      // of its serialization again); rows stored before keep version 1.
      R"sql(
ALTER TABLE ingested ADD COLUMN fingerprint_version INTEGER NOT NULL DEFAULT 1;
)sql",
      // 13: staged deltas in arrival order (a rowid table, the target's
      // seqs in an index of small entries): an ingest commit appends its
      // batches' rows instead of writing one into a tree keyed by target,
      // where thousands of targets put each row on a page of its own.
      R"sql(
CREATE TABLE pending_deltas_v13 (
  id INTEGER PRIMARY KEY,
  target_id INTEGER NOT NULL REFERENCES targets(id) ON DELETE CASCADE,
  seq INTEGER NOT NULL,
  window INTEGER NOT NULL,
  staged_at INTEGER NOT NULL,
  delta BLOB NOT NULL
);
INSERT INTO pending_deltas_v13(target_id, seq, window, staged_at, delta)
  SELECT target_id, seq, window, staged_at, delta FROM pending_deltas
  ORDER BY staged_at, target_id, seq;
DROP TABLE pending_deltas;
ALTER TABLE pending_deltas_v13 RENAME TO pending_deltas;
CREATE INDEX pending_deltas_target ON pending_deltas(target_id, seq, staged_at);
)sql",
      // 14: the latest window of the evidence that detected a key's last
      // change (-1: none), so that the same change found again later (a
      // window straddled it) is not counted as a new one.
      R"sql(
ALTER TABLE keys ADD COLUMN changed_through INTEGER NOT NULL DEFAULT -1;
)sql",
  };
  return kMigrations;
}

}  // namespace

int LatestSchemaVersion() { return static_cast<int>(Migrations().size()); }

absl::StatusOr<int> SchemaVersion(SqlDb* db) {
  SPINTUNE_ASSIGN_OR_RETURN(bool has_table, db->HasTable("schema_version"));
  if (!has_table) return 0;
  SPINTUNE_ASSIGN_OR_RETURN(auto stmt, db->Prepare("SELECT MAX(version) FROM schema_version"));
  SPINTUNE_ASSIGN_OR_RETURN(bool row, stmt->Step());
  if (!row || stmt->ColumnIsNull(0)) return 0;
  return static_cast<int>(stmt->ColumnInt(0));
}

absl::Status CheckSpintuneDatabase(SqlDb* db, bool may_migrate) {
  absl::StatusOr<int> version = SchemaVersion(db);
  if (!version.ok() || *version == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(db->name(), " is not a spintune database",
                     version.ok() ? std::string()
                                  : absl::StrCat(" (unreadable: ", version.status().message(),
                                                 ")")));
  }
  const int current = *version;
  if (current > LatestSchemaVersion()) {
    return absl::FailedPreconditionError(absl::StrCat(
        db->name(), ": schema version ", current, " is newer than this spintune (",
        LatestSchemaVersion(), "); upgrade spintune"));
  }
  if (current < LatestSchemaVersion() && !may_migrate) {
    return absl::FailedPreconditionError(absl::StrCat(
        db->name(), ": schema version ", current, " is older than this spintune (",
        LatestSchemaVersion(), "); start spintune-tuner on it once to upgrade it"));
  }
  return absl::OkStatus();
}

absl::Status MigrateToLatest(SqlDb* db) {
  SPINTUNE_RETURN_IF_ERROR(db->LockSchema());
  absl::Cleanup unlock = [db] { db->UnlockSchema(); };
  SPINTUNE_ASSIGN_OR_RETURN(int current, SchemaVersion(db));
  if (current > LatestSchemaVersion()) {
    return absl::FailedPreconditionError(absl::StrCat(
        db->name(), ": schema version ", current, " is newer than this spintune (",
        LatestSchemaVersion(), "); upgrade spintune"));
  }
  for (int v = current + 1; v <= LatestSchemaVersion(); ++v) {
    Transaction tx(db);
    SPINTUNE_RETURN_IF_ERROR(tx.Begin());
    // In the step's own transaction: a process killed before its first
    // step commits leaves a database with no table at all, which the next
    // start creates again, not one with an empty schema_version that no
    // start would take for a spintune database.
    SPINTUNE_RETURN_IF_ERROR(
        db->Exec(db->Ddl("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")));
    SPINTUNE_RETURN_IF_ERROR(db->Exec(db->Ddl(Migrations()[v - 1])));
    SPINTUNE_RETURN_IF_ERROR(
        db->Exec(absl::StrCat("INSERT INTO schema_version(version) VALUES (", v, ")")));
    SPINTUNE_RETURN_IF_ERROR(tx.Commit());
  }
  return absl::OkStatus();
}

}  // namespace spintune
