#include "agent/agent.h"

#include <grpcpp/grpcpp.h>

#include <cctype>
#include <filesystem>
#include <deque>
#include <fstream>
#include <random>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "agent/batch_spool.h"
#include "agent/capture/histogram_batch.h"
#include "agent/knobs/knob_controller.h"
#include "common/file_util.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "common/version.h"
#include "policy/policy_blob.h"
#include "policy/policy_proto.h"
#include "policy/samples_csv.h"
#include "proto/sample_batch_util.h"
#include "proto/session_metadata.h"
#include "spintune/v1/spintune.grpc.pb.h"

namespace spintune {

using Stream = grpc::ClientReaderWriter<v1::AgentMessage, v1::TunerMessage>;

// Threads: Run()'s (produces, writes batches, waits for acks), the session's
// reader (acks, policies, knob commands) and whoever calls Stop() or
// stats(). The delivery state (pending batches, seqs, the spool, the
// source, stats) is guarded by mu_; cv_ (with mu_) wakes Run() when an ack,
// a refusal, the drain or Stop() arrives. write_mu_ serialises writes to the
// stream and is never taken with mu_ held. What is not annotated is either
// const, set by Run() before the first session and read-only after (hello_,
// sink_), or Run()'s thread's alone (channel_, stub_, reconnect_).
class Agent::Impl {
 public:
  Impl(AgentOptions options, std::unique_ptr<SampleSource> source,
       std::unique_ptr<PolicySink> sink)
      : options_(std::move(options)), source_(std::move(source)), sink_(std::move(sink)) {
    tuners_ = absl::StrSplit(options_.tuner_address, ',', absl::SkipWhitespace());
    if (tuners_.empty()) tuners_.push_back(options_.tuner_address);
  }

