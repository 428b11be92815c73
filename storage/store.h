// Store: the tuner's database (schema in storage/SCHEMA.md), on SQLite (one
// file, the default) or PostgreSQL (shared by several tuners).
//
// Holds targets with their CPU classes and devices, per-key completion
// histograms, per-(CPU class, device) dispatch histograms, the (target, seq)
// of every ingested batch for exactly-once ingest (for
// StoreOptions::ledger_retention), and every policy version.
// A batch is ingested in one transaction: after IngestBatch() returns OK the
// batch is durable (SQLite: WAL, synchronous=FULL; PostgreSQL: committed)
// and a replay of the same
// (target, seq) is reported as a duplicate without changing anything.
//
// Thread-safety: all methods are thread-safe (one connection behind a mutex).
#ifndef SPINTUNE_STORAGE_STORE_H_
#define SPINTUNE_STORAGE_STORE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "models/change_detector.h"
#include "models/cost_moments.h"
#include "models/latency_histogram.h"
#include "policy/policy_builder.h"
#include "policy/policy_table.h"
#include "storage/experiment_record.h"
#include "storage/profile.h"
#include "storage/sql_db.h"

namespace spintune {

struct CpuClassRecord {
  std::string name;
  uint64_t cpu_khz = 0;
  PlatformCosts declared;           // as the agent declared or probed them
  double irq_overhead_cpu_ns = 0;   // irq_cpu minus the handler; 0 = unknown
};

struct TargetRecord {
  std::string agent_id;
  std::string board;
  std::string cpu_model;
  std::string kernel_release;
  std::string agent_version;
  std::vector<CpuClassRecord> cpu_classes;
  std::vector<DeviceInfo> devices;
  // Highest policy blob format the agent's drivers read (Hello
  // max_blob_format; 0: not said, read as 2).
  uint32_t max_blob_format = 0;
};

struct TargetSummary {
  int64_t id = 0;
  std::string agent_id;
  std::string board;
  std::string cpu_model;
  uint64_t total_samples = 0;
  uint64_t total_dispatch_samples = 0;
  uint64_t current_version = 0;
  uint64_t applied_version = 0;
  std::string applied_error;
  std::string last_seen;
  uint64_t dropped_samples = 0;  // dropped by the agent's full spool
  uint64_t refused_samples = 0;  // in batches the tuner refused (never stored)
  uint64_t last_seq = 0;         // last durable seq
  // A rolled-back table is pinned: the tuner keeps fitting but stores and
  // pushes no new version until it is unpinned (0: not pinned).
  uint64_t pinned_version = 0;
};

// A bearer token as stored: its SHA-256, never the token.
struct TokenRecord {
  std::string name;
  std::string target;  // the agent id it may report for ("" for admin tokens)
  bool admin = false;
  std::string created_at;
  std::string revoked_at;  // "" while valid
};

// Everything one batch adds.
// Measured cost of one key's requests under one policy version.
struct OutcomeRecord {
  PolicyKey key;
  uint64_t version = 0;  // 0: the driver's default rule
  OutcomeArm arm = OutcomeArm::kTable;  // the incumbent arm of an A/B trial
  CostMoments moments;
  // The target's sample windows (StoreOptions::window_samples) in which the
  // batches carrying these outcomes were stored: the span they were
  // measured in, for the verifier's drift check. Set by LoadOutcomes.
  uint64_t first_window = 0;
  uint64_t last_window = 0;
};

// Timer oversleep a driver observed on one CPU class.
struct TimerRecord {
  std::string cpu_class;
  LatencyHistogram oversleep;
};

// One verification of a pushed version's key against its incumbent
// (tuner/verifier.h).
struct VerificationRecord {
  PolicyKey key;
  uint64_t version = 0;            // verified
  std::string verdict;             // "better", "worse" or "inconclusive"
  double predicted_cost_ns = 0;    // the fit's expected J per request
  CostInterval measured;           // J per request under `version`
  uint64_t requests = 0;
  uint64_t incumbent_version = 0;  // what was in force before (0: default rule)
  CostInterval incumbent;
  uint64_t rollback_version = 0;   // the version that undid it (0: none)
  // "before_after" (the version's measurements against an earlier
  // version's) or "ab" (the two arms of the version's trial, measured in
  // the same window).
  std::string method = "before_after";
  // The verdict with how it was reached: "worse", or "worse (A/B)".
  std::string VerdictLabel() const {
    return method == "ab" ? verdict + " (A/B)" : verdict;
  }
  std::string reason;
  std::string decided_at;
};

// A key whose pushed wait was rolled back: refits keep `wait` for it until
// its evidence changes (a drift, or twice the samples it had).
struct HeldKey {
  PolicyKey key;
  WaitParams wait;
  uint64_t samples_at_hold = 0;
};

// What a verification stores with the version that acts on it (a rollback
// of the keys measured worse), in that version's transaction: a refit that
// starts after the version was stored also finds its key holds.
struct VersionVerdicts {
  std::vector<VerificationRecord> verifications;
  std::vector<HeldKey> holds;
};

struct BatchDelta {
  uint64_t seq = 0;
  std::vector<KeyEvidence> keys;
  std::vector<DispatchRecord> dispatch;
  std::vector<OutcomeRecord> outcomes;
  std::vector<TimerRecord> timers;
  uint64_t completion_samples = 0;
  uint64_t dispatch_samples = 0;
};

// The version of the fingerprints IngestBatches() stores
// (ingested.fingerprint_version; SequencedBatch::fingerprint).
inline constexpr int kFingerprintVersion = 2;

// One batch of an agent's sequence, as IngestBatches() takes it.
struct SequencedBatch {
  int64_t target_id = 0;
  uint64_t seq = 0;       // REQUIRES: >= 1
  uint64_t last_seq = 0;  // == seq, or the end of a placeholder's range
  // Of the batch as the agent sent it: a resend must carry the same.
  // Version 2 (kFingerprintVersion): Fingerprint64 of the batch's bytes as
  // received. 0: none (a resend is taken at its word).
  uint64_t fingerprint = 0;
  // Version 1, Fingerprint64 of the batch's deterministic serialization
  // (what tuners before version 2 stored): compared with a resend's stored
  // fingerprint of that version. 0: not computed (a resend of a version 1
  // row is then taken at its word). For an agent on protobuf's C++ library
  // both are the same.
  uint64_t legacy_fingerprint = 0;
  // What the batch adds (REQUIRES: set unless refused or a placeholder).
  const BatchDelta* delta = nullptr;
  // EncodeBatchDelta(*delta) when the caller made it already (off the
  // thread that commits); null: the store encodes it.
  const std::string* encoded_delta = nullptr;
  // Placeholder of batches seq..last_seq that the agent's spool dropped,
  // holding this many completion samples.
  bool dropped = false;
  uint64_t dropped_samples = 0;
  // Not OK: the batch is refused (bad content, a limit). Its seq is used up,
  // nothing of it is stored, and the refusal is answered to resends.
  absl::Status refusal;
  uint64_t refused_samples = 0;
};

enum class IngestOutcome {
  kStored,      // seq was the target's last seq + 1: stored (or, refused: used up)
  kDuplicate,   // seq was stored before with the same fingerprint: nothing changed
  kConflict,    // seq was stored before with other content: nothing changed
  kOutOfOrder,  // seq is beyond the target's last seq + 1: nothing changed
};

struct IngestResult {
  IngestOutcome outcome = IngestOutcome::kStored;
  uint64_t last_seq = 0;  // the target's last durable seq after this batch
  // kStored of a refused batch, or kDuplicate of one refused before.
  absl::Status refusal;
};

// A key's evidence per window (drift detection) is kept in rows that each
// start at a window of its target's samples and hold at least this many of
// the key's samples before the next row starts, at the next window: one row
// per window for a key with that many samples per window, one per several
// windows for a key with a small share of its target's samples (a fleet
// agent's 64 keys: about 128 each in a window of 8192). It is also the
// evidence the drift detector needs on each side of a change.
inline constexpr uint64_t kMinWindowSamples = 512;

struct StoreOptions {
  // Each target's samples are also kept in windows of this many samples
  // (counted over the target), for drift detection.
  uint64_t window_samples = 8192;
  // Windows older than this many are pruned unless still in use.
  uint64_t keep_windows = 32;
  // Bytes kept allocated beside the database for recovering from a full
  // disk (SqliteDb::Open); 0: none. SQLite only.
  uint64_t reserve_bytes = 0;
  // SQLite: false: this store's commits never copy the write-ahead log into
  // the database file; another store on the same file must, by
  // Checkpoint() (the tuner's compactor does it for the ingest worker,
  // whose commits then stay short).
  bool commit_checkpoints = true;
  // The exactly-once ledger (`ingested`) keeps a batch's row this long
  // (PruneLedger(), run by the tuner's compactor); zero: forever. A resend
  // of a pruned seq is taken at its word (a duplicate), so this bounds only
  // how long conflicts and refusals are recognised (storage/SCHEMA.md).
  absl::Duration ledger_retention = absl::Hours(24 * 7);
  // SQLite: this store's write transactions take turns, as
  // `write_priority`, with those of the process's other stores handed the
  // same gate (storage/write_gate.h: the tuner's ingest worker urgent, its
  // compactor and fitter background); null: SQLite's lock alone.
  std::shared_ptr<WriteGate> write_gate = nullptr;
  WritePriority write_priority = WritePriority::kBackground;
};

// What one Store::PruneLedger() call did.
struct LedgerPrune {
  uint64_t deleted = 0;     // ledger rows deleted
  int64_t next_target = 0;  // pass as `from_target` next; 0: the pass ended
};

class Store {
 public:
  // Opens the database `db` names (ParseDbSpec: a file, sqlite:PATH or
  // postgresql://...) and migrates it. kCreate (the tuner) creates a
  // missing (or empty) file or schema; kExisting refuses it (NotFound);
  // kReadOnly also never writes (read-only media work) and refuses a schema
  // it would have to migrate. Any mode refuses a database that is not a
  // spintune database (InvalidArgument) and leaves it as it was. ":memory:"
  // works (kCreate). A PostgreSQL database must exist (createdb); an
  // unreachable server or a refused login is Unavailable, in one line.
  static absl::StatusOr<std::unique_ptr<Store>> Open(const std::string& db,
                                                     const StoreOptions& options = {},
                                                     OpenMode mode = OpenMode::kCreate);

