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

  const CompactorOptions options_;
  std::unique_ptr<Store> store_;
  const std::function<void(const absl::Status&)> on_error_;
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace spintune

#endif  // SPINTUNE_TUNER_COMPACTOR_H_