  absl::Status Run();
  void Stop() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (stop_) {
      stop_deadline_ = absl::Now();  // asked again: no more waiting for acks
    } else {
      if (running_) ProduceInterval();
      // With a spool nothing is lost by stopping: give batches in flight a
      // moment to be acknowledged, no more.
      stop_deadline_ = absl::Now() + (spool_ ? std::min(options_.drain_timeout, absl::Seconds(5))
                                             : options_.drain_timeout);
    }
    stop_ = true;
    cv_.SignalAll();
  }
  AgentStats stats() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return stats_;
  }

 private:
  struct Pending {
    uint64_t seq;
    v1::AgentMessage message;
    absl::Time sent_at = absl::InfinitePast();  // written on the current session
  };
  // Keeps `batch` until acknowledged: in memory and in the spool.
  void Keep(v1::AgentMessage message) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Mirrors what a full spool dropped in pending_.
  void ApplyDrops(const SpoolDrops& drops) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Forgets pending batches up to `seq` (acknowledged), or exactly `seq`
  // (returning its completion samples), also from the spool if `spool`.
  void ForgetThrough(uint64_t seq) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  uint64_t Forget(uint64_t seq, bool spool = true) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Renumbers pending batches, the spool and the next seq by `delta`.
  absl::Status ShiftSeqs(int64_t delta) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Lines the agent's sequence up with the tuner's last durable seq
  // (HelloAck). FailedPrecondition when a deterministic source cannot
  // resend what the tuner lacks.
  absl::Status Resume(uint64_t durable) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Completion samples the next batch may hold: the batch size, capped by
  // what --max-samples leaves (0: nothing more to produce).
  size_t NextBatchSize() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (options_.max_samples == 0) return options_.batch_size;
    return std::min<uint64_t>(options_.batch_size,
                              options_.max_samples - stats_.samples_generated);
  }
  // Draws and discards batches until the source has produced `batches`
  // (the ones the spool holds or the tuner acknowledged).
  absl::Status FastForward(uint64_t batches) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Live and paced sources keep measuring while the tuner is away.
  bool ProducesDuringOutage() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return source_->live() || options_.samples_per_second > 0;
  }
  // When the next batch may be due: a paced source's next, a live source's
  // quiet_until().
  absl::Time NextDue() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const absl::Time ready = source_->quiet_until();
    if (options_.samples_per_second <= 0) return ready;
    return std::max(ready, pace_start_ + absl::Seconds(static_cast<double>(stats_.samples_generated) /
                                                       options_.samples_per_second));
  }
  enum class SessionEnd { kFinished, kBroken, kStopped };

  absl::StatusOr<SessionEnd> RunSession();
  // A session with a live tuner that stores nothing now: it counts as
  // contact (--give-up-after), and Run() backs off in full before the next.
  void DeferredContact() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    session_established_ = true;
    deferred_ = true;
    acked_at_session_start_ = stats_.batches_acked;
  }
  void ReadLoop(Stream* stream);
  // Attaches the knob controller to the session and declares its knobs.
  void StartKnobs(Stream* stream);
  void HandlePolicy(const v1::PolicyUpdate& update, Stream* stream);
  // Validates `table` for every device, then hands the blobs to the sink.
  // Validates `table` against the bounds and writes it through the sink;
  // `*write_failed` (optional) tells a failed write from a refusal.
  absl::Status ApplyTable(const v1::PolicyTable& table, bool* write_failed = nullptr);
  std::string LastGoodPath() const;
  void ReapplyLastGood();
  bool Write(Stream* stream, const v1::AgentMessage& message) ABSL_LOCKS_EXCLUDED(mu_);
  // Produces the next batch (seq = generated_seq_ + 1) into pending_.
  // Returns false when the source has nothing (now, or at its end).
  absl::StatusOr<bool> Produce() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Stopping: a live source's interval in progress (the histograms it has
  // not handed over yet) goes into pending_, sent with what is in flight.
  void ProduceInterval() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Record(const v1::SampleBatch& batch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Stop() was called and everything in flight is acknowledged, or the
  // flush deadline passed.
  bool StopNow() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stop_ && (pending_.empty() || absl::Now() > stop_deadline_);
  }
  // DataLoss summarising what was refused or dropped this run, else OK.
  absl::Status Lost() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool AllProduced() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return source_done_ ||
           (options_.max_samples > 0 && stats_.samples_generated >= options_.max_samples);
  }

  const AgentOptions options_;
  std::unique_ptr<SampleSource> source_ ABSL_PT_GUARDED_BY(mu_);
  std::unique_ptr<PolicySink> sink_;
  v1::Hello hello_;
  // A new channel for the tuner (after a failed session: a fresh one).
  absl::Status Connect();
  // The tuners to try, in order: after a failed session the next one.
  // Run()'s thread alone.
  std::vector<std::string> tuners_;
  size_t tuner_index_ = 0;
  const std::string& tuner() const { return tuners_[tuner_index_]; }
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Tuner::Stub> stub_;
  bool reconnect_ = false;

  mutable absl::Mutex mu_;
  absl::CondVar cv_;  // with mu_
  std::unique_ptr<CompletionsCsvWriter> record_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // Flush until then.
  absl::Time stop_deadline_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  bool session_established_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  // The session ended because the tuner deferred a batch (Rejected with
  // retry: storage failing or full, rate limit): the tuner is reachable, so
  // a ready channel says nothing and the next session waits the backoff.
  bool deferred_ ABSL_GUARDED_BY(mu_) = false;
  // stats_.batches_acked when the session came up (did the session store any?).
  uint64_t acked_at_session_start_ ABSL_GUARDED_BY(mu_) = 0;
  bool drained_ ABSL_GUARDED_BY(mu_) = false;
  bool source_done_ ABSL_GUARDED_BY(mu_) = false;
  bool running_ ABSL_GUARDED_BY(mu_) = false;  // inside Run(): batches may still go out
  // Seq of the newest batch produced. For a deterministic source seq N is
  // always the source's Nth batch, across restarts.
  uint64_t generated_seq_ ABSL_GUARDED_BY(mu_) = 0;
  // Batches drawn from the source, skipped ones included.
  uint64_t source_batches_ ABSL_GUARDED_BY(mu_) = 0;
  // Where generated_seq_ stands is known: from the spool's history or a
  // HelloAck. A live source that starts without one renumbers what it
  // measured once the first HelloAck says where the tuner's sequence is.
  bool seq_base_known_ ABSL_GUARDED_BY(mu_) = false;
  // Lowest seq the spool may drop: everything below may already be stored.
  uint64_t min_droppable_seq_ ABSL_GUARDED_BY(mu_) = 1;
  absl::Time pace_start_ ABSL_GUARDED_BY(mu_) = absl::Now();
  std::deque<Pending> pending_ ABSL_GUARDED_BY(mu_);  // ordered by seq
  // pending_ prefix written on the current session.
  size_t sent_count_ ABSL_GUARDED_BY(mu_) = 0;
  std::unique_ptr<BatchSpool> spool_ ABSL_GUARDED_BY(mu_);
  AgentStats stats_ ABSL_GUARDED_BY(mu_);

  absl::Mutex write_mu_;  // one Write() on the stream at a time
};

absl::StatusOr<bool> Agent::Impl::Produce() {
  const size_t want = NextBatchSize();
  if (want == 0) return false;
  v1::AgentMessage message;
  v1::SampleBatch* batch = message.mutable_batch();
  auto got = source_->Fill(want, batch);
  if (!got.ok()) return got.status();
  if (!options_.send_dispatch) {
    batch->clear_dispatches();
    batch->clear_dispatch_histograms();
  }
  if (options_.histogram_bytes) PackBuckets(batch);
  if (*got == 0 && !HasMeasurements(*batch)) {
    if (source_->exhausted()) source_done_ = true;
    return false;
  }
  ++source_batches_;
  batch->set_seq(++generated_seq_);
  stats_.samples_generated += *got;
  if (record_) {
    absl::Status s = Record(*batch);
    if (!s.ok()) return s;
  }
  Keep(std::move(message));
  return true;
}

