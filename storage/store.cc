#include "storage/store.h"

#include <openssl/rand.h>
#include <sys/stat.h>
#include <openssl/sha.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "policy/policy_json.h"
#include "storage/delta_codec.h"
#include "storage/histogram_codec.h"
#include "storage/migrations.h"

namespace spintune {
namespace {

int64_t I(uint64_t v) { return static_cast<int64_t>(v); }
uint64_t U(int64_t v) { return v < 0 ? 0 : static_cast<uint64_t>(v); }

// The key in columns first..first+3 (cpu_class, device, opcode, size_class).
PolicyKey KeyAt(const Statement& q, int first) {
  return {q.ColumnText(first), q.ColumnText(first + 1),
          static_cast<uint32_t>(q.ColumnInt(first + 2)),
          static_cast<uint32_t>(q.ColumnInt(first + 3))};
}

// Outcomes are kept per (key, version, arm).
using OutcomeId = std::tuple<PolicyKey, uint64_t, OutcomeArm>;

// Adds `delta`'s outcomes, stored in `window`, to `all`.
void MergeOutcomes(uint64_t window, const BatchDelta& delta,
                   std::map<OutcomeId, OutcomeRecord>* all) {
  for (const auto& o : delta.outcomes) {
    auto [it, added] = all->try_emplace({o.key, o.version, o.arm}, o);
    OutcomeRecord& r = it->second;
    if (added) {
      r.first_window = r.last_window = window;
      continue;
    }
    r.moments.Merge(o.moments);
    r.first_window = std::min(r.first_window, window);
    r.last_window = std::max(r.last_window, window);
  }
}

}  // namespace

std::string NowRfc3339() {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now(), absl::UTCTimeZone());
}

absl::StatusOr<std::unique_ptr<Store>> Store::Open(const std::string& path,
                                                   const StoreOptions& options, OpenMode mode) {
  if (options.window_samples == 0 || options.keep_windows == 0) {
    return absl::InvalidArgumentError("window_samples and keep_windows must be > 0");
  }
  struct stat st;
  const bool exists = path != ":memory:" && stat(path.c_str(), &st) == 0 && st.st_size > 0;
  if (mode != OpenMode::kCreate || exists) {
    // Checked before anything is written to it (switching a file to WAL
    // mode is a write): a file of another program is never converted.
    SPINTUNE_ASSIGN_OR_RETURN(auto reader, SqliteDb::Open(path, 0, OpenMode::kReadOnly));
    SPINTUNE_RETURN_IF_ERROR(CheckSpintuneDatabase(reader.get(), mode != OpenMode::kReadOnly));
  }
  SPINTUNE_ASSIGN_OR_RETURN(auto db, SqliteDb::Open(path, options.reserve_bytes, mode));
  if (mode != OpenMode::kReadOnly) SPINTUNE_RETURN_IF_ERROR(MigrateToLatest(db.get()));
  return std::unique_ptr<Store>(new Store(std::move(db), options));
}