  // Creates the target of `record.agent_id` or refreshes its description;
  // replaces its CPU classes and devices. Returns the target id.
  absl::StatusOr<int64_t> UpsertTarget(const TargetRecord& record);
  absl::StatusOr<std::optional<TargetSummary>> FindTarget(const std::string& agent_id);
  absl::StatusOr<std::vector<TargetSummary>> ListTargets();
  absl::StatusOr<TargetRecord> LoadTarget(int64_t target_id);

  // The target's last durable sequence number (0: none). Every seq from 1
  // to it is stored (a batch, a placeholder or a refusal); no other.
  absl::StatusOr<uint64_t> LastDurableSeq(int64_t target_id);
  // Ingests `batch` (seq batch.seq, fingerprint 0) atomically. Returns true
  // when stored, false for a duplicate; FailedPrecondition for a conflict or
  // a seq out of order.
  absl::StatusOr<bool> IngestBatch(int64_t target_id, const BatchDelta& batch);
  // Several batches (of any targets, in each target's seq order) in one
  // transaction, one commit; one result per batch (see IngestOutcome). All
  // or none are stored.
  absl::StatusOr<std::vector<IngestResult>> IngestBatches(
      const std::vector<SequencedBatch>& batches);

  // Evidence per key: the cumulative histogram, or, for a key whose
  // distribution changed (DetectChanges), the windows since the change;
  // batches not compacted yet included.
  absl::StatusOr<std::vector<KeyEvidence>> LoadKeys(int64_t target_id);
  // The target's keys, without their evidence (compacted or not).
  absl::StatusOr<std::vector<PolicyKey>> ListKeys(int64_t target_id);