void Agent::Impl::ProduceInterval() {
  if (!source_->live() || AllProduced()) return;
  source_->EndInterval();
  // Bounded: what the source held, not what it measures meanwhile.
  for (int i = 0; i < 64; ++i) {
    auto more = Produce();
    if (!more.ok()) {
      Logger().warn("stopping: the interval in progress is lost: {}", more.status().message());
      return;
    }
    if (!*more) return;
  }
}

absl::Status Agent::Impl::FastForward(uint64_t batches) {
  while (source_batches_ < batches) {
    v1::SampleBatch skipped;
    const size_t want = NextBatchSize();
    if (want == 0) break;
    auto got = source_->Fill(want, &skipped);
    if (!got.ok()) return got.status();
    if (*got == 0 && !HasMeasurements(skipped)) break;
    ++source_batches_;
    stats_.samples_generated += *got;
    stats_.samples_skipped += *got;
  }
  generated_seq_ = std::max(generated_seq_, source_batches_);
  // A paced source continues at its rate from here, not from the start.
  if (options_.samples_per_second > 0) {
    pace_start_ = absl::Now() - absl::Seconds(static_cast<double>(stats_.samples_generated) /
                                              options_.samples_per_second);
  }
  return absl::OkStatus();
}

void Agent::Impl::Keep(v1::AgentMessage message) {
  const uint64_t seq = message.batch().seq();
  if (spool_) {
    // Only batches the tuner cannot have stored yet may be dropped: none
    // written on the current session, none at or below what the last
    // HelloAck (or, before one, the spool at start) left unconfirmed.
    const uint64_t unsent = sent_count_ < pending_.size() ? pending_[sent_count_].seq : seq;
    auto drops = spool_->Append(message.batch(), std::max(min_droppable_seq_, unsent));
    if (!drops.ok()) {
      Logger().warn("spool: {}; batch seq={} kept in memory only", drops.status().message(), seq);
    } else if (drops->batches > 0) {
      ApplyDrops(*drops);
    }
  }
  pending_.push_back({seq, std::move(message)});
}

void Agent::Impl::ApplyDrops(const SpoolDrops& drops) {
  stats_.spool_dropped_batches += drops.batches;
  stats_.spool_dropped_samples += drops.samples;
  for (uint64_t seq : drops.removed) Forget(seq, /*spool=*/false);
  for (const auto& placeholder : drops.placeholders) {
    for (auto& p : pending_) {
      if (p.seq != placeholder.seq()) continue;
      *p.message.mutable_batch() = placeholder;
      break;
    }
    Logger().warn("spool full: batches seq {}..{} ({} samples) dropped; the tuner is told",
                  placeholder.seq(), placeholder.dropped().last_seq(),
                  placeholder.dropped().samples());
  }
}

absl::Status Agent::Impl::ShiftSeqs(int64_t delta) {
  if (spool_) SPINTUNE_RETURN_IF_ERROR(spool_->Shift(delta));
  for (auto& p : pending_) {
    p.seq += static_cast<uint64_t>(delta);
    v1::SampleBatch* b = p.message.mutable_batch();
    b->set_seq(p.seq);
    if (b->has_dropped()) {
      b->mutable_dropped()->set_last_seq(b->dropped().last_seq() + static_cast<uint64_t>(delta));
    }
  }
  generated_seq_ += static_cast<uint64_t>(delta);
  return absl::OkStatus();
}

