// Fitter: the tuner's fits, off its ingest worker.
//
// A refit (drift detection, loading a target's evidence, fitting every key)
// and a cold-start prediction (reading every other target's evidence) take
// time in proportion to what the database holds. Done on the worker they
// held up every agent's acks. The fitter runs them one at a time on a thread
// of its own (at nice 10: ingest comes first) with its own connection to
// the database, stores the versions
// they produce, and hands each result back through `deliver` (the tuner
// posts it to its worker, which pushes tables and answers drains).
//
// A request for a target that already has one of the same kind waiting
// merges into it (a forced one stays forced); a Sync merges into the
// target's last waiting request of any kind, so its result comes after
// everything queued for the target. Each request returns a ticket that the
// result of the request covering it carries. Requests run in order, so a
// drain's fit comes after the target's cold-start prediction.
//
// Requests run within FitterOptions::max_cpu_share of a core, unless a
// drain waits for one that is queued.
//
// Cold start: the other targets' evidence is kept as the sums of
// policy/cold_start_evidence.h, so a prediction costs the same in a fleet of
// 10,000 targets as among three; a target is loaded when it first has
// samples and reloaded when its sample count changed, at most once per
// TunerOptions::evidence_ttl. The list of targets with samples is read again
// for a prediction unless the last read is younger than ten times what it
// took (a tenth of the fitter's time at most, in a fleet). A prediction
// loads targets for at most 50 ms and predicts from what is loaded: in a
// fleet whose agents all arrive at once the first tables come from part of
// the fleet, and none waits for all of it to load.
//
// Thread-safety: Predict(), Refit() and Sync() from any thread; `deliver`
// runs on the fitter's thread.
#ifndef SPINTUNE_TUNER_FITTER_H_
#define SPINTUNE_TUNER_FITTER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "models/change_detector.h"
#include "policy/cold_start_evidence.h"
#include "policy/policy_builder.h"
#include "storage/store.h"
#include "tuner/verifier.h"

namespace spintune {

struct FitterOptions {
  std::string db_path;
  StoreOptions store;
  FitConfig fit;
  ChangeTest change;
  absl::Duration evidence_ttl = absl::Seconds(30);
  VerifierOptions verify;
  // Most of one core the fitter's deferrable requests (refits not forced,
  // predictions, verifications) may take: after one that took t of CPU,
  // the next waits t * (1 / max_cpu_share - 1). Drains (forced refits,
  // syncs) never wait. A fleet asks for more fits than a core can run; the
  // share keeps them from crowding out ingest on a small machine.
  double max_cpu_share = 0.25;
};

struct FitResult {
  int64_t target_id = 0;
  uint64_t ticket = 0;
  bool fitted = false;        // a refit ran (not skipped: too few samples, pinned)
  bool predicted = false;     // a cold-start table was stored
  std::vector<VerificationRecord> verified;  // verdicts decided by a verify
  std::vector<PolicyKey> released;           // held keys a refit released
  uint64_t changes_detected = 0;
  // The version stored (fitted or predicted), to push; nullopt: none.
  std::optional<PolicyTable> stored;
  absl::Status status;  // storage errors (logged by the fitter)
};

class Fitter {
 public:
  // Opens its own connection to options.db_path (a file: ":memory:" is not
  // shared between connections, InvalidArgument).
  static absl::StatusOr<std::unique_ptr<Fitter>> Create(FitterOptions options,
                                                        std::function<void(FitResult)> deliver);
  // Finishes the request it is on; drops the rest.
  ~Fitter();

  // A cold-start table for `target` if it has none when the request runs.
  uint64_t Predict(int64_t target_id, TargetRecord target);
  // Refit `target_id` (force: even below FitConfig::min_samples).
  uint64_t Refit(int64_t target_id, bool force);
  // Nothing to fit: a ticket delivered after every earlier request of the
  // target (a drain that found nothing new).
  uint64_t Sync(int64_t target_id);
  // Verify the target's applied version against measured outcomes
  // (tuner/verifier.h); a rollback comes back as the result's `stored`.
  uint64_t Verify(int64_t target_id);

 private:
  enum class Kind { kSync, kRefit, kPredict, kVerify };
  struct Request {
    int64_t target_id;
    Kind kind;
    bool force = false;
    TargetRecord record;  // kPredict
    uint64_t ticket;
    bool urgent = false;  // a drain waits for it: never deferred
  };
  Fitter(FitterOptions options, std::unique_ptr<Store> store,
         std::function<void(FitResult)> deliver);
  uint64_t Enqueue(Request request) ABSL_LOCKS_EXCLUDED(mu_);
  // A request that may wait for the fitter's CPU share.
  static bool Deferrable(const Request& r);
  void Loop() ABSL_LOCKS_EXCLUDED(mu_);
  FitResult Run(const Request& r);
  FitResult RunRefit(const Request& r);
  FitResult RunPredict(const Request& r);
  FitResult RunVerify(const Request& r);
  // The target's lease (Store::LeaseTarget), trying again every 50 ms for
  // up to `wait` while another tuner holds it. False: still held.
  absl::StatusOr<bool> LeaseTarget(int64_t target_id, absl::Duration wait);
  absl::Status LoadEvidence();

  const FitterOptions options_;
  std::unique_ptr<Store> store_;  // fitter thread only
  const std::function<void(FitResult)> deliver_;
  struct Cached {
    uint64_t total_samples = 0;
    absl::Time loaded_at;
  };
  std::map<int64_t, Cached> cache_;      // fitter thread only
  // Keys whose drift a verification detected (so its drift check sees it),
  // for the next refit's held keys; fitter thread only.
  std::map<int64_t, std::vector<PolicyKey>> drifted_;
  ColdStartEvidence evidence_;  // targets with samples; fitter thread only
  absl::Time next_list_at_;     // LoadEvidence()'s next read of the list

  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_ticket_ ABSL_GUARDED_BY(mu_) = 1;
  // By ticket: in the order they run.
  std::map<uint64_t, Request> requests_ ABSL_GUARDED_BY(mu_);
  size_t urgent_ ABSL_GUARDED_BY(mu_) = 0;  // requests_ that are not Deferrable()
  // Each target's waiting tickets, oldest first (merging without a scan of
  // every target's requests: a fleet queues one per target).
  std::map<int64_t, std::vector<uint64_t>> waiting_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace spintune

#endif  // SPINTUNE_TUNER_FITTER_H_
