// TunerCore: everything the tuner does between the wire and SQLite, on one
// worker thread. gRPC reactions post work here and never block; the worker
// validates, persists, refits and answers through SessionHandle::Send(). A
// batch's acknowledgement is only queued by the worker (Queue()); a sender
// thread then starts the stream's write and its next read (gRPC runs both
// inline on the calling thread), so the one thread every batch passes
// through does not.
//
// Exactly-once: a target's batches are stored strictly in seq order (the
// store takes seq only as its last durable seq + 1); a resent seq is
// acknowledged as a duplicate when its fingerprint matches what was stored,
// refused (ALREADY_EXISTS) when not; a seq beyond the next is refused with
// retry (OUT_OF_RANGE) and the stream's later batches too, so the agent
// reconnects and resends in order. A batch refused for its content or a
// limit uses its seq up (nothing stored, the refusal is kept and repeated to
// resends). Storage failures are retryable, logged as errors and counted.
//
// Fairness and memory: streams take turns on the worker (tuner/job_queue.h);
// each stream has at most TunerOptions::stream_window messages in the core
// (the gRPC layer stops reading it until some are done, so flow control
// holds the rest back in the client); batches queued in the core are bounded
// by max_queued_bytes (reads pause while over it). A Hello costs the same
// whatever the database holds: a new target's cold-start table is predicted
// in the background (tuner/fitter.h) and pushed when ready. A stream that
// sends no Hello within hello_timeout is ended.
//
// Batches waiting back to back are stored in one SQLite transaction (group
// commit: one fsync for many batches, each still acknowledged only after
// that commit). A batch is stored as one staged row; a compactor thread
// folds staged rows into the per-key histograms (tuner/compactor.h). On
// SQLite the worker's write transactions and the compactor's and fitter's
// take turns at one write gate (storage/write_gate.h), so a commit waits for
// at most one of theirs.
//
// Per target it counts samples ingested since the last fit and refits when
// TunerOptions::refit_samples have arrived (and on Drain, when anything was
// stored since). Before a refit it runs drift detection
// (Store::DetectChanges); the fit then keeps each key's wait unless the new
// one is cheaper by FitConfig::hysteresis. Fits and cold-start predictions
// run on a thread of their own (tuner/fitter.h). A refit whose decisions equal the
// stored latest version only refreshes that version's evidence; a different
// table becomes a new version and is pushed to every live session of the
// target. A pinned target (rolled back with `spintune profiles rollback`) is
// not refitted; a version another process stored is noticed within a second
// and pushed.
//
// Thread-safety: all public methods are thread-safe and non-blocking
// (except Create() and the destructor, which stops the worker; work still
// queued then is dropped unacknowledged, so agents resend it). Inside, three
// absl::Mutex: mu_ guards the counters, admit_mu_ the streams waiting to
// read or to say hello, sender_mu_ what the worker handed to the sender
// thread. None is held while another is taken, nor while a session is
// resumed, failed, flushed or told its job is done. Members say which lock guards them
// (ABSL_GUARDED_BY, checked by clang's -Wthread-safety:
// cmake/ThreadSafetyCheck.cmake); the rest is the worker thread's alone.
#ifndef SPINTUNE_TUNER_TUNER_CORE_H_
#define SPINTUNE_TUNER_TUNER_CORE_H_

#include <array>
#include <limits>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "policy/policy_builder.h"
#include "proto/channel_security.h"
#include "spintune/v1/spintune.pb.h"
#include "storage/store.h"
#include "tuner/job_queue.h"
#include "tuner/compactor.h"
#include "tuner/fitter.h"
#include "tuner/session_handle.h"