absl::StatusOr<int64_t> Store::UpsertTarget(const TargetRecord& r) {
  absl::MutexLock lock(&mu_);
  Transaction tx(db_.get());
  SPINTUNE_RETURN_IF_ERROR(tx.Begin());
  const std::string now = NowRfc3339();
  SPINTUNE_ASSIGN_OR_RETURN(
      auto upsert,
      db_->Prepare("INSERT INTO targets(agent_id, board, cpu_model, kernel_release, "
                   "agent_version, first_seen, last_seen) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6) "
                   "ON CONFLICT(agent_id) DO UPDATE SET board = ?2, cpu_model = ?3, "
                   "kernel_release = ?4, agent_version = ?5, last_seen = ?6"));
  upsert->Bind(1, r.agent_id).Bind(2, r.board).Bind(3, r.cpu_model).Bind(4, r.kernel_release);
  upsert->Bind(5, r.agent_version).Bind(6, now);
  SPINTUNE_RETURN_IF_ERROR(upsert->Run());
  SPINTUNE_ASSIGN_OR_RETURN(auto find, db_->Prepare("SELECT id FROM targets WHERE agent_id = ?1"));
  find->Bind(1, r.agent_id);
  SPINTUNE_ASSIGN_OR_RETURN(bool found, find->Step());
  if (!found) return absl::InternalError("target vanished during upsert");
  const int64_t id = find->ColumnInt(0);

  SPINTUNE_RETURN_IF_ERROR(
      db_->Exec(absl::StrCat("DELETE FROM cpu_classes WHERE target_id = ", id)));
  SPINTUNE_RETURN_IF_ERROR(db_->Exec(absl::StrCat("DELETE FROM devices WHERE target_id = ", id)));
  SPINTUNE_ASSIGN_OR_RETURN(
      auto cls, db_->Prepare("INSERT INTO cpu_classes VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, "
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
                            db_->Prepare("INSERT INTO devices VALUES (?1, ?2, ?3, ?4, ?5, ?6)"));
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
  TargetRecord r;
  SPINTUNE_ASSIGN_OR_RETURN(
      auto t, db_->Prepare("SELECT agent_id, board, cpu_model, kernel_release, agent_version "
                           "FROM targets WHERE id = ?1"));
  t->Bind(1, target_id);
  SPINTUNE_ASSIGN_OR_RETURN(bool found, t->Step());
  if (!found) return absl::NotFoundError(absl::StrCat("no target with id ", target_id));
  r.agent_id = t->ColumnText(0);
  r.board = t->ColumnText(1);
  r.cpu_model = t->ColumnText(2);
  r.kernel_release = t->ColumnText(3);
  r.agent_version = t->ColumnText(4);
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
  SPINTUNE_ASSIGN_OR_RETURN(auto q,
                            db_->Prepare("SELECT last_seq FROM targets WHERE id = ?1"));
  q->Bind(1, target_id);
  SPINTUNE_ASSIGN_OR_RETURN(bool row, q->Step());
  return row ? U(q->ColumnInt(0)) : 0;
}

absl::StatusOr<int64_t> Store::MergeKey(int64_t target_id, const KeyEvidence& delta) {
  SPINTUNE_ASSIGN_OR_RETURN(
      auto insert_key,
      db_->Cached("INSERT INTO keys(target_id, cpu_class, device, opcode, size_class) "
                  "VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT DO NOTHING"));
  insert_key->Bind(1, target_id).Bind(2, delta.key.cpu_class).Bind(3, delta.key.device);
  insert_key->Bind(4, I(delta.key.opcode)).Bind(5, I(delta.key.size_class));
  SPINTUNE_RETURN_IF_ERROR(insert_key->Run());
  SPINTUNE_ASSIGN_OR_RETURN(
      auto find,
      db_->Cached("SELECT k.id, h.samples, h.errors, h.irq_timeouts, h.spin_timeouts, "
                  "h.irq_path, h.spin_path, h.buckets FROM keys k LEFT JOIN histograms h "
                  "ON h.key_id = k.id WHERE k.target_id = ?1 AND k.cpu_class = ?2 AND "
                  "k.device = ?3 AND k.opcode = ?4 AND k.size_class = ?5"));
  find->Bind(1, target_id).Bind(2, delta.key.cpu_class).Bind(3, delta.key.device);
  find->Bind(4, I(delta.key.opcode)).Bind(5, I(delta.key.size_class));
  SPINTUNE_ASSIGN_OR_RETURN(bool found, find->Step());
  if (!found) return absl::InternalError("key vanished during merge");
  const int64_t key_id = find->ColumnInt(0);
  KeyEvidence merged;
  if (!find->ColumnIsNull(1)) {
    SPINTUNE_ASSIGN_OR_RETURN(merged.histogram, DecodeHistogram(find->ColumnBlob(7)));
    merged.errors = U(find->ColumnInt(2));
    merged.irq_timeouts = U(find->ColumnInt(3));
    merged.spin_timeouts = U(find->ColumnInt(4));
    merged.irq_path = U(find->ColumnInt(5));
    merged.spin_path = U(find->ColumnInt(6));
  }
  find->Reset();
  merged.histogram.Merge(delta.histogram);
  SPINTUNE_ASSIGN_OR_RETURN(
      auto put, db_->Cached("INSERT OR REPLACE INTO histograms VALUES (?1, ?2, ?3, ?4, ?5, "
                            "?6, ?7, ?8)"));
  put->Bind(1, key_id).Bind(2, I(merged.histogram.total_count()));
  put->Bind(3, I(merged.errors + delta.errors));
  put->Bind(4, I(merged.irq_timeouts + delta.irq_timeouts));
  put->Bind(5, I(merged.spin_timeouts + delta.spin_timeouts));
  put->Bind(6, I(merged.irq_path + delta.irq_path));
  put->Bind(7, I(merged.spin_path + delta.spin_path));
  put->BindBlob(8, EncodeHistogram(merged.histogram));
  SPINTUNE_RETURN_IF_ERROR(put->Run());
  return key_id;
}

absl::Status Store::MergeWindow(int64_t key_id, uint64_t window, const LatencyHistogram& delta) {
  SPINTUNE_ASSIGN_OR_RETURN(
      auto win, db_->Cached("SELECT buckets FROM histogram_windows WHERE key_id = ?1 AND "
                            "window = ?2"));
  win->Bind(1, key_id).Bind(2, I(window));
  SPINTUNE_ASSIGN_OR_RETURN(bool has_window, win->Step());
  LatencyHistogram windowed;
  if (has_window) {
    SPINTUNE_ASSIGN_OR_RETURN(windowed, DecodeHistogram(win->ColumnBlob(0)));
  }
  win->Reset();
  windowed.Merge(delta);
  SPINTUNE_ASSIGN_OR_RETURN(
      auto put_window, db_->Cached("INSERT OR REPLACE INTO histogram_windows VALUES (?1, ?2, "
                                   "?3, ?4)"));
  put_window->Bind(1, key_id).Bind(2, I(window)).Bind(3, I(windowed.total_count()));
  put_window->BindBlob(4, EncodeHistogram(windowed));
  return put_window->Run();
}

absl::Status Store::MergeDispatch(int64_t target_id, const DispatchRecord& delta) {
  SPINTUNE_ASSIGN_OR_RETURN(
      auto find, db_->Cached("SELECT handler_buckets, wake_buckets FROM dispatch_stats "
                              "WHERE target_id = ?1 AND cpu_class = ?2 AND device = ?3"));
  find->Bind(1, target_id).Bind(2, delta.cpu_class).Bind(3, delta.device);
  SPINTUNE_ASSIGN_OR_RETURN(bool found, find->Step());
  LatencyHistogram handler, wake;
  if (found) {
    SPINTUNE_ASSIGN_OR_RETURN(handler, DecodeHistogram(find->ColumnBlob(0)));
    SPINTUNE_ASSIGN_OR_RETURN(wake, DecodeHistogram(find->ColumnBlob(1)));
  }
  handler.Merge(delta.handler);
  wake.Merge(delta.wake);
  SPINTUNE_ASSIGN_OR_RETURN(
      auto put, db_->Cached("INSERT OR REPLACE INTO dispatch_stats VALUES (?1, ?2, ?3, ?4, "
                             "?5, ?6)"));
  put->Bind(1, target_id).Bind(2, delta.cpu_class).Bind(3, delta.device);
  put->Bind(4, I(handler.total_count()));
  put->BindBlob(5, EncodeHistogram(handler)).BindBlob(6, EncodeHistogram(wake));
  return put->Run();
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
      auto target, db_->Cached("SELECT total_samples, last_seq FROM targets WHERE id = ?1"));
  SPINTUNE_ASSIGN_OR_RETURN(
      auto earlier, db_->Cached("SELECT fingerprint, refused_code, refused_message FROM "
                                 "ingested WHERE target_id = ?1 AND seq = ?2"));
  SPINTUNE_ASSIGN_OR_RETURN(
      auto mark, db_->Cached("INSERT INTO ingested(target_id, seq, samples, dispatch_samples, "
                              "received_at, last_seq, fingerprint, refused_code, "
                              "refused_message) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"));
  SPINTUNE_ASSIGN_OR_RETURN(
      auto totals, db_->Cached("UPDATE targets SET total_samples = total_samples + ?2, "
                                "total_dispatch_samples = total_dispatch_samples + ?3, "
                                "dropped_batches = dropped_batches + ?4, "
                                "dropped_samples = dropped_samples + ?5, "
                                "refused_batches = refused_batches + ?6, "
                                "refused_samples = refused_samples + ?7, "
                                "last_seq = ?8, last_seen = ?9 WHERE id = ?1"));
  SPINTUNE_ASSIGN_OR_RETURN(
      auto stage, db_->Cached("INSERT INTO pending_deltas(target_id, seq, window, staged_at, "
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
      // Before migration 6 no fingerprint was kept: take the resend's word.
      const bool same = found && (earlier->ColumnIsNull(0) ||
                                  static_cast<uint64_t>(earlier->ColumnInt(0)) == b.fingerprint || b.fingerprint == 0);
      r.outcome = same ? IngestOutcome::kDuplicate : IngestOutcome::kConflict;
      if (same && earlier->ColumnInt(1) != 0) {
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

absl::StatusOr<std::vector<std::pair<uint64_t, BatchDelta>>> Store::StagedDeltas(
    int64_t target_id, uint64_t* last_seq) {
  SPINTUNE_ASSIGN_OR_RETURN(
      auto q, db_->Prepare("SELECT seq, window, delta FROM pending_deltas WHERE target_id = ?1 "
                           "ORDER BY seq"));
  q->Bind(1, target_id);
  std::vector<std::pair<uint64_t, BatchDelta>> out;
  while (true) {
    SPINTUNE_ASSIGN_OR_RETURN(bool row, q->Step());
    if (!row) break;
    SPINTUNE_ASSIGN_OR_RETURN(BatchDelta d, DecodeBatchDelta(q->ColumnBlob(2)));
    d.seq = U(q->ColumnInt(0));
    if (last_seq != nullptr) *last_seq = d.seq;
    out.emplace_back(U(q->ColumnInt(1)), std::move(d));
  }
  return out;
}

absl::Status Store::CompactLocked(int64_t target_id, uint64_t* folded) {
  uint64_t last_seq = 0;
  SPINTUNE_ASSIGN_OR_RETURN(auto staged, StagedDeltas(target_id, &last_seq));
  *folded = staged.size();
  if (staged.empty()) return absl::OkStatus();
  // Everything staged, summed per key, per (key, window) and per dispatch
  // record, then written once each.
  std::map<PolicyKey, KeyEvidence> keys;
  std::map<std::pair<PolicyKey, uint64_t>, LatencyHistogram> windows;
  std::map<std::pair<std::string, std::string>, DispatchRecord> dispatch;
  for (const auto& [window, delta] : staged) {
    for (const auto& k : delta.keys) {
      KeyEvidence& e = keys[k.key];
      e.key = k.key;
      e.histogram.Merge(k.histogram);
      e.errors += k.errors;
      e.irq_timeouts += k.irq_timeouts;
      e.spin_timeouts += k.spin_timeouts;
      e.irq_path += k.irq_path;
      e.spin_path += k.spin_path;
      windows[{k.key, window}].Merge(k.histogram);
    }
    for (const auto& d : delta.dispatch) {
      DispatchRecord& r = dispatch[{d.cpu_class, d.device}];
      r.cpu_class = d.cpu_class;
      r.device = d.device;
      r.handler.Merge(d.handler);
      r.wake.Merge(d.wake);
    }
  }
  std::map<PolicyKey, int64_t> key_ids;
  for (const auto& [key, e] : keys) {
    SPINTUNE_ASSIGN_OR_RETURN(key_ids[key], MergeKey(target_id, e));
  }
  for (const auto& [kw, h] : windows) {
    SPINTUNE_RETURN_IF_ERROR(MergeWindow(key_ids.at(kw.first), kw.second, h));
  }
  for (const auto& [cd, d] : dispatch) SPINTUNE_RETURN_IF_ERROR(MergeDispatch(target_id, d));
  std::map<OutcomeId, OutcomeRecord> outcomes;
  std::map<std::string, LatencyHistogram> timers;
  for (const auto& [window, delta] : staged) {
    MergeOutcomes(window, delta, &outcomes);
    for (const auto& t : delta.timers) timers[t.cpu_class].Merge(t.oversleep);
  }
  for (const auto& [id, o] : outcomes) {
    SPINTUNE_ASSIGN_OR_RETURN(
        auto put, db_->Cached(
                      "INSERT INTO outcomes VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, "
                      "?12, ?13, ?14, ?15) ON CONFLICT DO UPDATE SET requests = requests + ?8, "
                      "cpu_ns_sum = cpu_ns_sum + ?9, latency_ns_sum = latency_ns_sum + ?10, "
                      "cpu_ns_sq_sum = cpu_ns_sq_sum + ?11, "
                      "latency_ns_sq_sum = latency_ns_sq_sum + ?12, "
                      "cpu_latency_ns_sum = cpu_latency_ns_sum + ?13, "
                      "first_window = MIN(first_window, ?14), last_window = MAX(last_window, ?15)"));
    const PolicyKey& k = o.key;
    const CostMoments& m = o.moments;
    put->Bind(1, target_id).Bind(2, k.cpu_class).Bind(3, k.device).Bind(4, I(k.opcode));
    put->Bind(5, I(k.size_class)).Bind(6, I(o.version)).Bind(7, static_cast<int64_t>(o.arm));
    put->Bind(8, I(m.requests)).Bind(9, m.cpu_ns_sum).Bind(10, m.latency_ns_sum);
    put->Bind(11, m.cpu_ns_sq_sum).Bind(12, m.latency_ns_sq_sum).Bind(13, m.cpu_latency_ns_sum);
    put->Bind(14, I(o.first_window)).Bind(15, I(o.last_window));
    SPINTUNE_RETURN_IF_ERROR(put->Run());
  }
  for (const auto& [cpu_class, h] : timers) {
    SPINTUNE_ASSIGN_OR_RETURN(
        auto find, db_->Cached("SELECT buckets FROM timer_oversleep WHERE target_id = ?1 AND "
                               "cpu_class = ?2"));
    find->Bind(1, target_id).Bind(2, cpu_class);
    SPINTUNE_ASSIGN_OR_RETURN(bool found, find->Step());
    LatencyHistogram merged;
    if (found) {
      SPINTUNE_ASSIGN_OR_RETURN(merged, DecodeHistogram(find->ColumnBlob(0)));
    }
    find->Reset();
    merged.Merge(h);
    SPINTUNE_ASSIGN_OR_RETURN(
        auto put, db_->Cached("INSERT OR REPLACE INTO timer_oversleep VALUES (?1, ?2, ?3, ?4)"));
    put->Bind(1, target_id).Bind(2, cpu_class).Bind(3, I(merged.total_count()));
    put->BindBlob(4, EncodeHistogram(merged));
    SPINTUNE_RETURN_IF_ERROR(put->Run());
  }
  SPINTUNE_ASSIGN_OR_RETURN(
      auto drop, db_->Cached("DELETE FROM pending_deltas WHERE target_id = ?1 AND seq <= ?2"));
  drop->Bind(1, target_id).Bind(2, I(last_seq));
  return drop->Run();
}

absl::StatusOr<uint64_t> Store::Compact(int64_t target_id) {
  absl::MutexLock lock(&mu_);
  Transaction tx(db_.get());
  absl::Cleanup reset = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { db_->ResetCached(); };
  SPINTUNE_RETURN_IF_ERROR(tx.Begin());
  uint64_t folded = 0;
  SPINTUNE_RETURN_IF_ERROR(CompactLocked(target_id, &folded));
  db_->ResetCached();
  SPINTUNE_RETURN_IF_ERROR(tx.Commit());
  return folded;
}

absl::StatusOr<std::vector<int64_t>> Store::TargetsToCompact(uint64_t min_batches,
                                                             absl::Duration max_age) {
  absl::MutexLock lock(&mu_);
  SPINTUNE_ASSIGN_OR_RETURN(
      auto q, db_->Prepare("SELECT target_id FROM pending_deltas GROUP BY target_id "
                           "HAVING COUNT(*) >= ?1 OR MIN(staged_at) <= ?2"));
  q->Bind(1, I(min_batches)).Bind(2, absl::ToUnixSeconds(absl::Now() - max_age));
  std::vector<int64_t> out;
  while (true) {
    SPINTUNE_ASSIGN_OR_RETURN(bool row, q->Step());
    if (!row) break;
    out.push_back(q->ColumnInt(0));
  }
  return out;
}

absl::StatusOr<std::vector<PolicyKey>> Store::ListKeys(int64_t target_id) {
  absl::MutexLock lock(&mu_);
  SPINTUNE_ASSIGN_OR_RETURN(
      auto q, db_->Prepare("SELECT cpu_class, device, opcode, size_class FROM keys "
                           "WHERE target_id = ?1"));
  q->Bind(1, target_id);
  std::vector<PolicyKey> out;
  while (true) {
    SPINTUNE_ASSIGN_OR_RETURN(bool row, q->Step());
    if (!row) break;
    out.push_back(KeyAt(*q, 0));
  }
  std::set<PolicyKey> known(out.begin(), out.end());
  SPINTUNE_ASSIGN_OR_RETURN(auto staged, StagedDeltas(target_id, nullptr));
  for (const auto& [window, delta] : staged) {
    for (const auto& k : delta.keys) {
      if (known.insert(k.key).second) out.push_back(k.key);
    }
  }
  return out;
}

absl::StatusOr<std::vector<KeyEvidence>> Store::LoadKeys(int64_t target_id) {
  absl::MutexLock lock(&mu_);
  SPINTUNE_ASSIGN_OR_RETURN(
      auto q, db_->Prepare("SELECT k.cpu_class, k.device, k.opcode, k.size_class, h.errors, "
                           "h.irq_timeouts, h.spin_timeouts, h.irq_path, h.spin_path, h.buckets, "
                           "k.since_window, k.id "
                           "FROM keys k JOIN histograms h ON h.key_id = k.id "
                           "WHERE k.target_id = ?1 ORDER BY k.device, k.cpu_class, k.opcode, "
                           "k.size_class"));
  SPINTUNE_ASSIGN_OR_RETURN(
      auto windows, db_->Prepare("SELECT buckets FROM histogram_windows WHERE key_id = ?1 AND "
                                 "window >= ?2"));
  q->Bind(1, target_id);
  std::vector<KeyEvidence> out;
  while (true) {
    SPINTUNE_ASSIGN_OR_RETURN(bool row, q->Step());
    if (!row) break;
    KeyEvidence k;
    k.key = KeyAt(*q, 0);
    k.errors = U(q->ColumnInt(4));
    k.irq_timeouts = U(q->ColumnInt(5));
    k.spin_timeouts = U(q->ColumnInt(6));
    k.irq_path = U(q->ColumnInt(7));
    k.spin_path = U(q->ColumnInt(8));
    SPINTUNE_ASSIGN_OR_RETURN(k.histogram, DecodeHistogram(q->ColumnBlob(9)));
    const int64_t since = q->ColumnInt(10);
    if (since > 0) {  // a change was detected: only the windows since then
      k.histogram.Clear();
      windows->Bind(1, q->ColumnInt(11)).Bind(2, since);
      while (true) {
        SPINTUNE_ASSIGN_OR_RETURN(bool w, windows->Step());
        if (!w) break;
        SPINTUNE_ASSIGN_OR_RETURN(LatencyHistogram part, DecodeHistogram(windows->ColumnBlob(0)));
        k.histogram.Merge(part);
      }
      windows->Reset();
    }
    out.push_back(std::move(k));
  }
  // Staged deltas: newer than every compacted window, so they count for a
  // key that changed too.
  SPINTUNE_ASSIGN_OR_RETURN(auto staged, StagedDeltas(target_id, nullptr));
  if (!staged.empty()) {
    std::map<PolicyKey, size_t> index;
    for (size_t i = 0; i < out.size(); ++i) index[out[i].key] = i;
    for (const auto& [window, delta] : staged) {
      for (const auto& d : delta.keys) {
        auto it = index.find(d.key);
        if (it == index.end()) {
          it = index.emplace(d.key, out.size()).first;
          out.push_back(KeyEvidence{d.key, {}, 0, 0, 0, 0, 0});
        }
        KeyEvidence& e = out[it->second];
        e.histogram.Merge(d.histogram);
        e.errors += d.errors;
        e.irq_timeouts += d.irq_timeouts;
        e.spin_timeouts += d.spin_timeouts;
        e.irq_path += d.irq_path;
        e.spin_path += d.spin_path;
      }
    }
    std::sort(out.begin(), out.end(), [](const KeyEvidence& a, const KeyEvidence& b) {
      return std::tie(a.key.device, a.key.cpu_class, a.key.opcode, a.key.size_class) <
             std::tie(b.key.device, b.key.cpu_class, b.key.opcode, b.key.size_class);
    });
  }
  return out;
}

absl::StatusOr<std::vector<PolicyKey>> Store::DetectChanges(int64_t target_id,
                                                            const ChangeTest& test,
                                                            uint64_t min_recent) {
  absl::MutexLock lock(&mu_);
  Transaction tx(db_.get());
  absl::Cleanup reset = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { db_->ResetCached(); };
  SPINTUNE_RETURN_IF_ERROR(tx.Begin());
  // The windows must hold every batch before they are compared.
  uint64_t folded = 0;
  SPINTUNE_RETURN_IF_ERROR(CompactLocked(target_id, &folded));
  SPINTUNE_ASSIGN_OR_RETURN(
      auto keys, db_->Prepare("SELECT id, cpu_class, device, opcode, size_class, since_window "
                              "FROM keys WHERE target_id = ?1"));
  keys->Bind(1, target_id);
  struct Key {
    int64_t id;
    PolicyKey key;
    int64_t since;
  };
  std::vector<Key> all;
  while (true) {
    SPINTUNE_ASSIGN_OR_RETURN(bool row, keys->Step());
    if (!row) break;
    all.push_back({keys->ColumnInt(0),
                   {keys->ColumnText(1), keys->ColumnText(2),
                    static_cast<uint32_t>(keys->ColumnInt(3)),
                    static_cast<uint32_t>(keys->ColumnInt(4))},
                   keys->ColumnInt(5)});
  }
  SPINTUNE_ASSIGN_OR_RETURN(
      auto windows, db_->Prepare("SELECT window, buckets FROM histogram_windows WHERE key_id = "
                                 "?1 AND window >= ?2 ORDER BY window"));
  SPINTUNE_ASSIGN_OR_RETURN(
      auto mark, db_->Prepare("UPDATE keys SET since_window = ?2 WHERE id = ?1"));
  SPINTUNE_ASSIGN_OR_RETURN(
      auto prune, db_->Prepare("DELETE FROM histogram_windows WHERE key_id = ?1 AND window < ?2"));
  std::vector<PolicyKey> changed;
  for (const Key& k : all) {
    windows->Bind(1, k.id).Bind(2, k.since);
    std::vector<std::pair<int64_t, LatencyHistogram>> parts;
    while (true) {
      SPINTUNE_ASSIGN_OR_RETURN(bool row, windows->Step());
      if (!row) break;
      SPINTUNE_ASSIGN_OR_RETURN(LatencyHistogram h, DecodeHistogram(windows->ColumnBlob(1)));
      parts.emplace_back(windows->ColumnInt(0), std::move(h));
    }
    windows->Reset();
    if (parts.size() < 2) continue;
    const auto& [latest, recent] = parts.back();
    if (recent.total_count() < min_recent) continue;
    LatencyHistogram before;
    for (size_t i = 0; i + 1 < parts.size(); ++i) before.Merge(parts[i].second);
    int64_t keep_from = std::max<int64_t>(k.since, latest - static_cast<int64_t>(options_.keep_windows));
    if (before.total_count() >= min_recent && DistributionChanged(before, recent, test)) {
      mark->Bind(1, k.id).Bind(2, latest);
      SPINTUNE_RETURN_IF_ERROR(mark->Run());
      changed.push_back(k.key);
      keep_from = latest;
    }
    if (k.since == 0 && keep_from == k.since) continue;
    prune->Bind(1, k.id).Bind(2, keep_from);
    SPINTUNE_RETURN_IF_ERROR(prune->Run());
  }
  SPINTUNE_RETURN_IF_ERROR(tx.Commit());
  return changed;
}

absl::StatusOr<std::vector<DispatchRecord>> Store::LoadDispatch(int64_t target_id) {
  absl::MutexLock lock(&mu_);
  SPINTUNE_ASSIGN_OR_RETURN(
      auto q, db_->Prepare("SELECT cpu_class, device, handler_buckets, wake_buckets FROM "
                           "dispatch_stats WHERE target_id = ?1 ORDER BY cpu_class, device"));
  q->Bind(1, target_id);
  std::vector<DispatchRecord> out;
  while (true) {
    SPINTUNE_ASSIGN_OR_RETURN(bool row, q->Step());
    if (!row) break;
    DispatchRecord d;
    d.cpu_class = q->ColumnText(0);
    d.device = q->ColumnText(1);
    SPINTUNE_ASSIGN_OR_RETURN(d.handler, DecodeHistogram(q->ColumnBlob(2)));
    SPINTUNE_ASSIGN_OR_RETURN(d.wake, DecodeHistogram(q->ColumnBlob(3)));
    out.push_back(std::move(d));
  }
  SPINTUNE_ASSIGN_OR_RETURN(auto staged, StagedDeltas(target_id, nullptr));
  for (const auto& [window, delta] : staged) {
    for (const auto& d : delta.dispatch) {
      auto it = std::find_if(out.begin(), out.end(), [&](const DispatchRecord& r) {
        return r.cpu_class == d.cpu_class && r.device == d.device;
      });
      if (it == out.end()) {
        out.push_back(DispatchRecord{d.cpu_class, d.device, {}, {}});
        it = out.end() - 1;
      }
      it->handler.Merge(d.handler);
      it->wake.Merge(d.wake);
    }
  }
  if (!staged.empty()) {
    std::sort(out.begin(), out.end(), [](const DispatchRecord& a, const DispatchRecord& b) {
      return std::tie(a.cpu_class, a.device) < std::tie(b.cpu_class, b.device);
    });
  }
  return out;
}

absl::StatusOr<std::vector<OutcomeRecord>> Store::LoadOutcomes(int64_t target_id) {
  absl::MutexLock lock(&mu_);
  SPINTUNE_ASSIGN_OR_RETURN(
      auto q, db_->Prepare("SELECT cpu_class, device, opcode, size_class, version, arm, requests, "
                           "cpu_ns_sum, latency_ns_sum, cpu_ns_sq_sum, latency_ns_sq_sum, "
                           "cpu_latency_ns_sum, first_window, last_window FROM outcomes "
                           "WHERE target_id = ?1"));
  q->Bind(1, target_id);
  std::map<OutcomeId, OutcomeRecord> all;
  while (true) {
    SPINTUNE_ASSIGN_OR_RETURN(bool row, q->Step());
    if (!row) break;
    OutcomeRecord o;
    o.key = KeyAt(*q, 0);
    o.version = U(q->ColumnInt(4));
    o.arm = q->ColumnInt(5) == 1 ? OutcomeArm::kIncumbent : OutcomeArm::kTable;
    o.moments = {U(q->ColumnInt(6)), q->ColumnDouble(7), q->ColumnDouble(8),
                 q->ColumnDouble(9), q->ColumnDouble(10), q->ColumnDouble(11)};
    o.first_window = U(q->ColumnInt(12));
    o.last_window = U(q->ColumnInt(13));
    all[{o.key, o.version, o.arm}] = std::move(o);
  }
  SPINTUNE_ASSIGN_OR_RETURN(auto staged, StagedDeltas(target_id, nullptr));
  for (const auto& [window, delta] : staged) MergeOutcomes(window, delta, &all);
  std::vector<OutcomeRecord> out;
  for (auto& [id, o] : all) out.push_back(std::move(o));
  return out;
}

absl::StatusOr<std::map<PolicyKey, uint64_t>> Store::LoadDriftWindows(int64_t target_id) {
  absl::MutexLock lock(&mu_);
  SPINTUNE_ASSIGN_OR_RETURN(
      auto q, db_->Prepare("SELECT cpu_class, device, opcode, size_class, since_window FROM keys "
                           "WHERE target_id = ?1 AND since_window > 0"));
  q->Bind(1, target_id);
  std::map<PolicyKey, uint64_t> out;
  while (true) {
    SPINTUNE_ASSIGN_OR_RETURN(bool row, q->Step());
    if (!row) break;
    out[KeyAt(*q, 0)] = U(q->ColumnInt(4));
  }
  return out;
}

absl::StatusOr<std::vector<TimerRecord>> Store::LoadTimerOversleep(int64_t target_id) {
  absl::MutexLock lock(&mu_);
  SPINTUNE_ASSIGN_OR_RETURN(
      auto q, db_->Prepare("SELECT cpu_class, buckets FROM timer_oversleep WHERE target_id = ?1"));
  q->Bind(1, target_id);
  std::map<std::string, LatencyHistogram> all;
  while (true) {
    SPINTUNE_ASSIGN_OR_RETURN(bool row, q->Step());
    if (!row) break;
    SPINTUNE_ASSIGN_OR_RETURN(all[q->ColumnText(0)], DecodeHistogram(q->ColumnBlob(1)));
  }
  SPINTUNE_ASSIGN_OR_RETURN(auto staged, StagedDeltas(target_id, nullptr));
  for (const auto& [window, delta] : staged) {
    for (const auto& t : delta.timers) all[t.cpu_class].Merge(t.oversleep);
  }
  std::vector<TimerRecord> out;
  for (auto& [cpu_class, h] : all) out.push_back({cpu_class, std::move(h)});
  return out;
}

absl::Status Store::RecordVerification(int64_t target_id, const VerificationRecord& v) {
  absl::MutexLock lock(&mu_);
  SPINTUNE_ASSIGN_OR_RETURN(
      auto q, db_->Prepare("INSERT OR REPLACE INTO verifications VALUES (?1, ?2, ?3, ?4, ?5, ?6, "
                           "?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20)"));
  q->Bind(1, target_id).Bind(2, I(v.version)).Bind(3, v.key.cpu_class).Bind(4, v.key.device);
  q->Bind(5, I(v.key.opcode)).Bind(6, I(v.key.size_class)).Bind(7, v.verdict);
  q->Bind(8, v.predicted_cost_ns).Bind(9, v.measured.mean_ns).Bind(10, v.measured.low_ns);
  q->Bind(11, v.measured.high_ns).Bind(12, I(v.requests)).Bind(13, I(v.incumbent_version));
  q->Bind(14, v.incumbent.mean_ns).Bind(15, v.incumbent.low_ns).Bind(16, v.incumbent.high_ns);
  q->Bind(17, I(v.rollback_version)).Bind(18, v.reason);
  q->Bind(19, v.decided_at.empty() ? NowRfc3339() : v.decided_at);
  q->Bind(20, v.method);
  return q->Run();
}

absl::StatusOr<std::vector<VerificationRecord>> Store::ListVerifications(int64_t target_id) {
  absl::MutexLock lock(&mu_);
  SPINTUNE_ASSIGN_OR_RETURN(
      auto q, db_->Prepare("SELECT version, cpu_class, device, opcode, size_class, verdict, "
                           "predicted_cost_ns, measured_cost_ns, measured_low_ns, "
                           "measured_high_ns, requests, incumbent_version, incumbent_cost_ns, "
                           "incumbent_low_ns, incumbent_high_ns, rollback_version, reason, "
                           "decided_at, method FROM verifications WHERE target_id = ?1 "
                           "ORDER BY version, device, cpu_class, opcode, size_class"));
  q->Bind(1, target_id);
  std::vector<VerificationRecord> out;
  while (true) {
    SPINTUNE_ASSIGN_OR_RETURN(bool row, q->Step());
    if (!row) break;
    VerificationRecord v;
    v.version = U(q->ColumnInt(0));
    v.key = KeyAt(*q, 1);
    v.verdict = q->ColumnText(5);
    v.predicted_cost_ns = q->ColumnDouble(6);
    v.measured = {q->ColumnDouble(7), q->ColumnDouble(8), q->ColumnDouble(9)};
    v.requests = U(q->ColumnInt(10));
    v.incumbent_version = U(q->ColumnInt(11));
    v.incumbent = {q->ColumnDouble(12), q->ColumnDouble(13), q->ColumnDouble(14)};
    v.rollback_version = U(q->ColumnInt(15));
    v.reason = q->ColumnText(16);
    v.decided_at = q->ColumnText(17);
    v.method = q->ColumnText(18);
    out.push_back(std::move(v));
  }
  return out;
}

absl::Status Store::HoldKey(int64_t target_id, const HeldKey& held) {
  absl::MutexLock lock(&mu_);
  SPINTUNE_ASSIGN_OR_RETURN(
      auto q, db_->Prepare("INSERT OR REPLACE INTO held_keys VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, "
                           "?8, ?9, ?10)"));
  q->Bind(1, target_id).Bind(2, held.key.cpu_class).Bind(3, held.key.device);
  q->Bind(4, I(held.key.opcode)).Bind(5, I(held.key.size_class));
  q->Bind(6, static_cast<int64_t>(held.wait.strategy)).Bind(7, I(held.wait.spin_ns));
  q->Bind(8, I(held.wait.sleep_ns)).Bind(9, I(held.wait.poll_interval_ns));
  q->Bind(10, I(held.samples_at_hold));
  return q->Run();
}

absl::Status Store::ReleaseKey(int64_t target_id, const PolicyKey& key) {
  absl::MutexLock lock(&mu_);
  SPINTUNE_ASSIGN_OR_RETURN(
      auto q, db_->Prepare("DELETE FROM held_keys WHERE target_id = ?1 AND cpu_class = ?2 AND "
                           "device = ?3 AND opcode = ?4 AND size_class = ?5"));
  q->Bind(1, target_id).Bind(2, key.cpu_class).Bind(3, key.device).Bind(4, I(key.opcode));
  q->Bind(5, I(key.size_class));
  return q->Run();
}

absl::StatusOr<std::vector<HeldKey>> Store::ListHeldKeys(int64_t target_id) {
  absl::MutexLock lock(&mu_);
  SPINTUNE_ASSIGN_OR_RETURN(
      auto q, db_->Prepare("SELECT cpu_class, device, opcode, size_class, strategy, spin_ns, "
                           "sleep_ns, poll_interval_ns, samples_at_hold FROM held_keys "
                           "WHERE target_id = ?1"));
  q->Bind(1, target_id);
  std::vector<HeldKey> out;
  while (true) {
    SPINTUNE_ASSIGN_OR_RETURN(bool row, q->Step());
    if (!row) break;
    HeldKey h;
    h.key = KeyAt(*q, 0);
    const int64_t strategy = q->ColumnInt(4);
    if (strategy < 1 || strategy > 5) return absl::DataLossError("held_keys: bad strategy");
    h.wait = {static_cast<Strategy>(strategy), U(q->ColumnInt(5)), U(q->ColumnInt(6)),
              U(q->ColumnInt(7))};
    h.samples_at_hold = U(q->ColumnInt(8));
    out.push_back(std::move(h));
  }
  return out;
}

absl::StatusOr<std::vector<std::pair<int64_t, uint64_t>>> Store::LatestVersions() {
  absl::MutexLock lock(&mu_);
  SPINTUNE_ASSIGN_OR_RETURN(
      auto q, db_->Prepare("SELECT target_id, MAX(version) FROM policy_versions GROUP BY target_id"));
  std::vector<std::pair<int64_t, uint64_t>> out;
  while (true) {
    SPINTUNE_ASSIGN_OR_RETURN(bool row, q->Step());
    if (!row) break;
    out.emplace_back(q->ColumnInt(0), U(q->ColumnInt(1)));
  }
  return out;
}

absl::StatusOr<uint64_t> Store::AppendPolicyVersion(int64_t target_id, PolicyTable* table) {
  absl::MutexLock lock(&mu_);
  return AppendVersion(target_id, table, /*pin=*/false);
}

absl::StatusOr<uint64_t> Store::AppendPinnedVersion(int64_t target_id, PolicyTable* table) {
  table->origin = "rollback";
  absl::MutexLock lock(&mu_);
  return AppendVersion(target_id, table, /*pin=*/true);
}

absl::StatusOr<uint64_t> Store::AppendVersion(int64_t target_id, PolicyTable* table, bool pin) {
  Transaction tx(db_.get());
  SPINTUNE_RETURN_IF_ERROR(tx.Begin());
  if (!pin) {
    // Checked in the transaction: a rollback between a refit's start and
    // its store wins.
    SPINTUNE_ASSIGN_OR_RETURN(auto p,
                              db_->Prepare("SELECT pinned_version FROM targets WHERE id = ?1"));
    p->Bind(1, target_id);
    SPINTUNE_ASSIGN_OR_RETURN(bool found, p->Step());
    if (found && p->ColumnInt(0) != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("target is pinned to version ", p->ColumnInt(0)));
    }
  }
  SPINTUNE_ASSIGN_OR_RETURN(auto q, db_->Prepare("SELECT COALESCE(MAX(version), 0) FROM "
                                                 "policy_versions WHERE target_id = ?1"));
  q->Bind(1, target_id);
  SPINTUNE_ASSIGN_OR_RETURN(bool row, q->Step());
  const uint64_t version = (row ? U(q->ColumnInt(0)) : 0) + 1;
  table->version = version;
  table->fitted_at = NowRfc3339();
  SPINTUNE_ASSIGN_OR_RETURN(
      auto put, db_->Prepare("INSERT INTO policy_versions VALUES (?1, ?2, ?3, ?4, ?5)"));
  put->Bind(1, target_id).Bind(2, I(version)).Bind(3, table->fitted_at);
  put->Bind(4, I(table->TotalSamples())).Bind(5, PolicyTableToJson(*table).dump());
  SPINTUNE_RETURN_IF_ERROR(put->Run());
  if (pin) {
    SPINTUNE_ASSIGN_OR_RETURN(
        auto p, db_->Prepare("UPDATE targets SET pinned_version = ?2 WHERE id = ?1"));
    p->Bind(1, target_id).Bind(2, I(version));
    SPINTUNE_RETURN_IF_ERROR(p->Run());
  }
  SPINTUNE_RETURN_IF_ERROR(tx.Commit());
  return version;
}

absl::Status Store::Unpin(int64_t target_id) {
  absl::MutexLock lock(&mu_);
  SPINTUNE_ASSIGN_OR_RETURN(auto q,
                            db_->Prepare("UPDATE targets SET pinned_version = 0 WHERE id = ?1"));
  q->Bind(1, target_id);
  return q->Run();
}

absl::StatusOr<int64_t> Store::DataVersion() {
  absl::MutexLock lock(&mu_);
  SPINTUNE_ASSIGN_OR_RETURN(auto q, db_->Prepare("PRAGMA data_version"));
  SPINTUNE_ASSIGN_OR_RETURN(bool row, q->Step());
  return row ? q->ColumnInt(0) : 0;
}

absl::Status Store::SaveProfile(const Profile& p) {
  SPINTUNE_RETURN_IF_ERROR(ValidateProfileName(p.info.name));
  const std::string text = ProfileToJson(p).dump();
  absl::MutexLock lock(&mu_);
  SPINTUNE_ASSIGN_OR_RETURN(
      auto q, db_->Prepare("INSERT INTO profiles VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"));
  q->Bind(1, p.info.name).Bind(2, p.info.target).Bind(3, I(p.info.source_version));
  q->Bind(4, p.info.created_at).Bind(5, p.info.note).Bind(6, p.info.tool_version);
  q->Bind(7, p.info.parent).Bind(8, I(p.info.samples)).Bind(9, I(p.info.keys)).Bind(10, text);
  absl::Status s = q->Run();
  if (absl::IsAlreadyExists(s)) {
    return absl::AlreadyExistsError(absl::StrCat(
        "a profile named '", p.info.name, "' exists (spintune profiles delete, or pick a name)"));
  }
  return s;
}

absl::StatusOr<std::vector<ProfileInfo>> Store::ListProfiles() {
  absl::MutexLock lock(&mu_);
  SPINTUNE_ASSIGN_OR_RETURN(
      auto q, db_->Prepare("SELECT name, target, source_version, created_at, note, tool_version, "
                           "parent, samples, keys FROM profiles ORDER BY created_at, name"));
  std::vector<ProfileInfo> out;
  while (true) {
    SPINTUNE_ASSIGN_OR_RETURN(bool row, q->Step());
    if (!row) break;
    ProfileInfo p;
    p.name = q->ColumnText(0);
    p.target = q->ColumnText(1);
    p.source_version = U(q->ColumnInt(2));
    p.created_at = q->ColumnText(3);
    p.note = q->ColumnText(4);
    p.tool_version = q->ColumnText(5);
    p.parent = q->ColumnText(6);
    p.samples = U(q->ColumnInt(7));
    p.keys = U(q->ColumnInt(8));
    out.push_back(std::move(p));
  }
  return out;
}

absl::StatusOr<Profile> Store::LoadProfile(const std::string& name) {
  absl::MutexLock lock(&mu_);
  SPINTUNE_ASSIGN_OR_RETURN(auto q,
                            db_->Prepare("SELECT profile_json FROM profiles WHERE name = ?1"));
  q->Bind(1, name);
  SPINTUNE_ASSIGN_OR_RETURN(bool row, q->Step());
  if (!row) {
    return absl::NotFoundError(
        absl::StrCat("no profile '", name, "' (spintune profiles list shows them)"));
  }
  auto profile = ParseProfileJson(q->ColumnText(0));
  if (!profile.ok()) {
    return absl::DataLossError(absl::StrCat("stored profile '", name,
                                            "' is unreadable: ", profile.status().message()));
  }
  return profile;
}

absl::Status Store::DeleteProfile(const std::string& name) {
  absl::MutexLock lock(&mu_);
  SPINTUNE_ASSIGN_OR_RETURN(auto q, db_->Prepare("DELETE FROM profiles WHERE name = ?1"));
  q->Bind(1, name);
  SPINTUNE_RETURN_IF_ERROR(q->Run());
  if (db_->Changes() != 1) return absl::NotFoundError(absl::StrCat("no profile '", name, "'"));
  return absl::OkStatus();
}

absl::StatusOr<Profile> Store::SnapshotProfile(int64_t target_id, uint64_t version,
                                               const std::string& name) {
  SPINTUNE_ASSIGN_OR_RETURN(auto table, LoadPolicy(target_id, version));
  Profile p;
  SPINTUNE_ASSIGN_OR_RETURN(p.knobs, LoadKnobSettings(target_id));
  bool knob_only = false;
  if (!table && version == 0) {
    SPINTUNE_ASSIGN_OR_RETURN(auto experiments, ListExperiments(target_id));
    knob_only = !p.knobs.empty() || !experiments.empty();
  }
  if (knob_only) {
    // A target with knob experiments and no policy (a knob-only agent):
    // an empty table of its CPU classes.
    SPINTUNE_ASSIGN_OR_RETURN(TargetRecord target, LoadTarget(target_id));
    table.emplace();
    table->board = target.board;
    for (const auto& c : target.cpu_classes) {
      table->cpu_classes.push_back({c.name, c.cpu_khz, c.declared});
    }
  }
  if (!table) {
    return absl::NotFoundError(version ? absl::StrCat("no policy version ", version)
                                       : std::string("the target has no policy yet"));
  }
  p.table = std::move(*table);
  SPINTUNE_ASSIGN_OR_RETURN(std::vector<KeyEvidence> keys, LoadKeys(target_id));
  // The evidence of the table's classes and devices (a key seen after the
  // fit under a new class has no costs in this table).
  for (auto& k : keys) {
    const bool known_device =
        std::any_of(p.table.devices.begin(), p.table.devices.end(),
                    [&](const DeviceInfo& d) { return d.name == k.key.device; });
    if (known_device && p.table.CpuClassIndex(k.key.cpu_class) >= 0) {
      p.keys.push_back(std::move(k));
    }
  }
  SPINTUNE_ASSIGN_OR_RETURN(p.dispatch, LoadDispatch(target_id));
  SPINTUNE_ASSIGN_OR_RETURN(TargetRecord target, LoadTarget(target_id));
  p.info.name = name;
  p.info.target = target.agent_id;
  p.info.source_version = p.table.version;
  p.info.created_at = NowRfc3339();
  for (const auto& k : p.keys) p.info.samples += k.histogram.total_count();
  for (const auto& e : p.table.entries) p.info.keys += e.fallback ? 0 : 1;
  return p;
}

absl::Status Store::UpdatePolicyEvidence(int64_t target_id, PolicyTable* table) {
  absl::MutexLock lock(&mu_);
  table->fitted_at = NowRfc3339();
  SPINTUNE_ASSIGN_OR_RETURN(
      auto q, db_->Prepare("UPDATE policy_versions SET samples = ?3, table_json = ?4 "
                           "WHERE target_id = ?1 AND version = ?2"));
  q->Bind(1, target_id).Bind(2, I(table->version)).Bind(3, I(table->TotalSamples()));
  q->Bind(4, PolicyTableToJson(*table).dump());
  SPINTUNE_RETURN_IF_ERROR(q->Run());
  if (db_->Changes() != 1) {
    return absl::NotFoundError(absl::StrCat("no policy version ", table->version));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<PolicyTable>> Store::LoadPolicy(int64_t target_id,
                                                             uint64_t version) {
  absl::MutexLock lock(&mu_);
  SPINTUNE_ASSIGN_OR_RETURN(
      auto q, db_->Prepare(version == 0
                               ? "SELECT table_json FROM policy_versions WHERE target_id = ?1 "
                                 "ORDER BY version DESC LIMIT 1"
                               : "SELECT table_json FROM policy_versions WHERE target_id = ?1 "
                                 "AND version = ?2"));
  q->Bind(1, target_id);
  if (version != 0) q->Bind(2, I(version));
  SPINTUNE_ASSIGN_OR_RETURN(bool row, q->Step());
  if (!row) return std::optional<PolicyTable>();
  auto table = ParsePolicyJson(q->ColumnText(0));
  if (!table.ok()) {
    return absl::DataLossError(
        absl::StrCat("stored policy version is unreadable: ", table.status().message()));
  }
  return std::optional<PolicyTable>(std::move(*table));
}

namespace {

std::string Sha256Hex(const std::string& text) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), digest);
  std::string hex;
  for (unsigned char b : digest) absl::StrAppend(&hex, absl::Hex(b, absl::kZeroPad2));
  return hex;
}

}  // namespace

absl::StatusOr<std::string> Store::AddToken(const std::string& name, const std::string& target,
                                            bool admin) {
  if (name.empty() || name.size() > 64) {
    return absl::InvalidArgumentError("token name: 1..64 characters");
  }
  if (admin == !target.empty()) {
    return absl::InvalidArgumentError("a token is either for one target (--target) or --admin");
  }
  unsigned char raw[32];
  if (RAND_bytes(raw, sizeof(raw)) != 1) return absl::InternalError("no random bytes");
  std::string token = "st_";
  for (unsigned char b : raw) absl::StrAppend(&token, absl::Hex(b, absl::kZeroPad2));
  absl::MutexLock lock(&mu_);
  SPINTUNE_ASSIGN_OR_RETURN(
      auto q, db_->Prepare("INSERT INTO tokens (name, sha256, target, admin, created_at) "
                           "VALUES (?1, ?2, ?3, ?4, ?5)"));
  q->Bind(1, name).Bind(2, Sha256Hex(token)).Bind(3, target).Bind(4, int64_t{admin ? 1 : 0});
  q->Bind(5, NowRfc3339());
  absl::Status s = q->Run();
  if (absl::IsAlreadyExists(s)) {
    return absl::AlreadyExistsError(absl::StrCat("a token named '", name, "' exists"));
  }
  SPINTUNE_RETURN_IF_ERROR(s);
  return token;
}

absl::StatusOr<std::vector<TokenRecord>> Store::ListTokens() {
  absl::MutexLock lock(&mu_);
  SPINTUNE_ASSIGN_OR_RETURN(
      auto q, db_->Prepare("SELECT name, target, admin, created_at, revoked_at FROM tokens "
                           "ORDER BY name"));
  std::vector<TokenRecord> out;
  while (true) {
    SPINTUNE_ASSIGN_OR_RETURN(bool row, q->Step());
    if (!row) break;
    out.push_back({q->ColumnText(0), q->ColumnText(1), q->ColumnInt(2) != 0, q->ColumnText(3),
                   q->ColumnText(4)});
  }
  return out;
}

absl::Status Store::RevokeToken(const std::string& name) {
  absl::MutexLock lock(&mu_);
  SPINTUNE_ASSIGN_OR_RETURN(
      auto q, db_->Prepare("UPDATE tokens SET revoked_at = ?2 WHERE name = ?1 AND revoked_at = ''"));
  q->Bind(1, name).Bind(2, NowRfc3339());
  SPINTUNE_RETURN_IF_ERROR(q->Run());
  if (db_->Changes() == 0) {
    return absl::NotFoundError(absl::StrCat("no valid token named '", name, "'"));
  }
  return absl::OkStatus();
}

absl::StatusOr<TokenRecord> Store::LookupToken(const std::string& token) {
  absl::MutexLock lock(&mu_);
  SPINTUNE_ASSIGN_OR_RETURN(
      auto q, db_->Prepare("SELECT name, target, admin, created_at, revoked_at FROM tokens "
                           "WHERE sha256 = ?1 AND revoked_at = ''"));
  q->Bind(1, Sha256Hex(token));
  SPINTUNE_ASSIGN_OR_RETURN(bool row, q->Step());
  if (!row) return absl::NotFoundError("unknown or revoked token");
  return TokenRecord{q->ColumnText(0), q->ColumnText(1), q->ColumnInt(2) != 0, q->ColumnText(3),
                     q->ColumnText(4)};
}

absl::Status Store::CheckIntegrity() {
  absl::MutexLock lock(&mu_);
  SPINTUNE_ASSIGN_OR_RETURN(auto q, db_->Prepare("PRAGMA integrity_check"));
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

}  // namespace spintune