absl::Status Agent::Impl::Resume(uint64_t durable) {
  min_droppable_seq_ = durable + 1;
  if (source_->live()) {
    if (!seq_base_known_ && durable > 0) {
      // First contact without a spool history: what was measured so far is
      // new, numbered after what the tuner holds.
      Logger().info("the tuner holds seq 1..{} of agent id '{}': numbering new batches after it",
                    durable, options_.agent_id);
      SPINTUNE_RETURN_IF_ERROR(ShiftSeqs(static_cast<int64_t>(durable)));
    } else if (durable > generated_seq_) {
      Logger().error("the tuner holds seq {}..{} of agent id '{}' that this agent never sent: "
                     "another client reports as this agent id (see --require-tokens); new "
                     "batches follow seq {}",
                     generated_seq_ + 1, durable, options_.agent_id, durable);
      generated_seq_ = durable;
    }
  } else if (durable > generated_seq_) {
    // Regenerated batches are checked against what the tuner holds: the
    // same content is acknowledged as a duplicate, other content refused.
    const std::string why = seq_base_known_
                                ? "this agent's spool says it produced only seq 1.." +
                                      std::to_string(generated_seq_)
                                : "this agent has no spool history";
    Logger().warn("the tuner holds seq 1..{} of agent id '{}' and {}: regenerating seq {}..{} "
                  "to check them (a conflict means another client reported as this agent id)",
                  durable, options_.agent_id, why, generated_seq_ + 1, durable);
  }
  seq_base_known_ = true;
  if (!pending_.empty() && pending_.front().seq > durable + 1) {
    const std::string lost = absl::StrCat("the tuner's last durable seq is ", durable,
                                          " but this agent's oldest unacknowledged batch is seq ",
                                          pending_.front().seq, ": seq ", durable + 1, "..",
                                          pending_.front().seq - 1,
                                          " were acknowledged and are gone from the tuner (was "
                                          "its database replaced?)");
    if (!source_->live()) {
      return absl::FailedPreconditionError(
          lost + "; restart the agent with an empty --state-dir to regenerate them");
    }
    Logger().error("{}; renumbering the {} unacknowledged batches after it", lost,
                   pending_.size());
    SPINTUNE_RETURN_IF_ERROR(
        ShiftSeqs(static_cast<int64_t>(durable + 1) - static_cast<int64_t>(pending_.front().seq)));
  }
  return absl::OkStatus();
}

void Agent::Impl::ForgetThrough(uint64_t seq) {
  const absl::Time now = absl::Now();
  while (!pending_.empty() && pending_.front().seq <= seq) {
    if (pending_.front().sent_at != absl::InfinitePast()) {
      stats_.ack_latency.Record(
          static_cast<uint64_t>(absl::ToInt64Nanoseconds(now - pending_.front().sent_at)));
    }
    pending_.pop_front();
    if (sent_count_ > 0) --sent_count_;
  }
  if (spool_) spool_->AckThrough(seq);
}

uint64_t Agent::Impl::Forget(uint64_t seq, bool spool) {
  uint64_t samples = 0;
  for (size_t i = 0; i < pending_.size(); ++i) {
    if (pending_[i].seq != seq) continue;
    const v1::SampleBatch& b = pending_[i].message.batch();
    samples = b.has_dropped() ? 0 : CompletionSamples(b);
    pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
    if (i < sent_count_) --sent_count_;
    break;
  }
  if (spool && spool_) spool_->Remove(seq);
  return samples;
}

absl::Status Agent::Impl::Record(const v1::SampleBatch& batch) {
  const auto& c = batch.completions();
  CompletionRow row;
  for (int i = 0; i < c.wait_ns_size(); ++i) {
    row.device = hello_.devices(c.device_index(i)).name();
    row.opcode = c.opcode(i);
    row.bytes = c.bytes(i);
    row.wait_ns = c.wait_ns(i);
    row.cpu_class = hello_.target().cpu_classes(c.cpu_class_index(i)).name();
    row.path = c.path(i) == v1::WAIT_PATH_IRQ    ? "irq"
               : c.path(i) == v1::WAIT_PATH_SPIN ? "spin"
                                                 : "unknown";
    row.error = c.flags(i) & 1;
    row.timeout = c.flags(i) & 2;
    record_->Write(row);
  }
  return record_->Flush();
}

bool Agent::Impl::Write(Stream* stream, const v1::AgentMessage& message) {
  absl::MutexLock lock(&write_mu_);
  return stream->Write(message);
}

absl::Status Agent::Impl::ApplyTable(const v1::PolicyTable& wire, bool* write_failed) {
  auto table = PolicyTableFromProto(wire, hello_);
  if (!table.ok()) return table.status();
  if (absl::Status s = CheckPolicyBounds(*table, options_.bounds); !s.ok()) return s;
  // Drivers that read no A/B trials (format 3) wait by each entry for every
  // command: a tuner that sent trials anyway (one that did not read the
  // Hello's max_blob_format) gets a before/after verification from them.
  if (sink_->MaxBlobFormat() < SPINTUNE_BLOB_VERSION_3) {
    for (auto& e : table->entries) e.trial.reset();
  }
  // Validate every device first, then write: a bad table changes nothing.
  std::vector<std::pair<std::string, std::string>> blobs;
  for (int i = 0; i < hello_.devices_size(); ++i) {
    const std::string& device = hello_.devices(i).name();
    auto blob = EncodePolicyBlob(*table, device);
    if (!blob.ok()) return blob.status();
    blobs.emplace_back(device, *blob);
  }
  for (const auto& [device, blob] : blobs) {
    absl::Status s = sink_->Apply(device, blob);
    if (!s.ok()) {
      if (write_failed != nullptr) *write_failed = true;
      return s;
    }
    Logger().info("applied policy version={} device={} sink={}", wire.version(), device,
                  sink_->Where(device));
  }
  return absl::OkStatus();
}

