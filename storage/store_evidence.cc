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
#include "models/histogram_sum.h"
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

// Adds a staged delta's counts for one key to `into` (not its histogram,
// not its key).
void AddCounters(const KeyEvidence& delta, KeyEvidence* into) {
  into->errors += delta.errors;
  into->irq_timeouts += delta.irq_timeouts;
  into->spin_timeouts += delta.spin_timeouts;
  into->irq_path += delta.irq_path;
  into->spin_path += delta.spin_path;
}

// Histogram deltas of one sum, kept and then added in one pass
// (HistogramSum): a LatencyHistogram::Merge() per delta copied the whole sum
// each time (most of a compaction's fold, and of the staged part of
// LoadKeys).
class PendingSum {
 public:
  // At most this many deltas are kept (then added): memory stays bounded
  // however small the batches.
  static constexpr size_t kMaxParts = 64;

  // Adds `part` to `*into`, now or at the latest in Flush(into).
  void Add(LatencyHistogram part, LatencyHistogram* into, HistogramSum* sum) {
    parts_.push_back(std::move(part));
    if (parts_.size() == kMaxParts) Flush(into, sum);
  }
  // Adds every part kept to `*into`.
  void Flush(LatencyHistogram* into, HistogramSum* sum) {
    if (parts_.empty()) return;
    if (into->empty() && parts_.size() == 1) {  // (a key with a delta per window: most)
      *into = std::move(parts_[0]);
    } else {
      sum->Add(*into);
      for (const auto& part : parts_) sum->Add(part);
      *into = sum->Take();
    }
    parts_.clear();
  }

 private:
  std::vector<LatencyHistogram> parts_;
};

// A key being folded: its sums and the window its deltas are in now.
// Windows rise with seq (a row's window is its target's sample count when
// it was staged), so a window's deltas are summed once the next begins.
struct FoldingKey {
  KeyEvidence* evidence = nullptr;                          // the key's sums
  std::map<uint64_t, LatencyHistogram>* windows = nullptr;  // the key's windows
  LatencyHistogram* window_sum = nullptr;                   // in `windows`
  uint64_t window = 0;
  PendingSum pending;  // for *window_sum
};

}  // namespace

absl::StatusOr<uint64_t> Store::ForEachStagedDelta(
    int64_t target_id, const std::function<void(uint64_t, BatchDelta&)>& fold,
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
  std::map<PolicyKey, KeyEvidence> keys;  // counts (the histograms are in `windows`)
  std::map<PolicyKey, std::map<uint64_t, LatencyHistogram>> windows;  // per key, per window
  std::map<std::pair<std::string, std::string>, DispatchRecord> dispatch;
  std::map<OutcomeId, OutcomeRecord> outcomes;
  std::map<std::string, LatencyHistogram> timers;

  // The rows to write: the sums above added to the stored rows and
  // encoded (ReadRows()), so that the write turn only writes them.
  struct WindowRow {
    uint64_t window = 0;
    uint64_t samples = 0;
    std::string buckets;
  };
  struct KeyRows {
    PolicyKey key;
    int64_t key_id = 0;  // 0: a new key, inserted in the write turn
    KeyEvidence counters;  // the stored counters plus the staged ones (no histogram)
    uint64_t samples = 0;
    std::string buckets;
    std::vector<WindowRow> windows;
  };
  struct DispatchRow {
    const DispatchRecord* sums = nullptr;  // for its cpu_class and device
    uint64_t samples = 0;
    std::string handler, wake;
  };
  struct TimerRow {
    std::string cpu_class;
    uint64_t samples = 0;
    std::string buckets;
  };
  std::vector<KeyRows> key_rows;
  std::vector<DispatchRow> dispatch_rows;
  std::vector<TimerRow> timer_rows;
};