  // Bounds the exactly-once ledger: deletes `ingested` rows received before
  // `cutoff`, each target's oldest seqs first (a target's rows stay one
  // range of seqs, so a resend below it is known pruned), never a target's
  // newest row (it holds the resume point, targets.last_seq). Visits the
  // targets from id `from_target` on in id order; deletes at most `max_rows`
  // rows and looks at most at `max_rows` targets, in one transaction.
  // REQUIRES: max_rows > 0.
  absl::StatusOr<LedgerPrune> PruneLedger(absl::Time cutoff, uint64_t max_rows,
                                          int64_t from_target = 0);
  // Ingest stages each batch's delta as one row (cheap per batch); Compact()
  // folds a target's staged deltas into its per-key and per-window
  // histograms and dispatch stats in one transaction, many batches at once,
  // committed without a sync of its own (lost to a power cut it is undone
  // whole; the next synced commit makes it durable). Every read includes
  // staged deltas, reading them and the compacted rows in one snapshot
  // (ReadSnapshot), so compaction only changes how the evidence is stored,
  // even while another connection compacts. Compactions of one target
  // take turns across processes (SqlDb::LockTargetForTransaction).
  // Returns the batches folded.
  absl::StatusOr<uint64_t> Compact(int64_t target_id);
  // Targets with at least `min_batches` staged deltas, or with one staged
  // longer ago than `max_age`.
  absl::StatusOr<std::vector<int64_t>> TargetsToCompact(uint64_t min_batches,
                                                        absl::Duration max_age);
  // Compares each key's latest windows (the fewest that hold min_recent of
  // its samples together) with its evidence before them
  // (models/change_detector.h, JudgeWindows); a key that changed uses only
  // windows from the first of them on as evidence from now on.
  // Prunes windows no longer needed. Returns the keys that changed, less
  // those whose change is their last one found again later (refined:
  // compared with nothing but the evidence that detected it; their
  // evidence still moves on).
  absl::StatusOr<std::vector<PolicyKey>> DetectChanges(int64_t target_id,
                                                       const ChangeTest& test,
                                                       uint64_t min_recent = kMinWindowSamples);
  // Dispatch histograms per (CPU class, device), staged deltas included.
  absl::StatusOr<std::vector<DispatchRecord>> LoadDispatch(int64_t target_id);
  // Measured outcomes per (key, version), staged deltas included.
  absl::StatusOr<std::vector<OutcomeRecord>> LoadOutcomes(int64_t target_id);
  // The window (StoreOptions::window_samples) of each key's last detected
  // drift (DetectChanges), for the keys that drifted.
  absl::StatusOr<std::map<PolicyKey, uint64_t>> LoadDriftWindows(int64_t target_id);
  // Timer oversleep per CPU class, staged deltas included.
  absl::StatusOr<std::vector<TimerRecord>> LoadTimerOversleep(int64_t target_id);