std::string Agent::Impl::LastGoodPath() const {
  return options_.state_dir + "/" + SafeFileName(options_.agent_id) + ".last-good.pb";
}

void Agent::Impl::ReapplyLastGood() {
  if (options_.state_dir.empty()) return;
  auto bytes = ReadFileToString(LastGoodPath());
  if (!bytes.ok()) return;  // none kept yet
  v1::PolicyTable table;
  absl::Status s = table.ParseFromString(*bytes) ? ApplyTable(table)
                                                 : absl::DataLossError("unreadable");
  if (!s.ok()) {
    Logger().warn("last good table {} not re-applied: {}", LastGoodPath(), s.message());
    return;
  }
  absl::MutexLock lock(&mu_);
  if (auto applied = PolicyTableFromProto(table, hello_); applied.ok()) {
    source_->OnTableApplied(*applied);
  }
  stats_.applied_version = table.version();
  stats_.reapplied_version = table.version();
  Logger().info("re-applied last good table version={} from {}", table.version(), LastGoodPath());
}

void Agent::Impl::HandlePolicy(const v1::PolicyUpdate& update, Stream* stream) {
  v1::AgentMessage reply;
  auto* applied = reply.mutable_applied();
  applied->set_version(update.table().version());
  bool write_failed = false;
  absl::Status status = ApplyTable(update.table(), &write_failed);
  applied->set_ok(status.ok());
  if (status.ok()) {
    if (auto table = PolicyTableFromProto(update.table(), hello_); table.ok()) {
      absl::MutexLock lock(&mu_);  // the source is used under mu_
      source_->OnTableApplied(*table);
    }
    if (!options_.state_dir.empty()) {
      absl::Status kept = WriteFileAtomically(LastGoodPath(), update.table().SerializeAsString());
      if (!kept.ok()) Logger().warn("cannot keep the last good table: {}", kept.message());
    }
    absl::MutexLock lock(&mu_);
    stats_.applied_version = update.table().version();
  } else {
    applied->set_error(std::string(status.message()));
    absl::MutexLock lock(&mu_);
    if (write_failed) {
      ++stats_.table_write_failures;
      Logger().error("could not write policy version={}: {}; version {} stays in force",
                     update.table().version(), status.message(), stats_.applied_version);
    } else {
      ++stats_.tables_refused;
      Logger().error("refused policy version={}: {}", update.table().version(),
                     status.message());
    }
    stats_.last_table_error = std::string(status.message());
  }
  Write(stream, reply);
}

void Agent::Impl::StartKnobs(Stream* stream) {
  options_.knobs->Attach([this, stream](const v1::AgentMessage& m) { return Write(stream, m); });
  auto declared = options_.knobs->Declare();
  if (!declared.ok()) {
    Logger().error("knobs not declared: {}", declared.status().message());
    return;
  }
  v1::AgentMessage m;
  *m.mutable_knobs_declared() = std::move(*declared);
  Write(stream, m);
}

void Agent::Impl::ReadLoop(Stream* stream) {
  v1::TunerMessage msg;
  while (stream->Read(&msg)) {
    switch (msg.msg_case()) {
      case v1::TunerMessage::kBatchAck: {
        absl::MutexLock lock(&mu_);
        ForgetThrough(msg.batch_ack().seq());
        ++stats_.batches_acked;
        if (msg.batch_ack().duplicate()) ++stats_.duplicate_acks;
        cv_.SignalAll();
        break;
      }
      case v1::TunerMessage::kRejected: {
        absl::MutexLock lock(&mu_);
        const auto& r = msg.rejected();
        if (r.seq() != 0 && !r.retry()) {
          // The tuner used the seq up and stored nothing of it: never resend.
          Logger().error("tuner refused seq={} code={}: {}; its samples are not stored",
                         r.seq(), r.code(), r.message());
          stats_.samples_rejected += Forget(r.seq());
          ++stats_.batches_rejected;
        } else if (r.seq() != 0) {
          // Not stored now (storage, rate): reconnect after a backoff, resend.
          Logger().warn("tuner deferred seq={} code={}: {}", r.seq(), r.code(), r.message());
          deferred_ = true;
          broken_ = true;
        } else {
          Logger().error("tuner rejected a message code={}: {}", r.code(), r.message());
        }
        cv_.SignalAll();
        break;
      }
      case v1::TunerMessage::kPolicy:
        HandlePolicy(msg.policy(), stream);
        break;
      case v1::TunerMessage::kKnob:
        if (options_.knobs) options_.knobs->OnCommand(msg.knob());
        break;
      case v1::TunerMessage::kDrained: {
        absl::MutexLock lock(&mu_);
        drained_ = true;
        stats_.tuner_total_samples = msg.drained().total_samples();
        cv_.SignalAll();
        break;
      }
      default:
        break;
    }
  }
  absl::MutexLock lock(&mu_);
  broken_ = true;
  cv_.SignalAll();
}