absl::Status Store::FoldStaged(int64_t target_id, StagedFold* f) {
  *f = StagedFold();
  // (A key's total is the sum of its windows: ReadRows takes it.)
  std::map<PolicyKey, FoldingKey> folding;
  // The previous delta's keys in its order: an agent sends its keys in the
  // same order every batch, so most lookups are one comparison.
  std::vector<FoldingKey*> by_position;
  HistogramSum sum;
  auto fold = [&](uint64_t window, BatchDelta& delta) {
    if (f->first_seq == 0) f->first_seq = delta.seq;
    for (size_t i = 0; i < delta.keys.size(); ++i) {
      KeyEvidence& k = delta.keys[i];
      FoldingKey* o = i < by_position.size() ? by_position[i] : nullptr;
      if (o == nullptr || !(o->evidence->key == k.key)) {
        auto [it, added] = folding.try_emplace(k.key);
        o = &it->second;
        if (added) {
          o->evidence = &f->keys[k.key];
          o->evidence->key = k.key;
          o->windows = &f->windows[k.key];
          o->window = window;
          o->window_sum = &(*o->windows)[window];
        }
        if (i >= by_position.size()) by_position.resize(i + 1);
        by_position[i] = o;
      }
      AddCounters(k, o->evidence);
      if (o->window != window) {
        o->pending.Flush(o->window_sum, &sum);
        o->window = window;
        o->window_sum = &(*o->windows)[window];
      }
      o->pending.Add(std::move(k.histogram), o->window_sum, &sum);
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
  for (auto& [key, o] : folding) o.pending.Flush(o.window_sum, &sum);
  return absl::OkStatus();
}

absl::Status Store::ReadRows(int64_t target_id, StagedFold* f) {
  HistogramSum sum;
  SPINTUNE_ASSIGN_OR_RETURN(
      auto find,
      db_->Cached("SELECT k.id, h.samples, h.errors, h.irq_timeouts, h.spin_timeouts, "
                  "h.irq_path, h.spin_path, h.buckets FROM keys k LEFT JOIN histograms h "
                  "ON h.key_id = k.id WHERE k.target_id = ?1 AND k.cpu_class = ?2 AND "
                  "k.device = ?3 AND k.opcode = ?4 AND k.size_class = ?5"));
  SPINTUNE_ASSIGN_OR_RETURN(
      auto latest, db_->Cached("SELECT \"window\", buckets FROM histogram_windows WHERE "
                               "key_id = ?1 ORDER BY \"window\" DESC LIMIT 1"));
  for (const auto& [key, staged] : f->keys) {
    StagedFold::KeyRows& r = f->key_rows.emplace_back();
    r.key = key;
    AddCounters(staged, &r.counters);
    find->Bind(1, target_id).Bind(2, key.cpu_class).Bind(3, key.device);
    find->Bind(4, I(key.opcode)).Bind(5, I(key.size_class));
    SPINTUNE_ASSIGN_OR_RETURN(bool found, find->Step());
    if (found) {
      r.key_id = find->ColumnInt(0);
      if (!find->ColumnIsNull(1)) {
        SPINTUNE_ASSIGN_OR_RETURN(LatencyHistogram stored, DecodeHistogram(find->ColumnBlob(7)));
        sum.Add(stored);
        r.counters.errors += U(find->ColumnInt(2));
        r.counters.irq_timeouts += U(find->ColumnInt(3));
        r.counters.spin_timeouts += U(find->ColumnInt(4));
        r.counters.irq_path += U(find->ColumnInt(5));
        r.counters.spin_path += U(find->ColumnInt(6));
      }
    }
    find->Reset();
    const std::map<uint64_t, LatencyHistogram>& windows = f->windows.at(key);
    for (const auto& [window, part] : windows) sum.Add(part);
    const LatencyHistogram total = sum.Take();
    r.samples = total.total_count();
    r.buckets = EncodeHistogram(total);

    // Window rows: the key's latest row grows until it holds
    // kMinWindowSamples, then a row starts at the next window.
    bool has_row = false;
    uint64_t row_window = 0;
    if (r.key_id != 0) {
      latest->Bind(1, r.key_id);
      SPINTUNE_ASSIGN_OR_RETURN(has_row, latest->Step());
      if (has_row) {
        row_window = U(latest->ColumnInt(0));
        SPINTUNE_ASSIGN_OR_RETURN(LatencyHistogram stored,
                                  DecodeHistogram(latest->ColumnBlob(1)));
        sum.Add(stored);
      }
      latest->Reset();
    }
    bool dirty = false;
    auto close_row = [&] {
      const LatencyHistogram row = sum.Take();
      if (dirty) r.windows.push_back({row_window, row.total_count(), EncodeHistogram(row)});
    };
    for (const auto& [window, part] : windows) {
      // (A window before the latest row's cannot come after it; were it to,
      // it is added to that row rather than lost.)
      if (has_row && window > row_window && sum.total_count() >= kMinWindowSamples) {
        close_row();
        has_row = false;
      }
      if (!has_row) row_window = window;
      has_row = dirty = true;
      sum.Add(part);
    }
    close_row();
  }

  SPINTUNE_ASSIGN_OR_RETURN(
      auto find_dispatch,
      db_->Cached("SELECT handler_buckets, wake_buckets FROM dispatch_stats "
                  "WHERE target_id = ?1 AND cpu_class = ?2 AND device = ?3"));
  for (const auto& [cd, d] : f->dispatch) {
    find_dispatch->Bind(1, target_id).Bind(2, d.cpu_class).Bind(3, d.device);
    SPINTUNE_ASSIGN_OR_RETURN(bool found, find_dispatch->Step());
    LatencyHistogram handler, wake;
    if (found) {
      SPINTUNE_ASSIGN_OR_RETURN(handler, DecodeHistogram(find_dispatch->ColumnBlob(0)));
      SPINTUNE_ASSIGN_OR_RETURN(wake, DecodeHistogram(find_dispatch->ColumnBlob(1)));
    }
    find_dispatch->Reset();
    handler.Merge(d.handler);
    wake.Merge(d.wake);
    f->dispatch_rows.push_back(
        {&d, handler.total_count(), EncodeHistogram(handler), EncodeHistogram(wake)});
  }

  SPINTUNE_ASSIGN_OR_RETURN(
      auto find_timer, db_->Cached("SELECT buckets FROM timer_oversleep WHERE target_id = ?1 AND "
                                   "cpu_class = ?2"));
  for (const auto& [cpu_class, h] : f->timers) {
    find_timer->Bind(1, target_id).Bind(2, cpu_class);
    SPINTUNE_ASSIGN_OR_RETURN(bool found, find_timer->Step());
    LatencyHistogram merged;
    if (found) {
      SPINTUNE_ASSIGN_OR_RETURN(merged, DecodeHistogram(find_timer->ColumnBlob(0)));
    }
    find_timer->Reset();
    merged.Merge(h);
    f->timer_rows.push_back({cpu_class, merged.total_count(), EncodeHistogram(merged)});
  }
  return absl::OkStatus();
}

absl::Status Store::WriteFold(int64_t target_id, const StagedFold& f) {
  if (f.folded == 0) return absl::OkStatus();
  SPINTUNE_ASSIGN_OR_RETURN(
      auto insert_key,
      db_->Cached("INSERT INTO keys(target_id, cpu_class, device, opcode, size_class) "
                  "VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT DO NOTHING"));
  SPINTUNE_ASSIGN_OR_RETURN(
      auto key_id_of, db_->Cached("SELECT id FROM keys WHERE target_id = ?1 AND cpu_class = ?2 "
                                  "AND device = ?3 AND opcode = ?4 AND size_class = ?5"));
  SPINTUNE_ASSIGN_OR_RETURN(auto put_histogram, db_->Cached(UpsertOf(Put::kHistogram)));
  SPINTUNE_ASSIGN_OR_RETURN(auto put_window, db_->Cached(UpsertOf(Put::kWindow)));
  for (const auto& r : f.key_rows) {
    int64_t key_id = r.key_id;
    if (key_id == 0) {
      const PolicyKey& k = r.key;
      insert_key->Bind(1, target_id).Bind(2, k.cpu_class).Bind(3, k.device);
      insert_key->Bind(4, I(k.opcode)).Bind(5, I(k.size_class));
      SPINTUNE_RETURN_IF_ERROR(insert_key->Run());
      key_id_of->Bind(1, target_id).Bind(2, k.cpu_class).Bind(3, k.device);
      key_id_of->Bind(4, I(k.opcode)).Bind(5, I(k.size_class));
      SPINTUNE_ASSIGN_OR_RETURN(bool found, key_id_of->Step());
      if (!found) return absl::InternalError("key vanished during merge");
      key_id = key_id_of->ColumnInt(0);
      key_id_of->Reset();
    }
    const KeyEvidence& c = r.counters;
    put_histogram->Bind(1, key_id).Bind(2, I(r.samples)).Bind(3, I(c.errors));
    put_histogram->Bind(4, I(c.irq_timeouts)).Bind(5, I(c.spin_timeouts));
    put_histogram->Bind(6, I(c.irq_path)).Bind(7, I(c.spin_path)).BindBlob(8, r.buckets);
    SPINTUNE_RETURN_IF_ERROR(put_histogram->Run());
    for (const auto& w : r.windows) {
      put_window->Bind(1, key_id).Bind(2, I(w.window)).Bind(3, I(w.samples));
      put_window->BindBlob(4, w.buckets);
      SPINTUNE_RETURN_IF_ERROR(put_window->Run());
    }
  }
  SPINTUNE_ASSIGN_OR_RETURN(auto put_dispatch, db_->Cached(UpsertOf(Put::kDispatch)));
  for (const auto& d : f.dispatch_rows) {
    put_dispatch->Bind(1, target_id).Bind(2, d.sums->cpu_class).Bind(3, d.sums->device);
    put_dispatch->Bind(4, I(d.samples)).BindBlob(5, d.handler).BindBlob(6, d.wake);
    SPINTUNE_RETURN_IF_ERROR(put_dispatch->Run());
  }
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
  SPINTUNE_ASSIGN_OR_RETURN(auto put_timer, db_->Cached(UpsertOf(Put::kTimer)));
  for (const auto& t : f.timer_rows) {
    put_timer->Bind(1, target_id).Bind(2, t.cpu_class).Bind(3, I(t.samples));
    put_timer->BindBlob(4, t.buckets);
    SPINTUNE_RETURN_IF_ERROR(put_timer->Run());
  }
  SPINTUNE_ASSIGN_OR_RETURN(
      auto drop, db_->Cached("DELETE FROM pending_deltas WHERE target_id = ?1 AND seq <= ?2"));
  drop->Bind(1, target_id).Bind(2, I(f.last_seq));
  return drop->Run();
}

absl::StatusOr<uint64_t> Store::Compact(int64_t target_id) {
  absl::MutexLock lock(&mu_);
  // The staged rows are read and summed, and the stored rows they add to
  // read, summed with them and encoded, before the write transaction:
  // other writers wait while one holds the write turn, and all that is
  // most of a compaction. The turn only writes.
  StagedFold f;
  SPINTUNE_RETURN_IF_ERROR(FoldStaged(target_id, &f));
  if (f.folded == 0) return 0;
  SPINTUNE_RETURN_IF_ERROR(ReadRows(target_id, &f));
  // Committed without a sync of its own: a compaction lost to a power cut
  // is undone whole (its staged rows are still there, folded again later),
  // and the next synced commit (every ingest commit is) makes it durable.
  // A sync here held the write turn the ingest worker waits for (up to
  // 100 compactions a second in a fleet's compaction wave).
  Transaction tx(db_.get(), CommitSync::kDeferred);
  absl::Cleanup reset = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { db_->ResetCached(); };
  SPINTUNE_RETURN_IF_ERROR(tx.Begin());
  // One compaction of a target at a time, whichever process runs it:
  // another tuner's on the same PostgreSQL database waits here until this
  // one commits, then finds its rows folded below (without the lock both
  // passed the check below at READ COMMITTED and both wrote, adding the
  // outcomes twice). SQLite's Begin() already let one writer in.
  SPINTUNE_RETURN_IF_ERROR(db_->LockTargetForTransaction(target_id));
  // Still all there? A target's rows are staged once each, in seq order,
  // and only compaction deletes them: if another compaction (drift
  // detection's, another tuner's) folded some meanwhile, sum and read again
  // inside. If none did, the rows read are as they were: only a compaction
  // of the target writes them (it deletes every row it folds, so one that
  // committed since then took some of these), and drift detection's pruning
  // never deletes a key's latest window row.
  SPINTUNE_ASSIGN_OR_RETURN(
      auto count, db_->Cached("SELECT COUNT(*) FROM pending_deltas WHERE target_id = ?1 AND "
                              "seq >= ?2 AND seq <= ?3"));
  count->Bind(1, target_id).Bind(2, I(f.first_seq)).Bind(3, I(f.last_seq));
  SPINTUNE_ASSIGN_OR_RETURN(bool row, count->Step());
  const bool intact = row && U(count->ColumnInt(0)) == f.folded;
  count->Reset();
  if (!intact) {
    SPINTUNE_RETURN_IF_ERROR(FoldStaged(target_id, &f));
    SPINTUNE_RETURN_IF_ERROR(ReadRows(target_id, &f));
  }
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
  ReadSnapshot snapshot(db_.get());  // the compacted rows and the staged ones of one moment
  SPINTUNE_RETURN_IF_ERROR(snapshot.Begin());
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
  ReadSnapshot snapshot(db_.get());  // the compacted rows and the staged ones of one moment
  SPINTUNE_RETURN_IF_ERROR(snapshot.Begin());
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
  std::vector<PendingSum> pending(out.size());
  HistogramSum sum;
  auto add = [&](uint64_t, BatchDelta& delta) {
    for (auto& d : delta.keys) {
      auto it = index.find(d.key);
      if (it == index.end()) {
        it = index.emplace(d.key, out.size()).first;
        out.push_back(KeyEvidence{d.key, {}, 0, 0, 0, 0, 0});
        pending.emplace_back();
      }
      KeyEvidence& e = out[it->second];
      AddCounters(d, &e);
      pending[it->second].Add(std::move(d.histogram), &e.histogram, &sum);
    }
  };
  SPINTUNE_ASSIGN_OR_RETURN(uint64_t staged, ForEachStagedDelta(target_id, add));
  for (size_t i = 0; i < out.size(); ++i) pending[i].Flush(&out[i].histogram, &sum);
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
    int64_t since_window;     // -1: unchanged
    int64_t changed_through;
    int64_t keep_from;        // 0: nothing to prune
  };
  std::vector<Verdict> verdicts;
  std::vector<PolicyKey> changed;
  {
    SPINTUNE_ASSIGN_OR_RETURN(
        auto keys, db_->Prepare("SELECT id, cpu_class, device, opcode, size_class, "
                                "since_window, changed_through FROM keys WHERE target_id = ?1"));
    keys->Bind(1, target_id);
    struct Key {
      int64_t id;
      PolicyKey key;
      int64_t since;
      int64_t changed_through;
    };
    std::vector<Key> all;
    while (true) {
      SPINTUNE_ASSIGN_OR_RETURN(bool row, keys->Step());
      if (!row) break;
      all.push_back({keys->ColumnInt(0),
                     {keys->ColumnText(1), keys->ColumnText(2),
                      static_cast<uint32_t>(keys->ColumnInt(3)),
                      static_cast<uint32_t>(keys->ColumnInt(4))},
                     keys->ColumnInt(5), keys->ColumnInt(6)});
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
      const WindowVerdict v = JudgeWindows(parts, k.since, k.changed_through, test, min_recent,
                                           options_.keep_windows);
      // A refined change moves the evidence on but is the last one again.
      if (v.changed && !v.refined) changed.push_back(k.key);
      if (v.changed || v.keep_from != 0) {
        verdicts.push_back({k.id, v.changed ? v.since : -1, v.through, v.keep_from});
      }
    }
  }
  if (verdicts.empty()) return changed;
  Transaction tx(db_.get());
  SPINTUNE_RETURN_IF_ERROR(tx.Begin());
  SPINTUNE_ASSIGN_OR_RETURN(
      auto mark,
      db_->Prepare("UPDATE keys SET since_window = ?2, changed_through = ?3 WHERE id = ?1"));
  SPINTUNE_ASSIGN_OR_RETURN(
      auto prune,
      db_->Prepare("DELETE FROM histogram_windows WHERE key_id = ?1 AND \"window\" < ?2"));
  for (const Verdict& v : verdicts) {
    if (v.since_window >= 0) {
      mark->Bind(1, v.key_id).Bind(2, v.since_window).Bind(3, v.changed_through);
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
  ReadSnapshot snapshot(db_.get());  // the compacted rows and the staged ones of one moment
  SPINTUNE_RETURN_IF_ERROR(snapshot.Begin());
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
  ReadSnapshot snapshot(db_.get());  // the compacted rows and the staged ones of one moment
  SPINTUNE_RETURN_IF_ERROR(snapshot.Begin());
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
  ReadSnapshot snapshot(db_.get());  // the compacted rows and the staged ones of one moment
  SPINTUNE_RETURN_IF_ERROR(snapshot.Begin());
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
