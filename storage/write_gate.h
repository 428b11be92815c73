// WriteGate: takes turns among one process's write transactions on one
// SQLite file, so that none waits long for another.
//
// Without it, SQLite's write lock is all that orders them, and a connection
// that finds it taken polls it from its busy handler with sleeps of 1, 2, 5,
// ... up to 100 ms. A connection that commits transactions back to back (the
// tuner's compactor, folding thousands of targets after a fleet's staged
// batches all reach their age at once) takes the lock again in the moment
// between two of them, and the other (the ingest worker, whose commits every
// acknowledgement waits for) misses it poll after poll: acknowledgements
// waited over a second at 3,000 agents (docs/benchmarks.md).
//
// Writers are urgent (the ingest worker) or background (compaction,
// pruning, refits). Turns: a writer enters when nobody is inside and, while
// both kinds wait, the kinds alternate (an urgent writer goes first after a
// background one, and the other way round). So an urgent writer waits at
// most for one background transaction and one urgent one, and background
// writers still get every other turn under continuous ingest. Within a kind
// the order is absl::Mutex's. A connection's write statement outside a
// transaction is one of its own and takes a turn too (SqliteDb).
//
// Only this process's connections that were handed the same gate take
// turns through it; other processes (the CLI) still meet SQLite's lock and
// its busy timeout. Enter() blocks: never call it while inside the gate on
// the same thread (a second connection's transaction inside the first's
// would wait for itself).
//
// Thread-safety: all methods are thread-safe.
#ifndef SPINTUNE_STORAGE_WRITE_GATE_H_
#define SPINTUNE_STORAGE_WRITE_GATE_H_

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace spintune {

enum class WritePriority { kUrgent, kBackground };

class WriteGate {
 public:
  // Blocks until it is this writer's turn; then the gate is held.
  void Enter(WritePriority priority) ABSL_LOCKS_EXCLUDED(mu_);
  // REQUIRES: the caller's Enter() returned and it has not left since.
  void Leave() ABSL_LOCKS_EXCLUDED(mu_);

  // Transactions entered per kind so far, those urgent ones that had to
  // wait and how long they waited in all, how long each kind held the gate
  // in all, and the longest one background transaction held it.
  struct Counts {
    uint64_t urgent = 0;
    uint64_t background = 0;
    uint64_t urgent_waited = 0;
    double urgent_wait_seconds = 0;
    double urgent_held_seconds = 0;
    double background_held_seconds = 0;
    double longest_background_seconds = 0;
  };
  Counts counts() const ABSL_LOCKS_EXCLUDED(mu_);
  // Observers (tests): whether a writer is inside, writers of a kind waiting.
  bool held() const ABSL_LOCKS_EXCLUDED(mu_);
  int waiting(WritePriority priority) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  bool MayEnter(WritePriority priority) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  bool held_ ABSL_GUARDED_BY(mu_) = false;
  // The kind of the last writer that entered: while both kinds wait, the
  // other kind goes next.
  WritePriority last_ ABSL_GUARDED_BY(mu_) = WritePriority::kBackground;
  int urgent_waiting_ ABSL_GUARDED_BY(mu_) = 0;
  int background_waiting_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time entered_ ABSL_GUARDED_BY(mu_);  // when the writer inside entered
  Counts counts_ ABSL_GUARDED_BY(mu_);
};

}  // namespace spintune

#endif  // SPINTUNE_STORAGE_WRITE_GATE_H_
