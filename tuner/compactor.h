// Compactor: folds the batches ingest staged (Store::Compact) into the
// per-key histograms, off the ingest worker, on a thread with its own
// database connection. Ingest stages one row per batch, so its cost does
// not grow with the keys a batch holds; the compactor writes each key once
// per compaction however many batches touched it.
//
// Every `period` it checkpoints the write-ahead log (SQLite; the ingest
// worker's commits leave that to it) and compacts the targets with at least `min_batches` staged
// batches or with one staged longer than `max_age`. Reads include staged
// batches, so compaction never changes what anyone sees.
//
// Every `ledger_prune_period` it also bounds the exactly-once ledger: rows
// older than `store.ledger_retention` go (Store::PruneLedger), in chunks of
// `ledger_chunk_rows` rows, each its own short transaction, for at most one
// `period` of work per round (a backlog continues in the next rounds).
//
// Thread-safety: construct and destroy on one thread; nothing else.
#ifndef SPINTUNE_TUNER_COMPACTOR_H_
#define SPINTUNE_TUNER_COMPACTOR_H_

#include <functional>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "storage/store.h"

namespace spintune {

struct CompactorOptions {
  std::string db_path;
  StoreOptions store;
  uint64_t min_batches = 64;
  absl::Duration max_age = absl::Seconds(30);
  absl::Duration period = absl::Milliseconds(250);
  absl::Duration ledger_prune_period = absl::Seconds(10);
  uint64_t ledger_chunk_rows = 2000;
};

class Compactor {
 public:
  // `on_error` is called (on the compactor's thread) for each failure.
  static absl::StatusOr<std::unique_ptr<Compactor>> Create(
      CompactorOptions options, std::function<void(const absl::Status&)> on_error);
  ~Compactor();

 private:
  Compactor(CompactorOptions options, std::unique_ptr<Store> store,
            std::function<void(const absl::Status&)> on_error);
  void Loop();
  // One round of ledger pruning (see above); false when stopping.
  bool PruneLedger();
  bool Stopping();

  const CompactorOptions options_;
  std::unique_ptr<Store> store_;
  const std::function<void(const absl::Status&)> on_error_;
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // Ledger pruning: where the pass goes on (0: none under way), when the
  // next pass starts. Compactor thread only.
  int64_t prune_from_ = 0;
  absl::Time next_prune_ = absl::InfinitePast();
  std::thread thread_;
};

}  // namespace spintune

#endif  // SPINTUNE_TUNER_COMPACTOR_H_