absl::Status Agent::Impl::Connect() {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  // A channel of its own (not gRPC's process-wide subchannel pool): after a
  // failed session the next attempt connects now, on the agent's backoff,
  // not after gRPC's (which kept a restarted tuner out for seconds).
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  SPINTUNE_ASSIGN_OR_RETURN(channel_, MakeChannel(tuner(), options_.security, args));
  stub_ = v1::Tuner::NewStub(channel_);
  return absl::OkStatus();
}

absl::StatusOr<Agent::Impl::SessionEnd> Agent::Impl::RunSession() {
  grpc::ClientContext ctx;
  AddCallCredentials(options_.security, &ctx);
  if (reconnect_) SPINTUNE_RETURN_IF_ERROR(Connect());
  reconnect_ = true;  // unless the session comes up
  auto stream = stub_->Session(&ctx);
  v1::AgentMessage hello_msg;
  *hello_msg.mutable_hello() = hello_;
  {
    absl::MutexLock lock(&mu_);
    hello_msg.mutable_hello()->set_applied_policy_version(stats_.applied_version);
  }
  v1::TunerMessage first;
  if (!stream->Write(hello_msg) || !stream->Read(&first) || !first.has_hello_ack()) {
    grpc::Status s = stream->Finish();
    Logger().warn("session with {} failed: {}", tuner(),
                  s.ok() ? "no hello ack" : s.error_message());
    if (s.error_code() == grpc::StatusCode::INVALID_ARGUMENT ||
        s.error_code() == grpc::StatusCode::FAILED_PRECONDITION ||
        s.error_code() == grpc::StatusCode::PERMISSION_DENIED ||
        s.error_code() == grpc::StatusCode::UNAUTHENTICATED) {
      return absl::FailedPreconditionError(
          absl::StrCat("tuner refused the session: ", s.error_message()));
    }
    if (s.error_code() == grpc::StatusCode::UNAVAILABLE &&
        ctx.GetServerTrailingMetadata().count(kRetryLaterTrailer) > 0) {
      // The tuner itself said "retry later" (its storage fails): it is alive,
      // so this is contact, not an outage (--give-up-after does not run), and
      // the agent backs off in full; reconnecting as soon as the channel is
      // up would ask a tuner whose storage is down once per round trip.
      absl::MutexLock lock(&mu_);
      DeferredContact();
    }
    return SessionEnd::kBroken;
  }
  if (options_.histogram_bytes && !first.hello_ack().accepts_bucket_bytes()) {
    // It would refuse every histogram delta (and its seq with it).
    Logger().error("tuner {} does not read histogram deltas as bytes (HistogramDelta.buckets: "
                   "a tuner older than this agent): nothing sent; upgrade it, or run the agent "
                   "with --histogram-wire arrays",
                   tuner());
    ctx.TryCancel();
    stream->Finish();
    // As with a tuner that defers every batch: back off in full and keep
    // trying (it may be upgraded, or the next tuner of a list reads them).
    absl::MutexLock lock(&mu_);
    DeferredContact();
    return SessionEnd::kBroken;
  }
  reconnect_ = false;
  const uint64_t durable = first.hello_ack().last_durable_seq();
  size_t resending = 0;
  {
    absl::MutexLock lock(&mu_);
    session_established_ = true;
    broken_ = false;
    deferred_ = false;
    acked_at_session_start_ = stats_.batches_acked;
    drained_ = false;
    sent_count_ = 0;
    for (auto& p : pending_) p.sent_at = absl::InfinitePast();  // latency is per session
    // Batches at or below `durable` are resent too: the tuner acknowledges
    // each as a duplicate after checking it holds the same content.
    absl::Status s = Resume(durable);
    if (!s.ok()) {
      ctx.TryCancel();
      stream->Finish();
      return s;
    }
    resending = pending_.size();
  }
  Logger().info("session up tuner={} last_durable_seq={} resending={} policy_version={}",
                tuner(), durable, resending,
                first.hello_ack().current_policy_version());
  std::thread reader([this, s = stream.get()] { ReadLoop(s); });
  bool ok = true;
  if (options_.knobs) StartKnobs(stream.get());

  SessionEnd end = SessionEnd::kBroken;
  bool drain_sent = false;
  absl::Time drain_deadline = absl::InfiniteFuture();
  while (ok) {
    absl::ReleasableMutexLock lock(&mu_);
    if (broken_) break;
    if (StopNow()) {
      end = SessionEnd::kStopped;
      break;
    }
    if (sent_count_ < pending_.size() && sent_count_ < options_.max_unacked_batches) {
      // Resend what the tuner lacks, then new batches, in seq order.
      v1::AgentMessage m = pending_[sent_count_].message;
      pending_[sent_count_].sent_at = absl::Now();
      ++sent_count_;
      lock.Release();
      ok = Write(stream.get(), m);
      continue;
    }
    if (!stop_ && !AllProduced() && sent_count_ == pending_.size() &&
        pending_.size() < options_.max_unacked_batches) {
      const absl::Time due = NextDue();
      if (absl::Now() < due) {
        cv_.WaitWithTimeout(&mu_, due - absl::Now());
        continue;
      }
      auto more = Produce();
      if (!more.ok()) {
        lock.Release();
        ctx.TryCancel();
        reader.join();
        stream->Finish();
        return more.status();
      }
      if (!*more && !source_done_ && NextDue() <= absl::Now()) {
        // A live source with nothing right now: let acks and Stop() in.
        cv_.WaitWithTimeout(&mu_, absl::Milliseconds(20));
      }
      continue;
    }
    const bool knobs_busy = options_.knobs && options_.knobs->busy();  // an experiment runs
    if (!stop_ && AllProduced() && pending_.empty() && !knobs_busy) {
      if (drained_) {
        end = SessionEnd::kFinished;
        break;
      }
      if (!drain_sent) {
        drain_sent = true;
        drain_deadline = absl::Now() + options_.drain_timeout;
        lock.Release();
        v1::AgentMessage drain;
        drain.mutable_drain();
        ok = Write(stream.get(), drain);
        continue;
      }
      if (absl::Now() > drain_deadline) {
        Logger().warn("no final table within {}s; finishing",
                      absl::ToDoubleSeconds(options_.drain_timeout));
        end = SessionEnd::kFinished;
        break;
      }
    }
    cv_.WaitWithTimeout(&mu_, absl::Milliseconds(200));
  }

  if (options_.knobs) options_.knobs->Detach();  // before the stream goes
  if (end == SessionEnd::kBroken) {
    ctx.TryCancel();
  } else {
    absl::MutexLock lock(&write_mu_);
    stream->WritesDone();
  }
  reader.join();
  grpc::Status status = stream->Finish();
  if (end == SessionEnd::kBroken) {
    Logger().warn("session broken: {}", status.ok() ? "stream closed" : status.error_message());
  }
  return end;
}