  // Verifications (tuner/verifier.h): one per (version, key), replaced when
  // recorded again.
  absl::Status RecordVerification(int64_t target_id, const VerificationRecord& v);
  absl::StatusOr<std::vector<VerificationRecord>> ListVerifications(int64_t target_id);
  // Keys held at a rolled-back wait (held with their rollback's version:
  // AppendPolicyVersion's VersionVerdicts).
  // Releases `held` as ListHeldKeys() read it: a hold of its key written
  // since (another tuner's rollback) stays.
  absl::Status ReleaseKey(int64_t target_id, const HeldKey& held);
  absl::StatusOr<std::vector<HeldKey>> ListHeldKeys(int64_t target_id);

  // Stores `table` as the target's next version, `based_on` + 1; sets
  // table->version and table->fitted_at (also when it then fails: they are
  // set before the write transaction). Returns the version.
  // FailedPrecondition when the target is pinned (AppendPinnedVersion).
  // Aborted, storing nothing, when the latest stored version is not
  // `based_on` (the one the table was built on; 0: none) by the time of
  // the write: another process stored one meanwhile (a tuner the agent
  // moved to, a verification's rollback), which this table does not know.
  // `verdicts` (optional): written in the same transaction
  // (as RecordVerification would; the holds as ListHeldKeys reads them);
  // their version numbers are the caller's
  // (this one is `based_on` + 1 if it is stored at all).
  absl::StatusOr<uint64_t> AppendPolicyVersion(int64_t target_id, PolicyTable* table,
                                               uint64_t based_on,
                                               const VersionVerdicts* verdicts = nullptr);
  // Replaces the evidence of the stored version table->version (same
  // decisions, newer samples); sets table->fitted_at.
  absl::Status UpdatePolicyEvidence(int64_t target_id, PolicyTable* table);
  // Every target's latest policy version (targets without one left out).
  absl::StatusOr<std::vector<std::pair<int64_t, uint64_t>>> LatestVersions();
  // Version `version` (0: the latest); nullopt when there is none.
  absl::StatusOr<std::optional<PolicyTable>> LoadPolicy(int64_t target_id, uint64_t version);
  // Stores `table` as the target's next version and pins the target to it
  // (rollback); sets table->version, table->fitted_at and origin "rollback".
  absl::StatusOr<uint64_t> AppendPinnedVersion(int64_t target_id, PolicyTable* table);
  // Lets the tuner store and push fitted versions again.
  absl::Status Unpin(int64_t target_id);

