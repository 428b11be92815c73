// Store: each target's evidence: staged deltas, their compaction into
// per-key and per-window histograms, drift windows, and the reads that see
// both (storage/store.h, SCHEMA.md "Compaction").
#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "storage/delta_codec.h"
#include "storage/histogram_codec.h"
#include "storage/store.h"
#include "storage/store_rows.h"

namespace spintune {
namespace {

using store_rows::I;
using store_rows::KeyAt;
using store_rows::U;
using store_rows::Upsert;

// The upserts compaction runs for every key, window and record it folds.
enum class Put { kHistogram, kWindow, kDispatch, kTimer };
const std::string& UpsertOf(Put table) {
  static const std::string* const kSql = new std::string[4]{
      Upsert("histograms",
             {"key_id", "samples", "errors", "irq_timeouts", "spin_timeouts", "irq_path",
              "spin_path", "buckets"},
             1),
      Upsert("histogram_windows", {"key_id", "\"window\"", "samples", "buckets"}, 2),
      Upsert("dispatch_stats",
             {"target_id", "cpu_class", "device", "samples", "handler_buckets", "wake_buckets"},
             3),
      Upsert("timer_oversleep", {"target_id", "cpu_class", "samples", "buckets"}, 2)};
  return kSql[static_cast<int>(table)];
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

// Adds a staged delta's evidence for one key to `into` (its histogram and
// counts; not its key).
void AddEvidence(const KeyEvidence& delta, KeyEvidence* into) {
  into->histogram.Merge(delta.histogram);
  into->errors += delta.errors;
  into->irq_timeouts += delta.irq_timeouts;
  into->spin_timeouts += delta.spin_timeouts;
  into->irq_path += delta.irq_path;
  into->spin_path += delta.spin_path;
}

}  // namespace

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
      auto put, db_->Cached(UpsertOf(Put::kHistogram)));
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

absl::Status Store::MergeWindows(int64_t key_id,
                                 const std::map<uint64_t, LatencyHistogram>& parts) {
  SPINTUNE_ASSIGN_OR_RETURN(
      auto latest, db_->Cached("SELECT \"window\", buckets FROM histogram_windows WHERE "
                               "key_id = ?1 ORDER BY \"window\" DESC LIMIT 1"));
  latest->Bind(1, key_id);
  SPINTUNE_ASSIGN_OR_RETURN(bool has_row, latest->Step());
  uint64_t row_window = 0;
  LatencyHistogram row;
  if (has_row) {
    row_window = U(latest->ColumnInt(0));
    SPINTUNE_ASSIGN_OR_RETURN(row, DecodeHistogram(latest->ColumnBlob(1)));
  }
  latest->Reset();
  SPINTUNE_ASSIGN_OR_RETURN(auto put, db_->Cached(UpsertOf(Put::kWindow)));
  bool dirty = false;
  auto write = [&]() -> absl::Status {
    if (!dirty) return absl::OkStatus();
    put->Bind(1, key_id).Bind(2, I(row_window)).Bind(3, I(row.total_count()));
    put->BindBlob(4, EncodeHistogram(row));
    return put->Run();
  };
  for (const auto& [window, part] : parts) {
    // (A window before the latest row's cannot come after it; were it to,
    // it is added to that row rather than lost.)
    if (has_row && window > row_window && row.total_count() >= kMinWindowSamples) {
      SPINTUNE_RETURN_IF_ERROR(write());
      row.Clear();
      has_row = false;
    }
    if (!has_row) row_window = window;
    has_row = dirty = true;
    row.Merge(part);
  }
  return write();
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
      auto put, db_->Cached(UpsertOf(Put::kDispatch)));
  put->Bind(1, target_id).Bind(2, delta.cpu_class).Bind(3, delta.device);
  put->Bind(4, I(handler.total_count()));
  put->BindBlob(5, EncodeHistogram(handler)).BindBlob(6, EncodeHistogram(wake));
  return put->Run();
}

