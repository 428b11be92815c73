// Store: opening the database, targets and ingest (storage/store.h).
#include "storage/store.h"

#include <sys/stat.h>

#include <map>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "policy/policy_json.h"
#include "storage/delta_codec.h"
#include "storage/migrations.h"
#include "storage/pg_db.h"
#include "storage/sqlite_db.h"
#include "storage/store_rows.h"

namespace spintune {

std::string store_rows::Upsert(absl::string_view table,
                               std::initializer_list<absl::string_view> columns,
                               size_t key_columns) {
  std::string names, values, key, update;
  size_t i = 0;
  for (absl::string_view c : columns) {
    const char* sep = i == 0 ? "" : ", ";
    absl::StrAppend(&names, sep, c);
    absl::StrAppend(&values, sep, "?", i + 1);
    if (i < key_columns) {
      absl::StrAppend(&key, sep, c);
    } else {
      absl::StrAppend(&update, update.empty() ? "" : ", ", c, " = excluded.", c);
    }
    ++i;
  }
  return absl::StrCat("INSERT INTO ", table, "(", names, ") VALUES (", values, ") ON CONFLICT (",
                      key, ") DO UPDATE SET ", update);
}

namespace {

using store_rows::I;
using store_rows::U;

}  // namespace

std::string Rfc3339(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", t, absl::UTCTimeZone());
}

std::string NowRfc3339() { return Rfc3339(absl::Now()); }

absl::StatusOr<std::unique_ptr<Store>> Store::Open(const std::string& db_spec,
                                                   const StoreOptions& options, OpenMode mode) {
  if (options.window_samples == 0 || options.keep_windows == 0) {
    return absl::InvalidArgumentError("window_samples and keep_windows must be > 0");
  }
  SPINTUNE_ASSIGN_OR_RETURN(DbSpec spec, ParseDbSpec(db_spec));
  std::unique_ptr<SqlDb> db;
  if (spec.postgres) {
    SPINTUNE_ASSIGN_OR_RETURN(db, PgDb::Open(spec.target, mode));
    SPINTUNE_ASSIGN_OR_RETURN(bool empty, db->IsEmpty());
    if (empty && mode != OpenMode::kCreate) {
      return absl::NotFoundError(absl::StrCat("no spintune database in ", db->name(),
                                              " (the tuner creates it: spintune-tuner --db ",
                                              db->name(), ")"));
    }
    if (!empty) {
      SPINTUNE_RETURN_IF_ERROR(CheckSpintuneDatabase(db.get(), mode != OpenMode::kReadOnly));
    }
  } else {
    const std::string& path = spec.target;
    struct stat st;
    const bool exists = path != ":memory:" && stat(path.c_str(), &st) == 0 && st.st_size > 0;
    if (mode != OpenMode::kCreate || exists) {
      // Checked before anything is written to it (switching a file to WAL
      // mode is a write): a file of another program is never converted.
      // One with no table at all is created like a new file: what a start
      // killed before its schema's first step committed leaves (the WAL
      // switch wrote its header), or an empty database, with nothing to lose.
      SPINTUNE_ASSIGN_OR_RETURN(auto reader, SqliteDb::Open(path, 0, OpenMode::kReadOnly));
      // (A file that is no SQLite database at all fails IsEmpty: the check
      // below says what it is.)
      const absl::StatusOr<bool> no_table =
          mode == OpenMode::kCreate ? reader->IsEmpty() : absl::StatusOr<bool>(false);
      if (!(no_table.ok() && *no_table)) {
        SPINTUNE_RETURN_IF_ERROR(CheckSpintuneDatabase(reader.get(), mode != OpenMode::kReadOnly));
      }
    }
    SPINTUNE_ASSIGN_OR_RETURN(db, SqliteDb::Open(path, options.reserve_bytes, mode));
  }
  if (mode != OpenMode::kReadOnly) SPINTUNE_RETURN_IF_ERROR(MigrateToLatest(db.get()));
  db->SetCommitCheckpoints(options.commit_checkpoints);
  if (options.write_gate) db->SetWriteGate(options.write_gate, options.write_priority);
  return std::unique_ptr<Store>(new Store(std::move(db), options));
}

absl::StatusOr<int64_t> Store::UpsertTarget(const TargetRecord& r) {
  absl::MutexLock lock(&mu_);
  // Committed without a sync of its own. A target's description need not
  // be durable when its Hello is answered: every batch acknowledged later
  // is committed with a sync of the same log, which carries this commit
  // before it, and the agent's next Hello writes the description again. A
  // fleet reconnecting to a restarted tuner would otherwise wait for one
  // sync per agent in a row. (Its statements are cached: parsing them
  // again for every Hello was a third of the tuner's time in one.)
  Transaction tx(db_.get(), CommitSync::kDeferred);
  absl::Cleanup reset = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { db_->ResetCached(); };
  SPINTUNE_RETURN_IF_ERROR(tx.Begin());
  const std::string now = NowRfc3339();
  SPINTUNE_ASSIGN_OR_RETURN(
      auto upsert,
      db_->Cached("INSERT INTO targets(agent_id, board, cpu_model, kernel_release, "
                   "agent_version, first_seen, last_seen, max_blob_format) VALUES (?1, ?2, ?3, "
                   "?4, ?5, ?6, ?6, ?7) ON CONFLICT(agent_id) DO UPDATE SET board = ?2, "
                   "cpu_model = ?3, kernel_release = ?4, agent_version = ?5, last_seen = ?6, "
                   "max_blob_format = ?7"));
  upsert->Bind(1, r.agent_id).Bind(2, r.board).Bind(3, r.cpu_model).Bind(4, r.kernel_release);
  upsert->Bind(5, r.agent_version).Bind(6, now).Bind(7, I(r.max_blob_format));
  SPINTUNE_RETURN_IF_ERROR(upsert->Run());
  SPINTUNE_ASSIGN_OR_RETURN(auto find, db_->Cached("SELECT id FROM targets WHERE agent_id = ?1"));
  find->Bind(1, r.agent_id);
  SPINTUNE_ASSIGN_OR_RETURN(bool found, find->Step());
  if (!found) return absl::InternalError("target vanished during upsert");
  const int64_t id = find->ColumnInt(0);
  find->Reset();

  for (const char* table : {"cpu_classes", "devices"}) {
    SPINTUNE_ASSIGN_OR_RETURN(
        auto clear, db_->Cached(absl::StrCat("DELETE FROM ", table, " WHERE target_id = ?1")));
    SPINTUNE_RETURN_IF_ERROR(clear->Bind(1, id).Run());
  }
  SPINTUNE_ASSIGN_OR_RETURN(
      auto cls, db_->Cached("INSERT INTO cpu_classes VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, "
                            "?9, ?10)"));
  for (size_t i = 0; i < r.cpu_classes.size(); ++i) {
    const auto& c = r.cpu_classes[i];
    cls->Bind(1, id).Bind(2, c.name).Bind(3, I(i)).Bind(4, I(c.cpu_khz));
    cls->Bind(5, static_cast<int64_t>(c.declared.irq_cpu_ns));
    cls->Bind(6, static_cast<int64_t>(c.declared.irq_wake_ns));
    cls->Bind(7, static_cast<int64_t>(c.declared.poll_read_ns));
    cls->Bind(8, static_cast<int64_t>(c.declared.timer_cpu_ns));
    cls->Bind(9, static_cast<int64_t>(c.declared.timer_wake_ns));
    cls->Bind(10, static_cast<int64_t>(c.irq_overhead_cpu_ns));
    SPINTUNE_RETURN_IF_ERROR(cls->Run());
  }
  SPINTUNE_ASSIGN_OR_RETURN(auto dev,
                            db_->Cached("INSERT INTO devices VALUES (?1, ?2, ?3, ?4, ?5, ?6)"));
  for (size_t i = 0; i < r.devices.size(); ++i) {
    const auto& d = r.devices[i];
    dev->Bind(1, id).Bind(2, d.name).Bind(3, I(i)).Bind(4, d.driver).Bind(5, d.model);
    dev->Bind(6, DefaultRulesToJson(d.default_rules).dump());
    SPINTUNE_RETURN_IF_ERROR(dev->Run());
  }
  SPINTUNE_RETURN_IF_ERROR(tx.Commit());
  return id;
}

absl::StatusOr<std::vector<TargetSummary>> Store::QueryTargets(const std::string& where,
                                                               const std::string& arg) {
  SPINTUNE_ASSIGN_OR_RETURN(
      auto q,
      db_->Prepare(absl::StrCat(
          "SELECT t.id, t.agent_id, t.board, t.cpu_model, t.total_samples, "
          "t.total_dispatch_samples, COALESCE((SELECT MAX(version) FROM policy_versions p "
          "WHERE p.target_id = t.id), 0), t.applied_version, t.applied_error, t.last_seen, "
          "t.dropped_samples, t.pinned_version, t.refused_samples, t.last_seq "
          "FROM targets t ",
          where, " ORDER BY t.agent_id")));
  if (!arg.empty()) q->Bind(1, arg);
  std::vector<TargetSummary> out;
  while (true) {
    SPINTUNE_ASSIGN_OR_RETURN(bool row, q->Step());
    if (!row) break;
    TargetSummary s;
    s.id = q->ColumnInt(0);
    s.agent_id = q->ColumnText(1);
    s.board = q->ColumnText(2);
    s.cpu_model = q->ColumnText(3);
    s.total_samples = U(q->ColumnInt(4));
    s.total_dispatch_samples = U(q->ColumnInt(5));
    s.current_version = U(q->ColumnInt(6));
    s.applied_version = U(q->ColumnInt(7));
    s.applied_error = q->ColumnText(8);
    s.last_seen = q->ColumnText(9);
    s.dropped_samples = U(q->ColumnInt(10));
    s.pinned_version = U(q->ColumnInt(11));
    s.refused_samples = U(q->ColumnInt(12));
    s.last_seq = U(q->ColumnInt(13));
    out.push_back(std::move(s));
  }
  return out;
}

absl::StatusOr<std::optional<TargetSummary>> Store::FindTarget(const std::string& agent_id) {
  absl::MutexLock lock(&mu_);
  SPINTUNE_ASSIGN_OR_RETURN(auto rows, QueryTargets("WHERE t.agent_id = ?1", agent_id));
  if (rows.empty()) return std::optional<TargetSummary>();
  return std::optional<TargetSummary>(rows[0]);
}

absl::StatusOr<std::vector<TargetSummary>> Store::ListTargets() {
  absl::MutexLock lock(&mu_);
  return QueryTargets("", "");
}

absl::StatusOr<TargetRecord> Store::LoadTarget(int64_t target_id) {
  absl::MutexLock lock(&mu_);
  ReadSnapshot snapshot(db_.get());  // the target's row, CPU classes and devices of one Hello
  SPINTUNE_RETURN_IF_ERROR(snapshot.Begin());
  TargetRecord r;
  SPINTUNE_ASSIGN_OR_RETURN(
      auto t, db_->Prepare("SELECT agent_id, board, cpu_model, kernel_release, agent_version, "
                           "max_blob_format FROM targets WHERE id = ?1"));
  t->Bind(1, target_id);
  SPINTUNE_ASSIGN_OR_RETURN(bool found, t->Step());
  if (!found) return absl::NotFoundError(absl::StrCat("no target with id ", target_id));
  r.agent_id = t->ColumnText(0);
  r.board = t->ColumnText(1);
  r.cpu_model = t->ColumnText(2);
  r.kernel_release = t->ColumnText(3);
  r.agent_version = t->ColumnText(4);
  r.max_blob_format = static_cast<uint32_t>(t->ColumnInt(5));
  SPINTUNE_ASSIGN_OR_RETURN(
      auto c, db_->Prepare("SELECT name, cpu_khz, irq_cpu_ns, irq_wake_ns, poll_read_ns, "
                           "timer_cpu_ns, timer_wake_ns, irq_overhead_cpu_ns FROM cpu_classes "
                           "WHERE target_id = ?1 ORDER BY idx"));
  c->Bind(1, target_id);
  while (true) {
    SPINTUNE_ASSIGN_OR_RETURN(bool row, c->Step());
    if (!row) break;
    CpuClassRecord cr;
    cr.name = c->ColumnText(0);
    cr.cpu_khz = U(c->ColumnInt(1));
    cr.declared = {static_cast<double>(c->ColumnInt(2)), static_cast<double>(c->ColumnInt(3)),
                   static_cast<double>(c->ColumnInt(4)), static_cast<double>(c->ColumnInt(5)),
                   static_cast<double>(c->ColumnInt(6))};
    cr.irq_overhead_cpu_ns = static_cast<double>(c->ColumnInt(7));
    r.cpu_classes.push_back(std::move(cr));
  }
  SPINTUNE_ASSIGN_OR_RETURN(
      auto d, db_->Prepare("SELECT name, driver, model, default_rules_json FROM devices "
                           "WHERE target_id = ?1 ORDER BY idx"));
  d->Bind(1, target_id);
  while (true) {
    SPINTUNE_ASSIGN_OR_RETURN(bool row, d->Step());
    if (!row) break;
    DeviceInfo info;
    info.name = d->ColumnText(0);
    info.driver = d->ColumnText(1);
    info.model = d->ColumnText(2);
    auto rules_json = nlohmann::json::parse(d->ColumnText(3), nullptr, false);
    SPINTUNE_ASSIGN_OR_RETURN(info.default_rules,
                              DefaultRulesFromJson(rules_json, "devices.default_rules_json"));
    r.devices.push_back(std::move(info));
  }
  return r;
}

absl::StatusOr<uint64_t> Store::LastDurableSeq(int64_t target_id) {
  absl::MutexLock lock(&mu_);
  SPINTUNE_ASSIGN_OR_RETURN(auto q, db_->Cached("SELECT last_seq FROM targets WHERE id = ?1"));
  absl::Cleanup done = [q] { q->Reset(); };
  q->Bind(1, target_id);
  SPINTUNE_ASSIGN_OR_RETURN(bool row, q->Step());
  return row ? U(q->ColumnInt(0)) : 0;
}

absl::StatusOr<bool> Store::IngestBatch(int64_t target_id, const BatchDelta& batch) {
  SequencedBatch b;
  b.target_id = target_id;
  b.seq = b.last_seq = batch.seq;
  b.delta = &batch;
  SPINTUNE_ASSIGN_OR_RETURN(auto results, IngestBatches({b}));
  switch (results[0].outcome) {
    case IngestOutcome::kStored:
      return true;
    case IngestOutcome::kDuplicate:
      return false;
    case IngestOutcome::kConflict:
      return absl::FailedPreconditionError(absl::StrCat("seq ", batch.seq, " conflicts"));
    case IngestOutcome::kOutOfOrder:
      break;
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "seq ", batch.seq, " does not follow the last durable seq ", results[0].last_seq));
}

