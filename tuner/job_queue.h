// JobQueue: the tuner worker's queue, fair across agent streams.
//
// Each stream's jobs run in the order they were posted. Streams take turns
// (round robin), so one stream flooding the queue (batches, drains, hellos)
// delays another by at most one turn; work without a stream (admin RPCs,
// stream ends, background results) takes every other turn. Batch jobs are
// handed out in groups (for one SQLite commit): up to `kQuantum` consecutive
// batches of each stream in turn, within the group limits (batches, and
// bytes as queued: batches are decoded before they are queued, so what the
// commit costs grows with a batch's decoded size, not its samples). The
// bytes of queued batches are tracked for the tuner's memory bound.
//
// Thread-safety: all methods are thread-safe.
#ifndef SPINTUNE_TUNER_JOB_QUEUE_H_
#define SPINTUNE_TUNER_JOB_QUEUE_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "spintune/v1/spintune.pb.h"
#include "storage/store.h"
#include "tuner/session_handle.h"

namespace spintune {

struct TunerJob {
  std::shared_ptr<SessionHandle> session;  // null: not a stream's job
  std::function<void()> run;               // empty: a batch job
  // Batch jobs: the batch's seq alone (a placeholder: the whole batch, for
  // the worker's checks), what decoding it on the receiving thread gave,
  // and its fingerprint.
  v1::SampleBatch batch;
  uint64_t samples = 0;  // completion samples the batch held
  // Decoded, then its histograms dropped: staged_delta holds them.
  absl::StatusOr<BatchDelta> delta = absl::UnknownError("not decoded");
  std::string staged_delta;  // EncodeBatchDelta(*delta), as the store stages it
  uint64_t fingerprint = 0;         // version 2 (SequencedBatch)
  uint64_t legacy_fingerprint = 0;  // version 1, for a possible resend; 0: none
  std::function<void()> done;  // runs after the job (may be empty)
  absl::Time received = absl::Now();
  uint64_t bytes = 0;  // of the batch as received
  bool is_batch() const { return !run; }
};

class JobQueue {
 public:
  static constexpr size_t kQuantum = 8;
  // One fsync for up to this many batches: a fleet of small histogram
  // batches is bound by commits per second, not by the bytes they carry.
  static constexpr size_t kMaxGroupBatches = 256;
  static constexpr uint64_t kMaxGroupBytes = 8ull << 20;

  void Push(TunerJob job);
  // The next unit of work, waiting up to `timeout`: one job, or a group of
  // batch jobs. Empty on timeout or once Stop() was called.
  std::vector<TunerJob> Next(absl::Duration timeout);
  // Wakes Next() and makes it return empty from now on.
  void Stop();
  // Everything still queued (after Stop()).
  std::vector<TunerJob> TakeAll();
  bool stopped() const;
  uint64_t queued_bytes() const;
  size_t queued_jobs() const;

 private:
  std::vector<TunerJob> NextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  std::map<const SessionHandle*, std::deque<TunerJob>> streams_ ABSL_GUARDED_BY(mu_);
  // Streams with jobs, in turn order.
  std::deque<const SessionHandle*> ring_ ABSL_GUARDED_BY(mu_);
  std::deque<TunerJob> other_ ABSL_GUARDED_BY(mu_);
  bool other_turn_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  size_t jobs_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace spintune

#endif  // SPINTUNE_TUNER_JOB_QUEUE_H_