namespace spintune {

class ExperimentRunner;

struct TunerOptions {
  std::string db_path = "spintune.db";
  // store.reserve_bytes: kept beside the database to recover from a full
  // disk (SqliteDb::Open).
  StoreOptions store = {8192, 32, 2ull << 20};
  // Drift: before each refit every key's latest windows (the fewest that
  // hold 512 of its samples) are tested against its earlier evidence; a
  // changed key is refitted on what came after.
  ChangeTest change;
  FitConfig fit;
  // Refit a target after this many new completion samples, but not more
  // often than min_refit_interval (a refit holds up ingest; a drain refits
  // at once).
  uint64_t refit_samples = 4096;
  absl::Duration min_refit_interval = absl::ZeroDuration();
  // Most of a core refits and predictions may take (FitterOptions).
  double max_fit_cpu_share = 0.25;
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
  // token binds it to its target, admin RPCs need an admin token. Without
  // it any client that reaches the port can report for any agent id.
  bool require_tokens = false;
  // Messages of one stream in the core at once (read back-pressure).
  size_t stream_window = 32;
  // Bytes of batches queued in the core at once, over all streams; reads
  // pause while it is exceeded.
  uint64_t max_queued_bytes = 64ull << 20;
  // Memory gRPC may use for its connections and calls (a
  // grpc::ResourceQuota; 0: gRPC's default, no limit). Near it gRPC shrinks
  // the flow-control windows, so what waits stays in the agents, and stops
  // accepting new connections (agents retry). Bounds the per-stream memory
  // that max_queued_bytes does not (docs/reliability.md).
  uint64_t grpc_memory_bytes = 0;
  // A stream that sends no Hello within this is ended (DEADLINE_EXCEEDED).
  absl::Duration hello_timeout = absl::Seconds(10);
  // Cold start: how long the other targets' evidence is reused.
  absl::Duration evidence_ttl = absl::Seconds(30);
  // Verification of pushed versions against measured outcomes.
  VerifierOptions verify;
  ServerTls tls;  // no cert: plaintext
};

struct TunerCounters {
  uint64_t sessions = 0;
  uint64_t batches_ingested = 0;
  uint64_t batches_duplicate = 0;
  uint64_t batches_rejected = 0;   // invalid content, never stored (seq used up)
  uint64_t batches_deferred = 0;   // storage failing, rate, order or stall: resent later
  uint64_t batches_over_limit = 0; // key cardinality or rate limit
  uint64_t batches_conflict = 0;   // a resent seq with other content
  uint64_t batches_out_of_order = 0;  // a seq beyond the next expected one
  uint64_t storage_errors = 0;     // storage reads or writes that failed
  uint64_t hello_timeouts = 0;     // streams ended for sending no Hello
  uint64_t samples_ingested = 0;
  uint64_t refits = 0;
  uint64_t policy_versions = 0;
  uint64_t pushes = 0;
  uint64_t changes_detected = 0;
  uint64_t predicted_tables = 0;
  // Verdicts on pushed versions' keys (tuner/verifier.h), and the rollbacks
  // they caused.
  uint64_t verified_better = 0;
  uint64_t verified_worse = 0;
  uint64_t verified_inconclusive = 0;
  uint64_t rollbacks = 0;
  uint64_t spool_dropped_samples = 0;  // agents' placeholders for dropped batches
  uint64_t unauthenticated = 0;        // calls without a valid token
  uint64_t permission_denied = 0;      // valid token, wrong target or not admin
  uint64_t active_sessions = 0;        // streams that said hello and are still open
  uint64_t tracked_streams = 0;        // streams the core holds any state for
  // Batch receipt to acknowledgement (after the commit), cumulative counts
  // per upper bound kIngestLatencyBoundsSeconds[i]; the last is +Inf.
  std::array<uint64_t, 14> ingest_latency_buckets{};
  double ingest_latency_sum_seconds = 0;
  uint64_t ingest_latency_count = 0;
  // SQLite: the turns the write transactions took (storage/write_gate.h).
  WriteGate::Counts write_gate;
};

// Upper bounds of the ingest latency histogram (seconds), +Inf last.
inline constexpr std::array<double, 14> kIngestLatencyBoundsSeconds = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5,
    std::numeric_limits<double>::infinity()};

class TunerCore {
 public:
  static absl::StatusOr<std::unique_ptr<TunerCore>> Create(const TunerOptions& options);
  // Stops the worker after the unit it is on; drops what is still queued
  // (unacknowledged: the agents resend it). Idempotent.
  void Stop();
  ~TunerCore();