absl::StatusOr<uint64_t> Store::ForEachStagedDelta(
    int64_t target_id, const std::function<void(uint64_t, const BatchDelta&)>& fold,
    uint64_t* last_seq) {
  SPINTUNE_ASSIGN_OR_RETURN(
      auto q, db_->Cached("SELECT seq, \"window\", delta FROM pending_deltas WHERE target_id = ?1 "
                          "ORDER BY seq"));
  absl::Cleanup done = [q] { q->Reset(); };
  q->Bind(1, target_id);
  uint64_t n = 0;
  while (true) {
    SPINTUNE_ASSIGN_OR_RETURN(bool row, q->Step());
    if (!row) break;
    SPINTUNE_ASSIGN_OR_RETURN(BatchDelta d, DecodeBatchDelta(q->ColumnBlob(2)));
    d.seq = U(q->ColumnInt(0));
    if (last_seq != nullptr) *last_seq = d.seq;
    fold(U(q->ColumnInt(1)), d);
    ++n;
  }
  return n;
}

// Everything staged, summed per key, per (key, window), per dispatch
// record, per outcome and per timer, to be written once each.
struct Store::StagedFold {
  uint64_t folded = 0;  // staged rows summed
  uint64_t first_seq = 0;
  uint64_t last_seq = 0;
  std::map<PolicyKey, KeyEvidence> keys;
  std::map<PolicyKey, std::map<uint64_t, LatencyHistogram>> windows;  // per key, per window
  std::map<std::pair<std::string, std::string>, DispatchRecord> dispatch;
  std::map<OutcomeId, OutcomeRecord> outcomes;
  std::map<std::string, LatencyHistogram> timers;
};

absl::Status Store::FoldStaged(int64_t target_id, StagedFold* f) {
  *f = StagedFold();
  auto fold = [f](uint64_t window, const BatchDelta& delta) {
    if (f->first_seq == 0) f->first_seq = delta.seq;
    for (const auto& k : delta.keys) {
      KeyEvidence& e = f->keys[k.key];
      e.key = k.key;
      AddEvidence(k, &e);
      f->windows[k.key][window].Merge(k.histogram);
    }
    for (const auto& d : delta.dispatch) {
      DispatchRecord& r = f->dispatch[{d.cpu_class, d.device}];
      r.cpu_class = d.cpu_class;
      r.device = d.device;
      r.handler.Merge(d.handler);
      r.wake.Merge(d.wake);
    }
    MergeOutcomes(window, delta, &f->outcomes);
    for (const auto& t : delta.timers) f->timers[t.cpu_class].Merge(t.oversleep);
  };
  SPINTUNE_ASSIGN_OR_RETURN(f->folded, ForEachStagedDelta(target_id, fold, &f->last_seq));
  return absl::OkStatus();
}

absl::Status Store::WriteFold(int64_t target_id, const StagedFold& f) {
  if (f.folded == 0) return absl::OkStatus();
  std::map<PolicyKey, int64_t> key_ids;
  for (const auto& [key, e] : f.keys) {
    SPINTUNE_ASSIGN_OR_RETURN(key_ids[key], MergeKey(target_id, e));
  }
  for (const auto& [key, parts] : f.windows) {
    SPINTUNE_RETURN_IF_ERROR(MergeWindows(key_ids.at(key), parts));
  }
  for (const auto& [cd, d] : f.dispatch) SPINTUNE_RETURN_IF_ERROR(MergeDispatch(target_id, d));
  for (const auto& [id, o] : f.outcomes) {
    // (CASE, not the two-argument MIN/MAX, which PostgreSQL lacks.)
    SPINTUNE_ASSIGN_OR_RETURN(
        auto put,
        db_->Cached("INSERT INTO outcomes VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, "
                    "?12, ?13, ?14, ?15) ON CONFLICT (target_id, cpu_class, device, opcode, "
                    "size_class, version, arm) DO UPDATE SET requests = outcomes.requests + ?8, "
                    "cpu_ns_sum = outcomes.cpu_ns_sum + ?9, "
                    "latency_ns_sum = outcomes.latency_ns_sum + ?10, "
                    "cpu_ns_sq_sum = outcomes.cpu_ns_sq_sum + ?11, "
                    "latency_ns_sq_sum = outcomes.latency_ns_sq_sum + ?12, "
                    "cpu_latency_ns_sum = outcomes.cpu_latency_ns_sum + ?13, "
                    "first_window = CASE WHEN ?14 < outcomes.first_window THEN ?14 "
                    "ELSE outcomes.first_window END, "
                    "last_window = CASE WHEN ?15 > outcomes.last_window THEN ?15 "
                    "ELSE outcomes.last_window END"));
    const PolicyKey& k = o.key;
    const CostMoments& m = o.moments;
    put->Bind(1, target_id).Bind(2, k.cpu_class).Bind(3, k.device).Bind(4, I(k.opcode));
    put->Bind(5, I(k.size_class)).Bind(6, I(o.version)).Bind(7, static_cast<int64_t>(o.arm));
    put->Bind(8, I(m.requests)).Bind(9, m.cpu_ns_sum).Bind(10, m.latency_ns_sum);
    put->Bind(11, m.cpu_ns_sq_sum).Bind(12, m.latency_ns_sq_sum).Bind(13, m.cpu_latency_ns_sum);
    put->Bind(14, I(o.first_window)).Bind(15, I(o.last_window));
    SPINTUNE_RETURN_IF_ERROR(put->Run());
  }
  for (const auto& [cpu_class, h] : f.timers) {
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
        auto put, db_->Cached(UpsertOf(Put::kTimer)));
    put->Bind(1, target_id).Bind(2, cpu_class).Bind(3, I(merged.total_count()));
    put->BindBlob(4, EncodeHistogram(merged));
    SPINTUNE_RETURN_IF_ERROR(put->Run());
  }
  SPINTUNE_ASSIGN_OR_RETURN(
      auto drop, db_->Cached("DELETE FROM pending_deltas WHERE target_id = ?1 AND seq <= ?2"));
  drop->Bind(1, target_id).Bind(2, I(f.last_seq));
  return drop->Run();
}