absl::StatusOr<std::vector<IngestResult>> Store::IngestBatches(
    const std::vector<SequencedBatch>& batches) {
  absl::MutexLock lock(&mu_);
  Transaction tx(db_.get());
  // Whatever happens (before the rollback, if any), no cached statement
  // keeps a snapshot open afterwards.
  absl::Cleanup reset = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { db_->ResetCached(); };
  SPINTUNE_RETURN_IF_ERROR(tx.Begin());
  SPINTUNE_ASSIGN_OR_RETURN(
      auto target, db_->Cached(absl::StrCat(
                       "SELECT total_samples, last_seq FROM targets WHERE id = ?1",
                       db_->ForUpdate())));
  SPINTUNE_ASSIGN_OR_RETURN(
      auto earlier, db_->Cached("SELECT fingerprint, refused_code, refused_message, "
                                 "fingerprint_version FROM ingested WHERE target_id = ?1 AND "
                                 "seq = ?2"));
  SPINTUNE_ASSIGN_OR_RETURN(
      auto oldest, db_->Cached("SELECT MIN(seq) FROM ingested WHERE target_id = ?1"));
  SPINTUNE_ASSIGN_OR_RETURN(
      auto mark, db_->Cached(absl::StrCat(
                     "INSERT INTO ingested(target_id, seq, samples, dispatch_samples, "
                     "received_at, last_seq, fingerprint, refused_code, refused_message, "
                     "fingerprint_version) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ",
                     kFingerprintVersion, ")")));
  SPINTUNE_ASSIGN_OR_RETURN(
      auto totals, db_->Cached("UPDATE targets SET total_samples = total_samples + ?2, "
                                "total_dispatch_samples = total_dispatch_samples + ?3, "
                                "dropped_batches = dropped_batches + ?4, "
                                "dropped_samples = dropped_samples + ?5, "
                                "refused_batches = refused_batches + ?6, "
                                "refused_samples = refused_samples + ?7, "
                                "last_seq = ?8, last_seen = ?9 WHERE id = ?1"));
  SPINTUNE_ASSIGN_OR_RETURN(
      auto stage, db_->Cached("INSERT INTO pending_deltas(target_id, seq, \"window\", staged_at, "
                              "delta) VALUES (?1, ?2, ?3, ?4, ?5)"));
  const std::string now = NowRfc3339();
  const int64_t staged_at = absl::ToUnixSeconds(absl::Now());
  struct TargetState {
    uint64_t total_samples;
    uint64_t last_seq;
  };
  std::map<int64_t, TargetState> state;  // as this transaction leaves them
  std::vector<IngestResult> out;
  for (const SequencedBatch& b : batches) {
    auto st = state.find(b.target_id);
    if (st == state.end()) {
      target->Reset();
      target->Bind(1, b.target_id);
      SPINTUNE_ASSIGN_OR_RETURN(bool found, target->Step());
      if (!found) return absl::NotFoundError(absl::StrCat("no target with id ", b.target_id));
      st = state.emplace(b.target_id, TargetState{U(target->ColumnInt(0)),
                                                  U(target->ColumnInt(1))}).first;
    }
    IngestResult r;
    r.last_seq = st->second.last_seq;
    if (b.seq == 0 || b.last_seq < b.seq) {
      return absl::InvalidArgumentError(absl::StrCat("bad seq range ", b.seq, "..", b.last_seq));
    }
    if (b.seq <= st->second.last_seq) {
      // A resend: the same content, or a conflict.
      earlier->Reset();
      earlier->Bind(1, b.target_id).Bind(2, I(b.seq));
      SPINTUNE_ASSIGN_OR_RETURN(bool found, earlier->Step());
      // Take the resend's word when the stored fingerprint or the one of
      // its version is missing (before migration 6 none was kept), or when
      // its row was pruned (PruneLedger: below the target's oldest row).
      bool same = found;
      if (found && !earlier->ColumnIsNull(0)) {
        const uint64_t stored = static_cast<uint64_t>(earlier->ColumnInt(0));
        const uint64_t resent =
            earlier->ColumnInt(3) == kFingerprintVersion ? b.fingerprint : b.legacy_fingerprint;
        same = resent == 0 || resent == stored;
      } else if (!found) {
        oldest->Reset();
        oldest->Bind(1, b.target_id);
        SPINTUNE_ASSIGN_OR_RETURN(bool any, oldest->Step());
        same = !any || oldest->ColumnIsNull(0) || b.seq < U(oldest->ColumnInt(0));
      }
      r.outcome = same ? IngestOutcome::kDuplicate : IngestOutcome::kConflict;
      if (same && found && earlier->ColumnInt(1) != 0) {
        r.refusal = absl::Status(static_cast<absl::StatusCode>(earlier->ColumnInt(1)),
                                 earlier->ColumnText(2));
      }
      out.push_back(std::move(r));
      continue;
    }
    if (b.seq != st->second.last_seq + 1) {
      r.outcome = IngestOutcome::kOutOfOrder;
      out.push_back(std::move(r));
      continue;
    }
    const bool store_delta = b.refusal.ok() && !b.dropped && b.delta != nullptr;
    mark->Reset();
    mark->Bind(1, b.target_id).Bind(2, I(b.seq));
    mark->Bind(3, I(store_delta ? b.delta->completion_samples : 0));
    mark->Bind(4, I(store_delta ? b.delta->dispatch_samples : 0)).Bind(5, now);
    mark->Bind(6, I(b.last_seq)).Bind(7, static_cast<int64_t>(b.fingerprint));
    mark->Bind(8, static_cast<int64_t>(b.refusal.code()));
    mark->Bind(9, std::string(b.refusal.message()));
    SPINTUNE_RETURN_IF_ERROR(mark->Run());
    uint64_t samples = 0, dispatch_samples = 0;
    if (store_delta) {
      // One row per batch; Compact() folds it into the histograms later.
      stage->Reset();
      stage->Bind(1, b.target_id).Bind(2, I(b.seq));
      stage->Bind(3, I(st->second.total_samples / options_.window_samples));
      stage->Bind(4, staged_at);
      if (b.encoded_delta != nullptr) {
        stage->BindBlob(5, *b.encoded_delta);
      } else {
        stage->BindBlob(5, EncodeBatchDelta(*b.delta));
      }
      SPINTUNE_RETURN_IF_ERROR(stage->Run());
      samples = b.delta->completion_samples;
      dispatch_samples = b.delta->dispatch_samples;
    }
    totals->Reset();
    totals->Bind(1, b.target_id).Bind(2, I(samples)).Bind(3, I(dispatch_samples));
    totals->Bind(4, I(b.dropped ? b.last_seq - b.seq + 1 : 0));
    totals->Bind(5, I(b.dropped ? b.dropped_samples : 0));
    totals->Bind(6, I(b.refusal.ok() ? 0 : 1)).Bind(7, I(b.refusal.ok() ? 0 : b.refused_samples));
    totals->Bind(8, I(b.last_seq)).Bind(9, now);
    SPINTUNE_RETURN_IF_ERROR(totals->Run());
    st->second.total_samples += samples;
    st->second.last_seq = b.last_seq;
    r.last_seq = b.last_seq;
    r.refusal = b.refusal;
    out.push_back(std::move(r));
  }
  db_->ResetCached();
  SPINTUNE_RETURN_IF_ERROR(tx.Commit());
  return out;
}

