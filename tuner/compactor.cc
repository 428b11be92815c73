#include "tuner/compactor.h"

#include <pthread.h>

#include "common/status_macros.h"

namespace spintune {

absl::StatusOr<std::unique_ptr<Compactor>> Compactor::Create(
    CompactorOptions options, std::function<void(const absl::Status&)> on_error) {
  StoreOptions store_options = options.store;
  store_options.reserve_bytes = 0;  // the tuner's own connection keeps it
  // Checkpoints run between compactions (Loop), not inside a commit: a
  // commit's checkpoint would hold the write gate (storage/write_gate.h)
  // the ingest worker waits at.
  store_options.commit_checkpoints = false;
  SPINTUNE_ASSIGN_OR_RETURN(auto store, Store::Open(options.db_path, store_options));
  return std::unique_ptr<Compactor>(
      new Compactor(std::move(options), std::move(store), std::move(on_error)));
}

Compactor::Compactor(CompactorOptions options, std::unique_ptr<Store> store,
                     std::function<void(const absl::Status&)> on_error)
    : options_(std::move(options)), store_(std::move(store)), on_error_(std::move(on_error)) {
  thread_ = std::thread([this] { Loop(); });
}

Compactor::~Compactor() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

void Compactor::Loop() {
  pthread_setname_np(pthread_self(), "compactor");
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(&stop_), options_.period);
      if (stop_) return;
    }
    // The ingest worker's commits leave the write-ahead log to this thread
    // (TunerCore): checkpointed every period, and between compactions.
    absl::Time checkpointed = absl::Now();
    if (absl::Status s = store_->Checkpoint(); !s.ok()) on_error_(s);
    auto targets = store_->TargetsToCompact(options_.min_batches, options_.max_age);
    if (!targets.ok()) {
      on_error_(targets.status());
      continue;
    }
    for (int64_t target : *targets) {
      if (Stopping()) return;
      auto folded = store_->Compact(target);
      if (!folded.ok()) on_error_(folded.status());
      if (absl::Now() - checkpointed > options_.period) {
        checkpointed = absl::Now();
        if (absl::Status s = store_->Checkpoint(); !s.ok()) on_error_(s);
      }
    }
    if (!PruneLedger()) return;
  }
}

bool Compactor::Stopping() {
  absl::MutexLock lock(&mu_);
  return stop_;
}

bool Compactor::PruneLedger() {
  const absl::Duration retention = options_.store.ledger_retention;
  const absl::Time start = absl::Now();
  if (retention <= absl::ZeroDuration() || (prune_from_ == 0 && start < next_prune_)) return true;
  if (prune_from_ == 0) next_prune_ = start + options_.ledger_prune_period;
  do {
    if (Stopping()) return false;
    auto pruned = store_->PruneLedger(absl::Now() - retention, options_.ledger_chunk_rows,
                                      prune_from_);
    if (!pruned.ok()) {
      on_error_(pruned.status());
      prune_from_ = 0;
      break;
    }
    prune_from_ = pruned->next_target;
  } while (prune_from_ != 0 && absl::Now() - start < options_.period);
  return true;
}

}  // namespace spintune