  // Profiles (storage/profile.h). SaveProfile: AlreadyExists for a taken
  // name, InvalidArgument for an invalid one; stores all or nothing.
  absl::Status SaveProfile(const Profile& profile);
  absl::StatusOr<std::vector<ProfileInfo>> ListProfiles();
  // NotFound for an unknown name.
  absl::StatusOr<Profile> LoadProfile(const std::string& name);
  absl::Status DeleteProfile(const std::string& name);
  // A snapshot of the target's policy version `version` (0: latest) with
  // its current evidence, named `name` (not stored). NotFound when the
  // target has no such version.
  absl::StatusOr<Profile> SnapshotProfile(int64_t target_id, uint64_t version,
                                          const std::string& name);

  // Creates a token called `name`, bound to `target` (an agent id) or admin
  // (target empty), and returns it: 32 random bytes in hex after "st_"; only
  // its SHA-256 is stored. AlreadyExists for a taken name; InvalidArgument
  // for neither or both of target and admin.
  absl::StatusOr<std::string> AddToken(const std::string& name, const std::string& target,
                                       bool admin);
  absl::StatusOr<std::vector<TokenRecord>> ListTokens();
  // NotFound for an unknown name; a revoked token stays listed.
  absl::Status RevokeToken(const std::string& name);
  // The valid (not revoked) token, or NotFound.
  absl::StatusOr<TokenRecord> LookupToken(const std::string& token);

  // Several tuners on one database: a tuner refits (and stores versions
  // for) a target only while it holds the target's lease. True when this
  // store holds it now (or did already); false when another does. A lease
  // ends with ReleaseTarget() or with this store's connection (PostgreSQL:
  // at once when its process dies, within about 25 s when the network
  // fails; SQLite: a lock on a byte of DB-leases, ending when this store
  // closes or its process dies). In memory: always true.
  absl::StatusOr<bool> LeaseTarget(int64_t target_id);
  void ReleaseTarget(int64_t target_id);
  // Whether the lease LeaseTarget() took is still held: false after this
  // store's PostgreSQL connection was lost and made again (the statement
  // that made it again failed, saying so).
  bool HoldsLease(int64_t target_id);

  // Changes whenever another connection (another process) committed to
  // the database since the last call (SqlDb::DataVersion).
  absl::StatusOr<int64_t> DataVersion();
  // SQLite's integrity_check: OK, or DataLoss with its findings
  // (PostgreSQL: OK).
  absl::Status CheckIntegrity();
  // SqlDb::Checkpoint(): a passive checkpoint of the write-ahead log.
  absl::Status Checkpoint();
  // Records what the agent reported applying (error empty on success).
  absl::Status RecordApplied(int64_t target_id, uint64_t version, const std::string& error);

