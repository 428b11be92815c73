// TunerCore: everything the tuner does between the wire and SQLite, on one
// worker thread. gRPC reactions post work here and never block; the worker
// validates, persists, refits and answers through SessionHandle::Send().
//
// Batches waiting back to back in the queue are stored in one SQLite
// transaction (group commit: one fsync for many batches, each still
// acknowledged only after that commit).
//
// Per target it counts samples ingested since the last fit and refits when
// TunerOptions::refit_samples have arrived (and on Drain). Before a refit it
// runs drift detection (Store::DetectChanges); the fit then keeps each key's
// wait unless the new one is cheaper by FitConfig::hysteresis. A refit whose
// decisions equal the stored latest version only refreshes that version's
// evidence; a different table becomes a new version and is pushed to every
// live session of the target. A pinned target (rolled back with `spintune
// profiles rollback`) is not refitted; a version another process stored is
// noticed within a second and pushed.
//
// Thread-safety: all public methods are thread-safe and non-blocking
// (except Create() and the destructor, which joins the worker).
#ifndef SPINTUNE_TUNER_TUNER_CORE_H_
#define SPINTUNE_TUNER_TUNER_CORE_H_

#include <array>
#include <condition_variable>
#include <limits>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "policy/policy_builder.h"
#include "proto/channel_security.h"
#include "spintune/v1/spintune.pb.h"
#include "storage/store.h"

namespace spintune {

// One agent connection as the core sees it.
class SessionHandle {
 public:
  virtual ~SessionHandle() = default;
  // Queues a message for the agent. Thread-safe, non-blocking; dropped when
  // the stream is gone.
  virtual void Send(v1::TunerMessage message) = 0;
  // Ends the stream with `status` after queued messages are written.
  virtual void Fail(absl::Status status) = 0;

  // Written and read only on the core's worker thread.
  int64_t target_id = 0;
  v1::Hello hello;
  // Set when a batch could not be stored (storage full or failing) or was
  // over the rate limit: every later batch of this stream is refused too, so
  // the durable sequence numbers of a target never have a gap.
  bool stalled = false;
};

struct TunerOptions {
  std::string db_path = "spintune.db";
  StoreOptions store;
  // Drift: before each refit every key's latest window is tested against
  // its earlier evidence; a changed key is refitted on what came after.
  ChangeTest change;
  FitConfig fit;
  // Refit a target after this many new completion samples, but not more
  // often than min_refit_interval (a refit holds up ingest; a drain refits
  // at once).
  uint64_t refit_samples = 4096;
  absl::Duration min_refit_interval = absl::ZeroDuration();
  // Most keys (cpu class, device, opcode, size class) one target may have;
  // a batch that would add more is refused with RESOURCE_EXHAUSTED.
  uint64_t max_keys_per_target = 4096;
  // Completion samples per second one agent may send (0: no limit), with a
  // burst of two seconds' worth; a batch over it is refused with
  // RESOURCE_EXHAUSTED and the agent resends it after a backoff.
  double max_agent_samples_per_second = 0;
  // Largest message the server accepts (gRPC refuses bigger ones with
  // RESOURCE_EXHAUSTED and ends that stream only).
  int max_message_bytes = 16 << 20;
  // Every call must carry a valid bearer token (spintune tokens): an agent's
  // token binds it to its target, admin RPCs need an admin token.
  bool require_tokens = false;
  ServerTls tls;  // no cert: plaintext
};

struct TunerCounters {
  uint64_t sessions = 0;
  uint64_t batches_ingested = 0;
  uint64_t batches_duplicate = 0;
  uint64_t batches_rejected = 0;   // invalid content, never stored
  uint64_t batches_deferred = 0;   // storage failing, rate or stall: resent later
  uint64_t batches_over_limit = 0; // key cardinality or rate limit
  uint64_t samples_ingested = 0;
  uint64_t refits = 0;
  uint64_t policy_versions = 0;
  uint64_t pushes = 0;
  uint64_t changes_detected = 0;
  uint64_t predicted_tables = 0;
  uint64_t spool_dropped_samples = 0;  // agents' reports
  uint64_t unauthenticated = 0;        // calls without a valid token
  uint64_t permission_denied = 0;      // valid token, wrong target or not admin
  uint64_t active_sessions = 0;        // streams that said hello and are still open
  // Batch receipt to acknowledgement (after the commit), cumulative counts
  // per upper bound kIngestLatencyBoundsSeconds[i]; the last is +Inf.
  std::array<uint64_t, 14> ingest_latency_buckets{};
  double ingest_latency_sum_seconds = 0;
  uint64_t ingest_latency_count = 0;
};

// Upper bounds of the ingest latency histogram (seconds), +Inf last.
inline constexpr std::array<double, 14> kIngestLatencyBoundsSeconds = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5,
    std::numeric_limits<double>::infinity()};