absl::Status Agent::Impl::Run() {
  if (options_.agent_id.empty()) return absl::InvalidArgumentError("agent id must not be empty");
  if (options_.batch_size == 0 || options_.max_unacked_batches == 0) {
    return absl::InvalidArgumentError("batch size and window must be > 0");
  }
  {
    absl::MutexLock lock(&mu_);  // Stop() and stats() may look already
    source_->Describe(&hello_);
    pace_start_ = absl::Now();
    running_ = true;
  }
  absl::Cleanup not_running = [this] {
    absl::MutexLock lock(&mu_);
    running_ = false;
  };
  hello_.set_agent_id(options_.agent_id);
  hello_.set_agent_version(Version());
  hello_.set_max_blob_format(sink_->MaxBlobFormat());
  if (!options_.state_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(options_.state_dir, ec);
    if (ec) {
      Logger().warn("state dir {}: {}; the last good table will not be kept",
                    options_.state_dir, ec.message());
    }
  }
  ReapplyLastGood();
  if (!options_.spool_dir.empty()) {
    auto spool = BatchSpool::Open(options_.spool_dir, options_.spool_max_bytes);
    if (!spool.ok()) return spool.status();
    auto restored = (*spool)->LoadAll();
    if (!restored.ok()) return restored.status();
    absl::MutexLock lock(&mu_);
    spool_ = std::move(*spool);
    for (auto& b : *restored) {
      v1::AgentMessage m;
      *m.mutable_batch() = std::move(b);
      pending_.push_back({m.batch().seq(), std::move(m)});
    }
    stats_.spool_dropped_batches += spool_->unreadable();
    generated_seq_ = spool_->last_seq();
    seq_base_known_ = generated_seq_ > 0;
    // Until a HelloAck says otherwise, any of them may be stored already.
    min_droppable_seq_ = generated_seq_ + 1;
    stats_.restored_batches = pending_.size();
    if (!pending_.empty()) {
      Logger().info("spool {}: {} batches to resend (seq {}..{})", options_.spool_dir,
                    pending_.size(), pending_.front().seq, pending_.back().seq);
    }
    if (!source_->live() && generated_seq_ > 0) {
      // A deterministic source continues where this agent id left off: its
      // batches up to the spool's last seq are in the spool or acknowledged.
      SPINTUNE_RETURN_IF_ERROR(FastForward(generated_seq_));
      Logger().info(
          "resumed agent id {}: an earlier run sent the stream's first {} batches ({} samples; "
          "{} of them still in the spool, resent now); this run skips them and sends the "
          "stream from sample {}{}",
          options_.agent_id, generated_seq_, stats_.samples_skipped, pending_.size(),
          stats_.samples_skipped + 1,
          options_.max_samples > 0 ? absl::StrCat(" to ", options_.max_samples) : "");
    }
  }
  if (!options_.record_csv.empty()) {
    SPINTUNE_ASSIGN_OR_RETURN(
        auto record, CompletionsCsvWriter::Open(options_.record_csv, {}, /*append=*/true));
    absl::MutexLock lock(&mu_);
    record_ = std::move(record);
  }
  SPINTUNE_RETURN_IF_ERROR(Connect());

  absl::Duration backoff = options_.initial_backoff;
  absl::Time last_session = absl::Now();
  std::mt19937_64 jitter(std::hash<std::string>()(options_.agent_id));
  while (true) {
    auto end = RunSession();
    bool deferred = false;  // the tuner is up but stores nothing now
    if (!end.ok()) return end.status();
    if (*end == SessionEnd::kFinished) {
      absl::MutexLock lock(&mu_);
      return Lost();
    }
    if (*end == SessionEnd::kStopped) break;
    if (tuners_.size() > 1) {
      tuner_index_ = (tuner_index_ + 1) % tuners_.size();
      Logger().warn("moving on to tuner {}", tuner());
    }
    {
      absl::MutexLock lock(&mu_);
      ++stats_.reconnects;
      if (session_established_) {
        session_established_ = false;
        last_session = absl::Now();
        // A session that ended on a deferral without storing anything keeps
        // backing off: reconnecting at once would resend the same batches to
        // a tuner whose storage is down, as fast as the round trip allows.
        deferred = deferred_;
        if (!deferred || stats_.batches_acked > acked_at_session_start_) {
          backoff = options_.initial_backoff;
        }
      }
      if (StopNow()) break;
    }
    if (options_.give_up_after > absl::ZeroDuration() &&
        absl::Now() - last_session > options_.give_up_after) {
      return absl::DeadlineExceededError(absl::StrCat(
          "no session with ", options_.tuner_address, " for ",
          absl::FormatDuration(options_.give_up_after)));
    }
    // Exponential backoff with +-20% jitter, cut short when the channel
    // connects (asking for its state makes it try) unless the tuner deferred
    // (then the channel is up all along); live and paced sources keep
    // measuring into the spool meanwhile.
    std::uniform_real_distribution<double> j(0.8, 1.2);
    const absl::Time until = absl::Now() + backoff * j(jitter);
    constexpr absl::Duration kSlice = absl::Milliseconds(50);
    absl::MutexLock lock(&mu_);
    while (!StopNow() && absl::Now() < until) {
      if (!deferred && channel_->GetState(/*try_to_connect=*/true) == GRPC_CHANNEL_READY) break;
      if (!ProducesDuringOutage() || AllProduced() || stop_) {
        const absl::Time wake = absl::Now() + std::min(until - absl::Now(), kSlice);
        while (!StopNow() && !cv_.WaitWithDeadline(&mu_, wake)) {
        }
        continue;
      }
      const absl::Time due = NextDue();
      if (absl::Now() < due) {
        cv_.WaitWithTimeout(&mu_, std::min({due - absl::Now(), until - absl::Now(), kSlice}));
        continue;
      }
      auto more = Produce();
      if (!more.ok()) return more.status();
      if (!*more && NextDue() <= absl::Now()) cv_.WaitWithTimeout(&mu_, absl::Milliseconds(20));
    }
    if (StopNow()) break;
    backoff = std::min(backoff * 2, options_.max_backoff);
  }
  absl::MutexLock lock(&mu_);
  if (!pending_.empty()) {
    if (spool_) {
      Logger().info("stopped with {} batches not acknowledged, kept in the spool {}",
                    pending_.size(), options_.spool_dir);
      return Lost();
    }
    return absl::UnavailableError(absl::StrCat("stopped with ", pending_.size(),
                                               " batches not acknowledged by the tuner"));
  }
  return Lost();
}

absl::Status Agent::Impl::Lost() const {
  if (stats_.batches_rejected == 0 && stats_.spool_dropped_batches == 0) return absl::OkStatus();
  return absl::DataLossError(absl::StrCat(
      "not stored: ", stats_.batches_rejected, " batches (", stats_.samples_rejected,
      " samples) refused by the tuner, ", stats_.spool_dropped_batches, " batches (",
      stats_.spool_dropped_samples, " samples) dropped from the full spool"));
}

Agent::Agent(AgentOptions options, std::unique_ptr<SampleSource> source,
             std::unique_ptr<PolicySink> sink)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(source), std::move(sink))) {}
Agent::~Agent() = default;
absl::Status Agent::Run() { return impl_->Run(); }
void Agent::Stop() { impl_->Stop(); }
AgentStats Agent::stats() const { return impl_->stats(); }

}  // namespace spintune