  // Knob experiments (storage/experiments.cc, storage/experiment_record.h).
  // CreateExperiment stores a running experiment; sets id and created_at.
  absl::StatusOr<int64_t> CreateExperiment(ExperimentRecord* record);
  // The target's newest experiment of declaration `name`, if any.
  absl::StatusOr<std::optional<ExperimentRecord>> LatestExperiment(int64_t target_id,
                                                                   const std::string& name);
  // NotFound for an unknown id.
  absl::StatusOr<ExperimentRecord> LoadExperiment(int64_t id);
  // Every experiment of a target (0: of all targets), oldest first.
  absl::StatusOr<std::vector<ExperimentRecord>> ListExperiments(int64_t target_id);
  // AlreadyExists for a trial number stored before.
  absl::Status AppendKnobTrial(int64_t experiment_id, const KnobTrialRecord& trial);
  absl::StatusOr<std::vector<KnobTrialRecord>> LoadKnobTrials(int64_t experiment_id);
  // Stores the conclusion of a running experiment (record.state finished or
  // aborted) and, in the same transaction, makes `settings` (when not
  // empty) its declaration's knob settings in force. FailedPrecondition
  // when it is not running.
  absl::Status FinishExperiment(const ExperimentRecord& record,
                                const std::vector<KnobSettingRecord>& settings);
  // The agent's answer to the end: "ok" or its error.
  absl::Status RecordKnobEnd(int64_t experiment_id, const std::string& result);
  // Asks the tuner to abort a running experiment (it restores the start
  // values). FailedPrecondition when it is not running.
  absl::Status RequestAbort(int64_t experiment_id);
  // The running experiments an abort was requested for.
  absl::StatusOr<std::vector<ExperimentRecord>> AbortRequests();
  // The knob settings in force on a target, by declaration, in coordinate
  // order; ReplaceKnobSettings replaces those of the declarations it names.
  absl::StatusOr<std::vector<KnobSettingRecord>> LoadKnobSettings(int64_t target_id);
  absl::Status ReplaceKnobSettings(int64_t target_id,
                                   const std::vector<KnobSettingRecord>& settings);

 private:
  Store(std::unique_ptr<SqlDb> db, StoreOptions options)
      : options_(options), db_(std::move(db)) {}
  absl::StatusOr<uint64_t> AppendVersion(int64_t target_id, PolicyTable* table, bool pin,
                                         std::optional<uint64_t> based_on,
                                         const VersionVerdicts* verdicts)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status PutVerification(int64_t target_id, const VerificationRecord& v)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status PutHold(int64_t target_id, const HeldKey& held) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Calls `fold(window, delta)` for each of the target's staged deltas,
  // oldest first, one decoded at a time (`fold` may move out of `delta`
  // what it keeps): a target may have thousands staged
  // (a fleet's, or a flood of large batches), and holding them all decoded
  // made the compactor the tuner's largest allocation (52 MiB for 99
  // batches of 65,536 samples). Returns how many; `last_seq` (optional):
  // the seq of the last.
  absl::StatusOr<uint64_t> ForEachStagedDelta(
      int64_t target_id, const std::function<void(uint64_t, BatchDelta&)>& fold,
      uint64_t* last_seq = nullptr) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Compaction in three steps: FoldStaged() sums a target's staged deltas
  // (reads only: outside a transaction it reads one snapshot), ReadRows()
  // (after FoldStaged) adds the sums to the stored rows and encodes them
  // (reads only),
  // WriteFold() writes those rows and deletes the staged rows summed
  // (inside a write transaction). Window rows: a key's latest row grows
  // until it holds kMinWindowSamples, then a row starts at the next window.
  struct StagedFold;
  absl::Status FoldStaged(int64_t target_id, StagedFold* fold) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status ReadRows(int64_t target_id, StagedFold* fold) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status WriteFold(int64_t target_id, const StagedFold& fold)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<std::vector<TargetSummary>> QueryTargets(const std::string& where,
                                                          const std::string& arg)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `where` may bind ?1 to `arg`.
  absl::StatusOr<std::vector<ExperimentRecord>> QueryExperiments(const std::string& where,
                                                                 int64_t arg)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status WriteKnobSettings(int64_t target_id, const std::vector<KnobSettingRecord>& settings)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const StoreOptions options_;
  absl::Mutex mu_;
  std::unique_ptr<SqlDb> db_ ABSL_GUARDED_BY(mu_);
};

// Current UTC time as RFC 3339 ("2026-11-30T02:47:01Z").
std::string NowRfc3339();
// `t` as RFC 3339 UTC in whole seconds, as the store writes timestamps.
std::string Rfc3339(absl::Time t);

}  // namespace spintune

#endif  // SPINTUNE_STORAGE_STORE_H_