class TunerCore {
 public:
  static absl::StatusOr<std::unique_ptr<TunerCore>> Create(const TunerOptions& options);
  // Finishes queued work, then stops the worker.
  ~TunerCore();

  // Session events, in stream order. `done` runs on the worker when the
  // event has been handled.
  void CountRefusedCall(bool authenticated);
  void OnHello(std::shared_ptr<SessionHandle> session, v1::Hello hello,
               std::function<void()> done);
  void OnBatch(std::shared_ptr<SessionHandle> session, v1::SampleBatch batch,
               std::function<void()> done);
  void OnApplied(std::shared_ptr<SessionHandle> session, v1::PolicyApplied applied,
                 std::function<void()> done);
  void OnDrain(std::shared_ptr<SessionHandle> session, std::function<void()> done);
  // The stream ended (any way).
  void OnSessionEnd(std::shared_ptr<SessionHandle> session);

  // Admin requests; `done` runs on the worker.
  void ListTargets(std::function<void(absl::StatusOr<v1::ListTargetsResponse>)> done);
  void GetPolicy(const v1::GetPolicyRequest& request,
                 std::function<void(absl::StatusOr<v1::GetPolicyResponse>)> done);

  TunerCounters counters() const;
  // The valid token `token` (thread-safe, blocking on SQLite; not on the
  // worker). NotFound for an unknown or revoked token.
  absl::StatusOr<TokenRecord> Authenticate(const std::string& token);
  const TunerOptions& options() const { return options_; }

 private:
  // A queued unit of work: a batch (grouped with the batches after it) or
  // anything else.
  struct Job {
    std::function<void()> run;
    std::shared_ptr<SessionHandle> session;  // batch jobs
    v1::SampleBatch batch;
    std::function<void()> done;
    absl::Time received = absl::Now();
  };
  void ObserveIngestLatency(absl::Duration d);  // REQUIRES: mu_ held
  TunerCore(TunerOptions options, std::unique_ptr<Store> store);
  void Post(std::function<void()> job);
  void WorkerLoop();
  // Checks, stores in one transaction and acknowledges consecutive batches.
  void IngestGroup(std::vector<Job>& jobs);
  // Worker-only helpers.
  void Refit(int64_t target_id, bool force);
  // Cold start: a predicted table for a target without samples or policy,
  // from the other targets' evidence. Returns it when one was stored.
  std::optional<PolicyTable> Predict(int64_t target_id, const TargetRecord& target);
  void Push(int64_t target_id, const PolicyTable& table);
  // Pushes a target's latest version when another process (spintune
  // profiles rollback) stored one since it was last pushed.
  void PushExternalVersions();

  const TunerOptions options_;
  std::unique_ptr<Store> store_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;
  bool stopping_ = false;
  TunerCounters counters_;
  std::thread worker_;

  // The key cardinality limit (refuse) and the agent's rate limit (resend
  // later) for a decoded batch of `session`. RESOURCE_EXHAUSTED naming the
  // limit's flag.
  absl::Status CheckKeyLimit(SessionHandle& session, const BatchDelta& delta);
  absl::Status CheckRate(SessionHandle& session, const BatchDelta& delta);

  // Worker-only state.
  std::map<int64_t, uint64_t> samples_since_fit_;
  std::map<int64_t, absl::Time> last_refit_;
  std::map<int64_t, std::set<PolicyKey>> known_keys_;  // loaded on first use
  struct Bucket {
    double tokens = 0;
    absl::Time refilled = absl::InfinitePast();
  };
  std::map<std::string, Bucket> rate_;  // per agent id
  std::map<int64_t, std::vector<std::weak_ptr<SessionHandle>>> sessions_;
  std::map<int64_t, uint64_t> pushed_version_;  // highest version pushed per target
  int64_t data_version_ = 0;                    // Store::DataVersion() last seen
};

}  // namespace spintune

#endif  // SPINTUNE_TUNER_TUNER_CORE_H_