  // Session events, in stream order. `done` runs on the worker when the
  // event has been handled (or dropped at shutdown).
  void OnOpen(std::shared_ptr<SessionHandle> session);
  void CountRefusedCall(bool authenticated);
  void OnHello(std::shared_ptr<SessionHandle> session, v1::Hello hello,
               std::function<void()> done);
  // Fingerprints, decodes (against the stream's `hello`) and encodes
  // `batch` for staging on the calling thread (the worker only checks
  // limits and stores it). `received`: the batch's bytes as the agent sent
  // them, fingerprinted as they are (fingerprint version 2, storage/store.h);
  // "" when not at hand: its deterministic serialization is (the same bytes
  // for an agent built on protobuf's C++ library).
  void OnBatch(std::shared_ptr<SessionHandle> session, const v1::Hello& hello,
               const v1::SampleBatch& batch, absl::string_view received,
               std::function<void()> done);
  void OnApplied(std::shared_ptr<SessionHandle> session, v1::PolicyApplied applied,
                 std::function<void()> done);
  void OnDrain(std::shared_ptr<SessionHandle> session, std::function<void()> done);
  // A knob experiment message (knobs_declared, knob_trial, knob_applied):
  // handed to the ExperimentRunner on the worker (tuner/experiment_runner.h).
  void OnKnobMessage(std::shared_ptr<SessionHandle> session, v1::AgentMessage message,
                     std::function<void()> done);
  // The stream ended (any way).
  void OnSessionEnd(std::shared_ptr<SessionHandle> session);
  // True when the core has room for more of what `session` sends; false: it
  // will call session->ResumeReading() once it has.
  bool AdmitRead(const std::shared_ptr<SessionHandle>& session);

  // Admin requests; `done` runs on the worker.
  void ListTargets(std::function<void(absl::StatusOr<v1::ListTargetsResponse>)> done);
  void GetPolicy(const v1::GetPolicyRequest& request,
                 std::function<void(absl::StatusOr<v1::GetPolicyResponse>)> done);

  TunerCounters counters() const;
  // Bytes of batches queued in the core now.
  uint64_t queued_bytes() const { return queue_.queued_bytes(); }
  // The valid token `token` (thread-safe, blocking on SQLite; not on the
  // worker). NotFound for an unknown or revoked token.
  absl::StatusOr<TokenRecord> Authenticate(const std::string& token);
  const TunerOptions& options() const { return options_; }

 private:
  TunerCore(TunerOptions options, std::shared_ptr<WriteGate> gate, std::unique_ptr<Store> store,
            std::unique_ptr<Fitter> fitter, std::unique_ptr<Compactor> compactor);
  // A fit finished (on the fitter's thread): handled on the worker.
  void OnFitResult(FitResult result);
  void Post(std::shared_ptr<SessionHandle> session, std::function<void()> run,
            std::function<void()> done = nullptr);
  void WorkerLoop();
  // Starts the writes the worker queued and runs the jobs' `done` (which
  // starts their streams' next reads): gRPC's write and read calls run
  // inline on the calling thread, a quarter of the worker's time when it did
  // them itself, and the worker is the one thread every batch goes through.
  void SenderLoop();
  // Hands a unit's sessions and `done` callbacks to SenderLoop (worker).
  void HandOff(std::vector<TunerJob>& unit);
  // Checks, stores in one transaction and answers a group of batches.
  void IngestGroup(std::vector<TunerJob>& jobs);
  // Refuses (retry) a batch whose seq is beyond `durable` + 1, and what
  // follows it on its stream.
  void RefuseOutOfOrder(TunerJob& job, uint64_t durable);
  // The database's durable seq of a target (read at a Hello, or in a
  // duplicate's or an out-of-order batch's result). Beyond what durable_
  // holds, another tuner stored batches since (an agent moved there and
  // back), maybe with keys: the target's known_keys_ go, for the key limit
  // to count them. Worker only.
  void LearnDurable(int64_t target_id, uint64_t durable);
  void ObserveIngestLatency(absl::Duration d) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Count(uint64_t TunerCounters::*counter, uint64_t n = 1) ABSL_LOCKS_EXCLUDED(mu_);
  // Worker-only helpers.
  // Asks the fitter for a refit; returns its ticket.
  uint64_t RequestRefit(int64_t target_id, bool force);
  void Push(int64_t target_id, const PolicyTable& table);
  // Pushes a target's latest version when another process (spintune
  // profiles rollback) stored one since it was last pushed.
  void PushExternalVersions();
  // Ends streams that sent no Hello within options_.hello_timeout.
  void EndSilentStreams();
  // Lets paused streams read again when the queue has room.
  void ResumeReaders();
  // Recounts counters_.tracked_streams.
  void CountTrackedStreams();