absl::StatusOr<LedgerPrune> Store::PruneLedger(absl::Time cutoff, uint64_t max_rows,
                                               int64_t from_target) {
  if (max_rows == 0) return absl::InvalidArgumentError("max_rows must be > 0");
  absl::MutexLock lock(&mu_);
  // Without a sync of its own: a prune lost to a power cut is done again.
  Transaction tx(db_.get(), CommitSync::kDeferred);
  SPINTUNE_RETURN_IF_ERROR(tx.Begin());
  SPINTUNE_ASSIGN_OR_RETURN(
      auto targets,
      db_->Prepare("SELECT id, last_seq FROM targets WHERE id >= ?1 ORDER BY id LIMIT ?2"));
  targets->Bind(1, from_target).Bind(2, I(max_rows));
  std::vector<std::pair<int64_t, uint64_t>> visit;  // (target, its resume point)
  while (true) {
    SPINTUNE_ASSIGN_OR_RETURN(bool row, targets->Step());
    if (!row) break;
    visit.emplace_back(targets->ColumnInt(0), U(targets->ColumnInt(1)));
  }
  LedgerPrune out;
  // A full list of targets may have more after it.
  if (visit.size() == max_rows) out.next_target = visit.back().first + 1;
  SPINTUNE_ASSIGN_OR_RETURN(
      auto head, db_->Prepare("SELECT seq, last_seq, received_at FROM ingested "
                              "WHERE target_id = ?1 ORDER BY seq LIMIT ?2"));
  SPINTUNE_ASSIGN_OR_RETURN(
      auto drop, db_->Prepare("DELETE FROM ingested WHERE target_id = ?1 AND seq < ?2"));
  const std::string before = Rfc3339(cutoff);
  for (const auto& [target, resume_seq] : visit) {
    const uint64_t budget = max_rows - out.deleted;
    // The oldest rows up to the first one to keep: received since `cutoff`
    // (rows are received in seq order), or the newest (covering the resume
    // point). Only a prefix goes, so the rows left are one range of seqs.
    head->Reset();
    head->Bind(1, target).Bind(2, I(budget));
    uint64_t rows = 0, below = 0;
    while (true) {
      SPINTUNE_ASSIGN_OR_RETURN(bool row, head->Step());
      if (!row || U(head->ColumnInt(1)) >= resume_seq || head->ColumnText(2) >= before) break;
      ++rows;
      below = U(head->ColumnInt(0)) + 1;
    }
    head->Reset();
    if (rows == 0) continue;
    drop->Reset();
    drop->Bind(1, target).Bind(2, I(below));
    SPINTUNE_RETURN_IF_ERROR(drop->Run());
    out.deleted += rows;
    if (out.deleted == max_rows) {
      out.next_target = target;  // it may have more
      break;
    }
  }
  SPINTUNE_RETURN_IF_ERROR(tx.Commit());
  return out;
}

