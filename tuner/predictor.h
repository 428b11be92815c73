// Predictor: cold-start tables for new targets, off the tuner's worker.
//
// Predicting a table reads every other target's evidence (time proportional
// to all stored keys), so it must not hold up a Hello or anyone's ingest: a
// background thread with its own read-only connection to the database
// computes it; the tuner stores and pushes the result on its worker if the
// target still has no table by then. The other targets' evidence is cached:
// a target is loaded when it first has samples and reloaded when its sample
// count changed, at most once per `evidence_ttl`.
//
// Thread-safety: Request() from any thread; `deliver` runs on the
// predictor's thread.
#ifndef SPINTUNE_TUNER_PREDICTOR_H_
#define SPINTUNE_TUNER_PREDICTOR_H_

#include <condition_variable>
#include <deque>
#include <map>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "policy/cold_start.h"
#include "storage/store.h"

namespace spintune {

class Predictor {
 public:
  // `deliver(target_id, table)` receives each prediction (NotFound when no
  // other board shares a device with it).
  using Deliver = std::function<void(int64_t, absl::StatusOr<PolicyTable>)>;
  // `db_path`: the tuner's database (":memory:" cannot be shared: every
  // request is answered NotFound).
  Predictor(std::string db_path, FitConfig fit, Deliver deliver,
            absl::Duration evidence_ttl = absl::Seconds(30));
  ~Predictor();

  // Asks for a table for `target` (a no-op while one is pending for it).
  void Request(int64_t target_id, TargetRecord target);

 private:
  void Loop();
  absl::Status LoadEvidence();

  const std::string db_path_;
  const FitConfig fit_;
  const Deliver deliver_;
  const absl::Duration evidence_ttl_;
  std::unique_ptr<Store> store_;  // predictor thread only
  struct Cached {
    uint64_t total_samples = 0;
    absl::Time loaded_at;
    size_t index = 0;  // into evidence_
  };
  std::map<int64_t, Cached> cache_;      // predictor thread only
  std::vector<BoardEvidence> evidence_;  // targets with samples

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::deque<std::pair<int64_t, TargetRecord>> requests_;
  std::set<int64_t> pending_;
  std::thread thread_;
};

}  // namespace spintune

#endif  // SPINTUNE_TUNER_PREDICTOR_H_