  // The key cardinality limit (refuse) and the agent's rate limit (resend
  // later) for a decoded batch of `session`. RESOURCE_EXHAUSTED naming the
  // limit's flag; Unavailable when the keys cannot be read. `added`
  // receives the batch's keys that neither the target nor `group_keys` has.
  absl::Status CheckKeyLimit(SessionHandle& session, const BatchDelta& delta,
                             std::set<PolicyKey>* group_keys, std::vector<PolicyKey>* added);
  absl::Status CheckRate(SessionHandle& session, const BatchDelta& delta);

  const TunerOptions options_;
  // The worker's, fitter's and compactor's stores take turns at it.
  const std::shared_ptr<WriteGate> gate_;
  std::unique_ptr<Store> store_;
  JobQueue queue_;

  mutable absl::Mutex mu_;
  TunerCounters counters_ ABSL_GUARDED_BY(mu_);

  absl::Mutex admit_mu_;
  // Streams paused by AdmitRead(), and streams that have not said hello.
  std::vector<std::weak_ptr<SessionHandle>> waiting_readers_ ABSL_GUARDED_BY(admit_mu_);
  std::vector<std::weak_ptr<SessionHandle>> silent_ ABSL_GUARDED_BY(admit_mu_);

  // Worker-only state (no lock).
  // Each target's last durable seq as this tuner last saw it (the store has
  // the final word: another tuner may have moved it on).
  std::map<int64_t, uint64_t> durable_;
  std::map<int64_t, uint64_t> samples_since_fit_;
  std::set<int64_t> stored_since_fit_;  // targets with batches stored since their last fit
  std::map<int64_t, absl::Time> last_refit_;
  std::map<int64_t, std::set<PolicyKey>> known_keys_;  // loaded on first use
  struct Bucket {
    double tokens = 0;
    absl::Time refilled = absl::InfinitePast();
  };
  std::map<std::string, Bucket> rate_;  // per agent id
  std::map<int64_t, std::vector<std::weak_ptr<SessionHandle>>> sessions_;
  std::map<int64_t, uint64_t> pushed_version_;  // highest version pushed per target
  // What waits for a fitter ticket (drains).
  std::map<uint64_t, std::vector<std::function<void()>>> after_fit_;
  int64_t data_version_ = 0;                    // Store::DataVersion() last seen
  std::unique_ptr<ExperimentRunner> experiments_;  // knob experiments (worker-only)

  std::unique_ptr<Fitter> fitter_;        // posts results to queue_
  std::unique_ptr<Compactor> compactor_;  // folds staged batches (tuner/compactor.h)
  // What the worker handed to SenderLoop, in order.
  struct SenderWork {
    std::vector<std::shared_ptr<SessionHandle>> flush;
    std::vector<std::function<void()>> done;
  };
  absl::Mutex sender_mu_;
  absl::CondVar sender_cv_;
  std::deque<SenderWork> sender_work_ ABSL_GUARDED_BY(sender_mu_);
  bool sender_stop_ ABSL_GUARDED_BY(sender_mu_) = false;
  std::thread sender_;  // started before the worker, stopped after it
  std::thread worker_;              // last: started after everything above
};

}  // namespace spintune

#endif  // SPINTUNE_TUNER_TUNER_CORE_H_