absl::Status Store::RecordApplied(int64_t target_id, uint64_t version,
                                  const std::string& error) {
  absl::MutexLock lock(&mu_);
  SPINTUNE_ASSIGN_OR_RETURN(
      auto q, db_->Prepare(error.empty()
                               ? "UPDATE targets SET applied_version = ?2, applied_error = '' "
                                 "WHERE id = ?1"
                               : "UPDATE targets SET applied_error = ?3 WHERE id = ?1"));
  q->Bind(1, target_id).Bind(2, I(version));
  if (!error.empty()) q->Bind(3, absl::StrCat("version ", version, ": ", error));
  return q->Run();
}

absl::StatusOr<bool> Store::LeaseTarget(int64_t target_id) {
  absl::MutexLock lock(&mu_);
  return db_->TryLockTarget(target_id);
}

void Store::ReleaseTarget(int64_t target_id) {
  absl::MutexLock lock(&mu_);
  db_->UnlockTarget(target_id);
}

bool Store::HoldsLease(int64_t target_id) {
  absl::MutexLock lock(&mu_);
  return db_->HoldsTargetLock(target_id);
}

absl::StatusOr<int64_t> Store::DataVersion() {
  absl::MutexLock lock(&mu_);
  return db_->DataVersion();
}

absl::Status Store::CheckIntegrity() {
  absl::MutexLock lock(&mu_);
  return db_->CheckIntegrity();
}

absl::Status Store::Checkpoint() {
  absl::MutexLock lock(&mu_);
  return db_->Checkpoint();
}

}  // namespace spintune