absl::StatusOr<uint64_t> Store::Compact(int64_t target_id) {
  absl::MutexLock lock(&mu_);
  // The staged rows are read and summed before the write transaction (in a
  // snapshot of their own, ended when the read is: reading and decoding
  // them is about a third of a compaction, and other writers wait while one
  // holds the write turn).
  StagedFold f;
  SPINTUNE_RETURN_IF_ERROR(FoldStaged(target_id, &f));
  if (f.folded == 0) return 0;
  // Committed without a sync of its own: a compaction lost to a power cut
  // is undone whole (its staged rows are still there, folded again later),
  // and the next synced commit (every ingest commit is) makes it durable.
  // A sync here held the write turn the ingest worker waits for (up to
  // 100 compactions a second in a fleet's compaction wave).
  Transaction tx(db_.get(), CommitSync::kDeferred);
  absl::Cleanup reset = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { db_->ResetCached(); };
  SPINTUNE_RETURN_IF_ERROR(tx.Begin());
  // Still all there? A target's rows are staged once each, in seq order,
  // and only compaction deletes them: if another compaction (drift
  // detection's, another tuner's) folded some meanwhile, sum again inside.
  SPINTUNE_ASSIGN_OR_RETURN(
      auto count, db_->Cached("SELECT COUNT(*) FROM pending_deltas WHERE target_id = ?1 AND "
                              "seq >= ?2 AND seq <= ?3"));
  count->Bind(1, target_id).Bind(2, I(f.first_seq)).Bind(3, I(f.last_seq));
  SPINTUNE_ASSIGN_OR_RETURN(bool row, count->Step());
  const bool intact = row && U(count->ColumnInt(0)) == f.folded;
  count->Reset();
  if (!intact) SPINTUNE_RETURN_IF_ERROR(FoldStaged(target_id, &f));
  SPINTUNE_RETURN_IF_ERROR(WriteFold(target_id, f));
  db_->ResetCached();
  SPINTUNE_RETURN_IF_ERROR(tx.Commit());
  return f.folded;
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
      auto q, db_->Cached("SELECT cpu_class, device, opcode, size_class FROM keys "
                          "WHERE target_id = ?1"));
  absl::Cleanup done = [q] { q->Reset(); };  // (the first batch of every session runs it)
  q->Bind(1, target_id);
  std::vector<PolicyKey> out;
  while (true) {
    SPINTUNE_ASSIGN_OR_RETURN(bool row, q->Step());
    if (!row) break;
    out.push_back(KeyAt(*q, 0));
  }
  std::set<PolicyKey> known(out.begin(), out.end());
  auto add = [&](uint64_t, const BatchDelta& delta) {
    for (const auto& k : delta.keys) {
      if (known.insert(k.key).second) out.push_back(k.key);
    }
  };
  SPINTUNE_RETURN_IF_ERROR(ForEachStagedDelta(target_id, add).status());
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
                                 "\"window\" >= ?2"));
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
  std::map<PolicyKey, size_t> index;
  for (size_t i = 0; i < out.size(); ++i) index[out[i].key] = i;
  auto add = [&](uint64_t, const BatchDelta& delta) {
    for (const auto& d : delta.keys) {
      auto it = index.find(d.key);
      if (it == index.end()) {
        it = index.emplace(d.key, out.size()).first;
        out.push_back(KeyEvidence{d.key, {}, 0, 0, 0, 0, 0});
      }
      AddEvidence(d, &out[it->second]);
    }
  };
  SPINTUNE_ASSIGN_OR_RETURN(uint64_t staged, ForEachStagedDelta(target_id, add));
  if (staged > 0) {
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
  // The windows must hold every batch before they are compared.
  SPINTUNE_RETURN_IF_ERROR(Compact(target_id).status());
  absl::MutexLock lock(&mu_);
  // The windows are read and judged outside a write transaction (decoding
  // and comparing a target's windows takes milliseconds, on the fitter's
  // low-priority thread, while other writers wait for the write turn); the
  // verdicts are written in one afterwards. Meanwhile compaction only adds
  // to windows from the latest read on, and only this target's fitter (it
  // holds the target's lease) moves since_window or prunes.
  struct Verdict {
    int64_t key_id;
    int64_t since_window;  // -1: unchanged
    int64_t keep_from;     // 0: nothing to prune
  };
  std::vector<Verdict> verdicts;
  std::vector<PolicyKey> changed;
  {
    SPINTUNE_ASSIGN_OR_RETURN(
        auto keys, db_->Prepare("SELECT id, cpu_class, device, opcode, size_class, "
                                "since_window FROM keys WHERE target_id = ?1"));
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
    keys->Reset();
    SPINTUNE_ASSIGN_OR_RETURN(
        auto windows, db_->Prepare("SELECT \"window\", buckets FROM histogram_windows WHERE "
                                   "key_id = ?1 AND \"window\" >= ?2 ORDER BY \"window\""));
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
      // The decision is the model's; the store keeps what it says.
      const WindowVerdict v =
          JudgeWindows(parts, k.since, test, min_recent, options_.keep_windows);
      if (v.changed) changed.push_back(k.key);
      if (v.changed || v.keep_from != 0) {
        verdicts.push_back({k.id, v.changed ? v.since : -1, v.keep_from});
      }
    }
  }
  if (verdicts.empty()) return changed;
  Transaction tx(db_.get());
  SPINTUNE_RETURN_IF_ERROR(tx.Begin());
  SPINTUNE_ASSIGN_OR_RETURN(
      auto mark, db_->Prepare("UPDATE keys SET since_window = ?2 WHERE id = ?1"));
  SPINTUNE_ASSIGN_OR_RETURN(
      auto prune,
      db_->Prepare("DELETE FROM histogram_windows WHERE key_id = ?1 AND \"window\" < ?2"));
  for (const Verdict& v : verdicts) {
    if (v.since_window >= 0) {
      mark->Bind(1, v.key_id).Bind(2, v.since_window);
      SPINTUNE_RETURN_IF_ERROR(mark->Run());
    }
    if (v.keep_from == 0) continue;
    prune->Bind(1, v.key_id).Bind(2, v.keep_from);
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
  auto add = [&](uint64_t, const BatchDelta& delta) {
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
  };
  SPINTUNE_ASSIGN_OR_RETURN(uint64_t staged, ForEachStagedDelta(target_id, add));
  if (staged > 0) {
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
  auto add = [&](uint64_t window, const BatchDelta& delta) { MergeOutcomes(window, delta, &all); };
  SPINTUNE_RETURN_IF_ERROR(ForEachStagedDelta(target_id, add).status());
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
  auto add = [&](uint64_t, const BatchDelta& delta) {
    for (const auto& t : delta.timers) all[t.cpu_class].Merge(t.oversleep);
  };
  SPINTUNE_RETURN_IF_ERROR(ForEachStagedDelta(target_id, add).status());
  std::vector<TimerRecord> out;
  for (auto& [cpu_class, h] : all) out.push_back({cpu_class, std::move(h)});
  return out;
}

}  // namespace spintune
