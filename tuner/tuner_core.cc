#include "tuner/tuner_core.h"

#include <pthread.h>

#include "absl/strings/str_cat.h"
#include "common/fingerprint.h"
#include "common/logging.h"
#include "common/printable.h"
#include "common/status_macros.h"
#include "proto/sample_batch_util.h"
#include "policy/policy_json.h"
#include "policy/policy_proto.h"
#include "tuner/batch_decoder.h"
#include "tuner/experiment_runner.h"
#include "tuner/fit_inputs.h"

namespace spintune {
namespace {

v1::TunerMessage RejectedMessage(uint64_t seq, const absl::Status& status, bool retry) {
  v1::TunerMessage m;
  auto* r = m.mutable_rejected();
  r->set_seq(seq);
  r->set_code(static_cast<int>(status.code()));
  r->set_message(std::string(status.message()));
  r->set_retry(retry);
  return m;
}

// Longest PolicyApplied.error kept (log and database).
constexpr size_t kMaxAppliedErrorBytes = 1024;

// A placeholder for batches the agent's spool dropped: nothing else in it,
// a sane range and at most a full batch of samples per batch.
absl::Status CheckPlaceholder(const v1::SampleBatch& batch) {
  const auto& d = batch.dropped();
  if (HasMeasurements(batch)) {
    return absl::InvalidArgumentError("dropped: a placeholder carries no samples");
  }
  if (d.last_seq() < batch.seq() || d.last_seq() - batch.seq() >= (uint64_t{1} << 32)) {
    return absl::InvalidArgumentError(
        absl::StrCat("dropped.last_seq: ", d.last_seq(), " is not in seq .. seq + 2^32"));
  }
  const uint64_t batches = d.last_seq() - batch.seq() + 1;
  if (d.samples() > batches * kMaxCompletionsPerBatch) {
    return absl::InvalidArgumentError(absl::StrCat("dropped.samples: ", d.samples(), " in ",
                                                   batches, " batches is over ",
                                                   kMaxCompletionsPerBatch, " per batch"));
  }
  return absl::OkStatus();
}

// Memory a decoded batch holds, roughly (for the queue's bound).
uint64_t DeltaBytes(const BatchDelta& d) {
  uint64_t bytes = sizeof(BatchDelta);
  for (const auto& k : d.keys) bytes += sizeof(k) + 16 * k.histogram.buckets().size();
  for (const auto& x : d.dispatch) {
    bytes += sizeof(x) + 16 * (x.handler.buckets().size() + x.wake.buckets().size());
  }
  return bytes;
}

// `batch` serialized deterministically: what fingerprints of version 1 were
// taken of.
std::string CanonicalBytes(const v1::SampleBatch& batch) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream out(&bytes);
    google::protobuf::io::CodedOutputStream coded(&out);
    coded.SetSerializationDeterministic(true);
    batch.SerializeToCodedStream(&coded);
  }
  return bytes;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TunerCore>> TunerCore::Create(const TunerOptions& options) {
  if (options.fit.max_spin_ns == 0 || options.refit_samples == 0) {
    return absl::InvalidArgumentError("max_spin_ns and refit_samples must be > 0");
  }
  if (options.stream_window == 0 || options.max_queued_bytes == 0) {
    return absl::InvalidArgumentError("stream_window and max_queued_bytes must be > 0");
  }
  // The worker's commits never checkpoint the write-ahead log (copy it into
  // the database file, with reads and syncs of their own): the compactor's
  // thread does (tuner/compactor.h).
  // Its write transactions go before the compactor's and the fitter's
  // whenever both wait (storage/write_gate.h).
  StoreOptions shared_store = options.store;
  shared_store.write_gate = std::make_shared<WriteGate>();
  StoreOptions ingest_store = shared_store;
  ingest_store.commit_checkpoints = false;
  ingest_store.write_priority = WritePriority::kUrgent;
  SPINTUNE_ASSIGN_OR_RETURN(auto store, Store::Open(options.db_path, ingest_store));
  // The fitter starts before the core exists: its results reach the core
  // through this slot (set below, cleared when the core stops the fitter).
  auto slot = std::make_shared<std::atomic<TunerCore*>>(nullptr);
  FitterOptions fo{options.db_path, shared_store,         options.fit,
                   options.change,  options.evidence_ttl, options.verify,
                   options.max_fit_cpu_share};
  SPINTUNE_ASSIGN_OR_RETURN(auto fitter, Fitter::Create(fo, [slot](FitResult r) {
                              if (TunerCore* core = slot->load()) core->OnFitResult(std::move(r));
                            }));
  auto errors = std::make_shared<std::atomic<TunerCore*>>(nullptr);
  CompactorOptions co;
  co.db_path = options.db_path;
  co.store = shared_store;
  SPINTUNE_ASSIGN_OR_RETURN(auto compactor, Compactor::Create(co, [errors](const absl::Status& s) {
                              Logger().error("compacting staged batches failed: {}", s.ToString());
                              if (TunerCore* core = errors->load()) {
                                core->Count(&TunerCounters::storage_errors);
                              }
                            }));
  std::unique_ptr<TunerCore> core(
      new TunerCore(options, shared_store.write_gate, std::move(store), std::move(fitter),
                    std::move(compactor)));
  slot->store(core.get());
  errors->store(core.get());
  return core;
}

TunerCore::TunerCore(TunerOptions options, std::shared_ptr<WriteGate> gate,
                     std::unique_ptr<Store> store, std::unique_ptr<Fitter> fitter,
                     std::unique_ptr<Compactor> compactor)
    : options_(std::move(options)),
      gate_(std::move(gate)),
      store_(std::move(store)),
      fitter_(std::move(fitter)),
      compactor_(std::move(compactor)) {
  experiments_ = std::make_unique<ExperimentRunner>(store_.get(), ExperimentRunnerOptions{});
  sender_ = std::thread([this] { SenderLoop(); });
  worker_ = std::thread([this] { WorkerLoop(); });
}

TunerCore::~TunerCore() { Stop(); }

void TunerCore::Stop() {
  compactor_.reset();
  queue_.Stop();
  if (worker_.joinable()) worker_.join();
  // After the worker, which hands it work; it finishes what it was handed.
  {
    absl::MutexLock lock(&sender_mu_);
    sender_stop_ = true;
    sender_cv_.Signal();
  }
  if (sender_.joinable()) sender_.join();
  // Only after the worker, which calls it (destroying it first raced with
  // a refit or verification being asked for). Results it delivers meanwhile
  // land in the stopped queue and are dropped with the rest.
  fitter_.reset();
  for (auto& job : queue_.TakeAll()) {
    if (job.done) job.done();
  }
}

void TunerCore::Post(std::shared_ptr<SessionHandle> session, std::function<void()> run,
                     std::function<void()> done) {
  TunerJob job;
  job.session = std::move(session);
  job.run = std::move(run);
  job.done = std::move(done);
  queue_.Push(std::move(job));
}

void TunerCore::Count(uint64_t TunerCounters::*counter, uint64_t n) {
  absl::MutexLock lock(&mu_);
  counters_.*counter += n;
}

void TunerCore::WorkerLoop() {
  pthread_setname_np(pthread_self(), "ingest");
  absl::Time last_tick = absl::Now();
  while (true) {
    std::vector<TunerJob> unit = queue_.Next(absl::Seconds(1));
    // Once a second, busy or not: versions stored by another process (a
    // rollback by `spintune profiles`) and streams that never said hello.
    if (absl::Now() - last_tick > absl::Seconds(1)) {
      last_tick = absl::Now();
      PushExternalVersions();
      experiments_->Tick();
      EndSilentStreams();
      CountTrackedStreams();
    }
    if (unit.empty()) {
      if (queue_.stopped()) return;
      ResumeReaders();
      continue;
    }
    if (unit.front().is_batch()) {
      IngestGroup(unit);
      HandOff(unit);
    } else {
      unit.front().run();
      for (auto& job : unit) {
        if (job.done) job.done();
      }
    }
    ResumeReaders();
  }
}

void TunerCore::HandOff(std::vector<TunerJob>& unit) {
  SenderWork work;
  work.flush.reserve(unit.size());
  work.done.reserve(unit.size());
  for (auto& job : unit) {
    if (job.session) work.flush.push_back(std::move(job.session));
    if (job.done) work.done.push_back(std::move(job.done));
  }
  absl::MutexLock lock(&sender_mu_);
  sender_work_.push_back(std::move(work));
  sender_cv_.Signal();
}

void TunerCore::SenderLoop() {
  pthread_setname_np(pthread_self(), "sender");
  while (true) {
    SenderWork work;
    {
      absl::MutexLock lock(&sender_mu_);
      while (!sender_stop_ && sender_work_.empty()) sender_cv_.Wait(&sender_mu_);
      if (sender_work_.empty()) return;  // stopped, and everything handed over is done
      work = std::move(sender_work_.front());
      sender_work_.pop_front();
    }
    for (auto& session : work.flush) session->Flush();
    for (auto& done : work.done) done();
  }
}

void TunerCore::OnOpen(std::shared_ptr<SessionHandle> session) {
  absl::MutexLock lock(&admit_mu_);
  silent_.push_back(session);
}

void TunerCore::EndSilentStreams() {
  std::vector<std::shared_ptr<SessionHandle>> expired;
  {
    absl::MutexLock lock(&admit_mu_);
    const absl::Time now = absl::Now();
    std::vector<std::weak_ptr<SessionHandle>> still;
    for (auto& weak : silent_) {
      auto s = weak.lock();
      if (!s || s->hello_seen.load() || !s->open()) continue;
      if (now - s->opened_at > options_.hello_timeout) {
        expired.push_back(std::move(s));
      } else {
        still.push_back(weak);
      }
    }
    silent_ = std::move(still);
  }
  for (auto& s : expired) {
    Count(&TunerCounters::hello_timeouts);
    s->Fail(absl::DeadlineExceededError(absl::StrCat(
        "no hello within ", absl::FormatDuration(options_.hello_timeout))));
  }
}

bool TunerCore::AdmitRead(const std::shared_ptr<SessionHandle>& session) {
  absl::MutexLock lock(&admit_mu_);
  if (queue_.queued_bytes() < options_.max_queued_bytes) return true;
  waiting_readers_.push_back(session);
  return false;
}

void TunerCore::ResumeReaders() {
  std::vector<std::weak_ptr<SessionHandle>> resume;
  {
    absl::MutexLock lock(&admit_mu_);
    if (waiting_readers_.empty() || queue_.queued_bytes() >= options_.max_queued_bytes) return;
    resume.swap(waiting_readers_);
  }
  for (auto& weak : resume) {
    if (auto s = weak.lock()) s->ResumeReading();
  }
}

void TunerCore::OnSessionEnd(std::shared_ptr<SessionHandle> session) {
  Post(nullptr, [this, session = std::move(session)] {
    if (session->target_id == 0) return;  // never said hello successfully
    experiments_->OnSessionEnd(session.get());
    auto& list = sessions_[session->target_id];
    list.erase(std::remove_if(list.begin(), list.end(),
                              [&](const std::weak_ptr<SessionHandle>& w) {
                                auto s = w.lock();
                                return !s || s == session;
                              }),
               list.end());
    if (list.empty()) sessions_.erase(session->target_id);
    {
      absl::MutexLock lock(&mu_);
      --counters_.active_sessions;
    }
    CountTrackedStreams();
  });
}

void TunerCore::CountTrackedStreams() {
  uint64_t n = 0;
  for (const auto& [target, list] : sessions_) n += list.size();
  {
    absl::MutexLock lock(&admit_mu_);
    n += silent_.size() + waiting_readers_.size();
  }
  absl::MutexLock lock(&mu_);
  counters_.tracked_streams = n;
}

void TunerCore::ObserveIngestLatency(absl::Duration d) {
  const double seconds = absl::ToDoubleSeconds(d);
  for (size_t i = 0; i < kIngestLatencyBoundsSeconds.size(); ++i) {
    if (seconds <= kIngestLatencyBoundsSeconds[i]) ++counters_.ingest_latency_buckets[i];
  }
  counters_.ingest_latency_sum_seconds += seconds;
  ++counters_.ingest_latency_count;
}

void TunerCore::CountRefusedCall(bool authenticated) {
  absl::MutexLock lock(&mu_);
  ++(authenticated ? counters_.permission_denied : counters_.unauthenticated);
}

absl::StatusOr<TokenRecord> TunerCore::Authenticate(const std::string& token) {
  return store_->LookupToken(token);
}

TunerCounters TunerCore::counters() const {
  TunerCounters c;
  {
    absl::MutexLock lock(&mu_);
    c = counters_;
  }
  c.write_gate = gate_->counts();
  return c;
}

void TunerCore::OnHello(std::shared_ptr<SessionHandle> session, v1::Hello hello,
                        std::function<void()> done) {
  session->hello_seen = true;
  auto h = std::make_shared<v1::Hello>(std::move(hello));
  Post(session, [this, session, h] {
    const v1::Hello& hello = *h;
    auto record = DecodeHello(hello);
    if (!record.ok()) return session->Fail(record.status());
    auto id = store_->UpsertTarget(*record);
    absl::StatusOr<uint64_t> durable = id.ok() ? store_->LastDurableSeq(*id) : id.status();
    absl::StatusOr<std::optional<PolicyTable>> latest =
        durable.ok() ? store_->LoadPolicy(*id, 0) : durable.status();
    if (!latest.ok()) {
      Logger().error("hello from agent={} failed: storage: {}", hello.agent_id(),
                     latest.status().ToString());
      Count(&TunerCounters::storage_errors);
      return session->Fail(absl::UnavailableError("tuner storage unavailable; retry later"));
    }
    // Cold start in the background: a Hello must not cost time in
    // proportion to what the database holds.
    if (!latest->has_value() && *durable == 0) fitter_->Predict(*id, *record);
    session->target_id = *id;
    session->hello = hello;
    session->resend_bound = *durable;
    LearnDurable(*id, *durable);
    sessions_[*id].push_back(session);
    {
      absl::MutexLock lock(&mu_);
      ++counters_.sessions;
      ++counters_.active_sessions;
    }
    v1::TunerMessage ack;
    ack.mutable_hello_ack()->set_last_durable_seq(*durable);
    const uint64_t current = latest->has_value() ? (*latest)->version : 0;
    ack.mutable_hello_ack()->set_current_policy_version(current);
    ack.mutable_hello_ack()->set_accepts_bucket_bytes(true);  // tuner/batch_decoder.cc
    session->Send(std::move(ack));
    Logger().info("session agent={} board={} target={} last_durable_seq={} policy_version={} "
                  "applied={}",
                  hello.agent_id(), Printable(hello.target().board()), *id, *durable, current,
                  hello.applied_policy_version());
    pushed_version_[*id] = std::max(pushed_version_[*id], current);
    if (current != 0 && current != hello.applied_policy_version()) {
      v1::TunerMessage update;
      PolicyTableToProto(**latest, update.mutable_policy()->mutable_table());
      session->Send(std::move(update));
    }
  }, std::move(done));
}

void TunerCore::OnBatch(std::shared_ptr<SessionHandle> session, const v1::Hello& hello,
                        const v1::SampleBatch& batch, absl::string_view received,
                        std::function<void()> done) {
  TunerJob job;
  job.samples = CompletionSamples(batch);
  std::string canonical;
  if (received.empty()) {
    canonical = CanonicalBytes(batch);
    received = canonical;
  }
  job.fingerprint = Fingerprint64(received);
  job.bytes = received.size();
  // A resend of a batch stored before this session (by an older tuner,
  // perhaps): its stored fingerprint may be of version 1.
  if (batch.seq() <= session->resend_bound.load()) {
    job.legacy_fingerprint =
        canonical.empty() ? Fingerprint64(CanonicalBytes(batch)) : job.fingerprint;
  }
  job.session = std::move(session);
  if (batch.has_dropped()) {
    job.batch = batch;  // the worker checks the placeholder
  } else {
    // Decoded and encoded for staging here, on the receiving thread: the
    // worker only checks limits and stores. It keeps the seq alone.
    // (Its histograms are freed here too, not on the one ingest worker: a
    // fleet's 64-key batches made freeing a tenth of the worker's time.)
    absl::StatusOr<StagedBatch> staged = DecodeBatchForStaging(batch, hello);
    if (staged.ok()) {
      job.delta = std::move(staged->delta);
      job.staged_delta = std::move(staged->staged);
      job.bytes = DeltaBytes(*job.delta) + job.staged_delta.size();
    } else {
      job.delta = staged.status();
    }
    job.batch.set_seq(batch.seq());
  }
  job.done = std::move(done);
  queue_.Push(std::move(job));
}

void TunerCore::IngestGroup(std::vector<TunerJob>& jobs) {
  // A batch not stored now is resent later; refusing what follows it on its
  // stream keeps the agent's resends in seq order.
  auto defer = [this](TunerJob& job, const absl::Status& why) {
    job.session->stalled = true;
    Count(&TunerCounters::batches_deferred);
    job.session->Send(RejectedMessage(job.batch.seq(), why, /*retry=*/true));
  };
  struct Item {
    TunerJob* job;
    BatchDelta delta;
    SequencedBatch batch;
    std::vector<PolicyKey> new_keys;  // keys of the target this batch adds
  };
  std::vector<Item> items;
  items.reserve(jobs.size());
  std::map<int64_t, std::set<PolicyKey>> group_keys;  // keys this group adds, per target
  std::map<int64_t, uint64_t> group_next;             // next seq expected, per target
  for (TunerJob& job : jobs) {
    SessionHandle& session = *job.session;
    // A closed stream cannot be acknowledged: its agent resends.
    if (session.target_id == 0 || !session.open()) continue;
    if (session.stalled) {
      defer(job, absl::UnavailableError("an earlier batch of this stream was not stored; "
                                        "reconnect and resend in order"));
      continue;
    }
    const v1::SampleBatch& b = job.batch;
    if (b.seq() == 0) {
      Count(&TunerCounters::batches_rejected);
      session.Send(RejectedMessage(0, absl::InvalidArgumentError("batch.seq: must be >= 1"), false));
      continue;
    }
    // In order? (The store decides for good; this keeps a stream's later
    // batches from being stored after one of its batches was refused.)
    uint64_t& next = group_next.try_emplace(session.target_id, durable_[session.target_id] + 1)
                         .first->second;
    if (b.seq() > next) {
      RefuseOutOfOrder(job, next - 1);
      continue;
    }
    Item item{&job, {}, {}, {}};
    SequencedBatch& sb = item.batch;
    sb.target_id = session.target_id;
    sb.seq = sb.last_seq = b.seq();
    sb.fingerprint = job.fingerprint;
    sb.legacy_fingerprint = job.legacy_fingerprint;
    if (b.has_dropped()) {
      sb.refusal = CheckPlaceholder(b);
      if (sb.refusal.ok()) {
        sb.dropped = true;
        sb.last_seq = b.dropped().last_seq();
        sb.dropped_samples = b.dropped().samples();
      }
    } else if (!job.delta.ok()) {
      sb.refusal = job.delta.status();
      sb.refused_samples = job.samples;
    } else {
      item.delta = std::move(*job.delta);
      absl::Status limit = CheckKeyLimit(session, item.delta, &group_keys[session.target_id],
                                         &item.new_keys);
      if (absl::IsUnavailable(limit)) {
        Count(&TunerCounters::storage_errors);
        defer(job, limit);
        continue;
      }
      if (limit.ok()) {
        if (absl::Status rate = CheckRate(session, item.delta); !rate.ok()) {
          Count(&TunerCounters::batches_over_limit);
          defer(job, rate);  // the same batch is fine later
          continue;
        }
      }
      sb.refusal = limit;
      if (!limit.ok()) sb.refused_samples = item.delta.completion_samples;
    }
    if (sb.seq == next) next = sb.last_seq + 1;
    items.push_back(std::move(item));
  }
  // (items is final now: point each batch at its delta.)
  for (auto& item : items) {
    const bool stage = item.batch.refusal.ok() && !item.batch.dropped;
    item.batch.delta = stage ? &item.delta : nullptr;
    item.batch.encoded_delta = stage ? &item.job->staged_delta : nullptr;
  }
  std::vector<SequencedBatch> to_store;
  to_store.reserve(items.size());
  for (const auto& item : items) to_store.push_back(item.batch);
  absl::StatusOr<std::vector<IngestResult>> results = std::vector<IngestResult>();
  if (!to_store.empty()) results = store_->IngestBatches(to_store);
  if (!results.ok()) {
    Logger().error("storing {} batches failed: {}", to_store.size(), results.status().ToString());
    Count(&TunerCounters::storage_errors);
    // The agents keep the batches and resend them on their next session.
    const absl::Status why = absl::UnavailableError(
        absl::IsResourceExhausted(results.status()) ? "tuner storage is full; resend later"
                                                    : "tuner storage unavailable; resend later");
    for (auto& item : items) defer(*item.job, why);
    return;
  }
  std::set<int64_t> refit, verify;
  for (size_t n = 0; n < items.size(); ++n) {
    TunerJob& job = *items[n].job;
    const SequencedBatch& sb = items[n].batch;
    const IngestResult& r = (*results)[n];
    SessionHandle& session = *job.session;
    const uint64_t seq = sb.seq;
    switch (r.outcome) {
      case IngestOutcome::kStored:
      case IngestOutcome::kDuplicate: {
        if (!r.refusal.ok()) {
          // Used up now or before: the same answer every time.
          Count(absl::IsResourceExhausted(r.refusal) ? &TunerCounters::batches_over_limit
                                                     : &TunerCounters::batches_rejected);
          session.Send(RejectedMessage(seq, r.refusal, /*retry=*/false));
          break;
        }
        const bool stored = r.outcome == IngestOutcome::kStored;
        v1::TunerMessage ack;
        ack.mutable_batch_ack()->set_seq(seq);
        ack.mutable_batch_ack()->set_duplicate(!stored);
        session.Queue(std::move(ack));  // written by SenderLoop (HandOff)
        {
          absl::MutexLock lock(&mu_);
          ObserveIngestLatency(absl::Now() - job.received);
          if (!stored) {
            ++counters_.batches_duplicate;
          } else if (sb.dropped) {
            ++counters_.batches_ingested;
            counters_.spool_dropped_samples += sb.dropped_samples;
          } else {
            ++counters_.batches_ingested;
            counters_.samples_ingested += items[n].delta.completion_samples;
          }
        }
        if (stored && sb.dropped) {
          Logger().warn("agent={} dropped batches seq {}..{} ({} samples) from its full spool",
                        session.hello.agent_id(), sb.seq, sb.last_seq, sb.dropped_samples);
        }
        if (!stored || sb.dropped) break;
        if (!items[n].delta.outcomes.empty()) verify.insert(session.target_id);
        known_keys_[session.target_id].insert(items[n].new_keys.begin(), items[n].new_keys.end());
        stored_since_fit_.insert(session.target_id);
        uint64_t& since = samples_since_fit_[session.target_id];
        since += items[n].delta.completion_samples;
        auto last = last_refit_.find(session.target_id);
        if (since >= options_.refit_samples &&
            (last == last_refit_.end() ||
             absl::Now() - last->second >= options_.min_refit_interval)) {
          refit.insert(session.target_id);
        }
        break;
      }
      case IngestOutcome::kConflict:
        Count(&TunerCounters::batches_conflict);
        Logger().error("agent={} resent seq {} with content other than what is stored: another "
                       "client reports as this agent id{}",
                       session.hello.agent_id(), seq,
                       options_.require_tokens ? "" : " (the tuner runs without --require-tokens)");
        session.Send(RejectedMessage(
            seq,
            absl::AlreadyExistsError(absl::StrCat(
                "seq ", seq, " of agent '", session.hello.agent_id(),
                "' is already stored with other content (another client reporting as this "
                "agent id?)")),
            /*retry=*/false));
        break;
      case IngestOutcome::kOutOfOrder:
        RefuseOutOfOrder(job, r.last_seq);
        break;
    }
    if (r.outcome == IngestOutcome::kStored) {
      durable_[session.target_id] = std::max(durable_[session.target_id], r.last_seq);
    } else {
      LearnDurable(session.target_id, r.last_seq);
    }
  }
  for (int64_t target : refit) RequestRefit(target, /*force=*/false);
  for (int64_t target : verify) fitter_->Verify(target);
}

void TunerCore::LearnDurable(int64_t target_id, uint64_t durable) {
  auto [known, fresh] = durable_.try_emplace(target_id, durable);
  if (fresh || durable > known->second) {
    known_keys_.erase(target_id);
    known->second = durable;
  }
}

void TunerCore::RefuseOutOfOrder(TunerJob& job, uint64_t durable) {
  SessionHandle& session = *job.session;
  const uint64_t seq = job.batch.seq();
  Count(&TunerCounters::batches_out_of_order);
  Count(&TunerCounters::batches_deferred);
  session.stalled = true;
  session.Send(RejectedMessage(
      seq,
      absl::OutOfRangeError(absl::StrCat("seq ", seq, " does not follow the last durable seq ",
                                         durable, " of agent '", session.hello.agent_id(),
                                         "' (expected ", durable + 1,
                                         "); reconnect and resend from there")),
      /*retry=*/true));
}

absl::Status TunerCore::CheckKeyLimit(SessionHandle& session, const BatchDelta& delta,
                                      std::set<PolicyKey>* group_keys,
                                      std::vector<PolicyKey>* added) {
  auto known = known_keys_.find(session.target_id);
  if (known == known_keys_.end()) {
    auto keys = store_->ListKeys(session.target_id);
    if (!keys.ok()) {
      Logger().error("reading the keys of target={} failed: {}", session.target_id,
                     keys.status().ToString());
      return absl::UnavailableError("tuner storage unavailable; resend later");
    }
    known = known_keys_.emplace(session.target_id,
                                std::set<PolicyKey>(keys->begin(), keys->end())).first;
  }
  added->clear();
  // An agent sends the same keys batch after batch: once all of a batch's
  // keys were known, a batch with the same keys (in the same order) skips
  // the lookups (the known keys only grow).
  const std::vector<PolicyKey>& last = session.known_batch_keys;
  const bool same_as_last =
      last.size() == delta.keys.size() &&
      std::equal(last.begin(), last.end(), delta.keys.begin(),
                 [](const PolicyKey& a, const KeyEvidence& b) { return a == b.key; });
  if (!same_as_last) {
    bool all_known = true;
    for (const auto& k : delta.keys) {
      if (known->second.count(k.key) != 0) continue;
      all_known = false;
      if (group_keys->count(k.key) == 0) added->push_back(k.key);
    }
    if (all_known) {
      session.known_batch_keys.clear();
      for (const auto& k : delta.keys) session.known_batch_keys.push_back(k.key);
    }
  }
  const uint64_t total = known->second.size() + group_keys->size() + added->size();
  if (total > options_.max_keys_per_target) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "completions: the target would have ", total,
        " keys (cpu class, device, opcode, size class); the limit is ",
        options_.max_keys_per_target, " (--max-keys-per-target)"));
  }
  group_keys->insert(added->begin(), added->end());
  return absl::OkStatus();
}

absl::Status TunerCore::CheckRate(SessionHandle& session, const BatchDelta& delta) {
  const double rate = options_.max_agent_samples_per_second;
  if (rate > 0) {
    Bucket& b = rate_[session.hello.agent_id()];
    const absl::Time now = absl::Now();
    const double burst = 2 * rate;
    b.tokens = b.refilled == absl::InfinitePast()
                   ? burst
                   : std::min(burst, b.tokens + rate * absl::ToDoubleSeconds(now - b.refilled));
    b.refilled = now;
    const double n = static_cast<double>(delta.completion_samples);
    if (n > b.tokens) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "batch.completions: agent '", session.hello.agent_id(), "' is over its limit of ", rate,
          " samples/s (--max-agent-samples-per-second); resend later"));
    }
    b.tokens -= n;
  }
  return absl::OkStatus();
}

void TunerCore::OnApplied(std::shared_ptr<SessionHandle> session, v1::PolicyApplied applied,
                          std::function<void()> done) {
  auto a = std::make_shared<v1::PolicyApplied>(std::move(applied));
  Post(session, [this, session, a] {
    if (session->target_id == 0) return;
    // Bounded and escaped: it reaches the log and the database.
    const std::string error = a->ok() ? "" : Printable(a->error(), kMaxAppliedErrorBytes);
    absl::Status s = store_->RecordApplied(session->target_id, a->version(), error);
    if (!s.ok()) {
      Count(&TunerCounters::storage_errors);
      Logger().error("recording applied version failed: {}", s.ToString());
    }
    if (a->ok()) {
      Logger().info("agent={} applied policy version={}", session->hello.agent_id(),
                    a->version());
      fitter_->Verify(session->target_id);  // its outcomes are counted from now on
    } else {
      Logger().warn("agent={} refused policy version={}: {}", session->hello.agent_id(),
                    a->version(), error);
    }
  }, std::move(done));
}

void TunerCore::OnDrain(std::shared_ptr<SessionHandle> session, std::function<void()> done) {
  Post(session, [this, session] {
    const int64_t target_id = session->target_id;
    if (target_id == 0) return;
    // A final fit, unless nothing was stored since the last one (then only
    // what is queued for the target, its cold-start table say, is awaited):
    // a stream of Drains costs a lookup each, and no fit holds up ingest.
    // The answer waits for everything queued for the target (a refit may
    // sit behind a verification that rolls a key back): a sync merges into
    // the target's last waiting request.
    if (stored_since_fit_.count(target_id) > 0) RequestRefit(target_id, /*force=*/true);
    const uint64_t ticket = fitter_->Sync(target_id);
    after_fit_[ticket].push_back([this, session] {
      auto target = store_->FindTarget(session->hello.agent_id());
      v1::TunerMessage m;
      if (target.ok() && target->has_value()) {
        m.mutable_drained()->set_current_policy_version((*target)->current_version);
        m.mutable_drained()->set_total_samples((*target)->total_samples);
      }
      session->Send(std::move(m));
    });
  }, std::move(done));
}

void TunerCore::OnKnobMessage(std::shared_ptr<SessionHandle> session, v1::AgentMessage message,
                              std::function<void()> done) {
  auto m = std::make_shared<v1::AgentMessage>(std::move(message));
  Post(session, [this, session, m] { experiments_->OnMessage(session, *m); }, std::move(done));
}

uint64_t TunerCore::RequestRefit(int64_t target_id, bool force) {
  samples_since_fit_[target_id] = 0;
  stored_since_fit_.erase(target_id);
  last_refit_[target_id] = absl::Now();
  return fitter_->Refit(target_id, force);
}

void TunerCore::OnFitResult(FitResult result) {
  auto r = std::make_shared<FitResult>(std::move(result));
  Post(nullptr, [this, r] {
    {
      absl::MutexLock lock(&mu_);
      counters_.changes_detected += r->changes_detected;
      if (r->fitted) ++counters_.refits;
      if (r->predicted) ++counters_.predicted_tables;
      if (r->stored) ++counters_.policy_versions;
      if (!r->status.ok()) ++counters_.storage_errors;
      for (const auto& v : r->verified) {
        if (v.verdict == "better") ++counters_.verified_better;
        if (v.verdict == "worse") ++counters_.verified_worse;
        if (v.verdict == "inconclusive") ++counters_.verified_inconclusive;
        if (v.rollback_version != 0) ++counters_.rollbacks;
      }
    }
    if (r->stored) Push(r->target_id, *r->stored);
    auto waiting = after_fit_.extract(r->ticket);
    if (!waiting.empty()) {
      for (auto& then : waiting.mapped()) then();
    }
  });
}

void TunerCore::PushExternalVersions() {
  auto data_version = store_->DataVersion();
  if (!data_version.ok() || *data_version == data_version_) return;
  data_version_ = *data_version;
  // The fitter and compactor commit all the time: look at version numbers
  // first (one query), load only tables newer than what was pushed.
  auto versions = store_->LatestVersions();
  if (!versions.ok()) return;
  for (const auto& [target_id, version] : *versions) {
    auto list = sessions_.find(target_id);
    if (list == sessions_.end() || list->second.empty()) continue;
    auto pushed = pushed_version_.find(target_id);
    if (pushed != pushed_version_.end() && pushed->second >= version) continue;
    auto latest = store_->LoadPolicy(target_id, 0);
    if (!latest.ok() || !latest->has_value()) continue;
    Logger().info("target={} policy version={} ({}) stored by another process: pushing",
                  target_id, (*latest)->version, (*latest)->origin);
    Push(target_id, **latest);
  }
}

void TunerCore::Push(int64_t target_id, const PolicyTable& table) {
  uint64_t& pushed = pushed_version_[target_id];
  if (pushed >= table.version) return;  // noticed as another process's first
  pushed = table.version;
  v1::TunerMessage m;
  PolicyTableToProto(table, m.mutable_policy()->mutable_table());
  auto& list = sessions_[target_id];
  std::vector<std::weak_ptr<SessionHandle>> alive;
  for (auto& weak : list) {
    if (auto s = weak.lock()) {
      s->Send(m);
      alive.push_back(weak);
      absl::MutexLock lock(&mu_);
      ++counters_.pushes;
    }
  }
  list = std::move(alive);
}

void TunerCore::ListTargets(std::function<void(absl::StatusOr<v1::ListTargetsResponse>)> done) {
  Post(nullptr, [this, done = std::move(done)] {
    auto targets = store_->ListTargets();
    if (!targets.ok()) return done(targets.status());
    v1::ListTargetsResponse resp;
    for (const auto& t : *targets) {
      auto* o = resp.add_targets();
      o->set_agent_id(t.agent_id);
      o->set_board(t.board);
      o->set_cpu_model(t.cpu_model);
      o->set_total_samples(t.total_samples);
      o->set_current_policy_version(t.current_version);
      o->set_applied_policy_version(t.applied_version);
      o->set_dropped_samples(t.dropped_samples);
      o->set_pinned_policy_version(t.pinned_version);
    }
    done(std::move(resp));
  });
}

void TunerCore::GetPolicy(const v1::GetPolicyRequest& request,
                          std::function<void(absl::StatusOr<v1::GetPolicyResponse>)> done) {
  Post(nullptr, [this, request, done = std::move(done)] {
    auto target = store_->FindTarget(request.agent_id());
    if (!target.ok()) return done(target.status());
    if (!target->has_value()) {
      return done(absl::NotFoundError(absl::StrCat("no target '", request.agent_id(), "'")));
    }
    auto table = store_->LoadPolicy((*target)->id, request.version());
    if (!table.ok()) return done(table.status());
    if (!table->has_value()) {
      return done(absl::NotFoundError(absl::StrCat("target '", request.agent_id(),
                                                   "' has no policy version ",
                                                   request.version())));
    }
    v1::GetPolicyResponse resp;
    resp.set_policy_json(PolicyTableToJson(**table).dump(2));
    auto verified = store_->ListVerifications((*target)->id);
    if (!verified.ok()) return done(verified.status());
    for (const auto& v : *verified) {
      auto* o = resp.add_verifications();
      o->set_version(v.version);
      o->set_cpu_class(v.key.cpu_class);
      o->set_device(v.key.device);
      o->set_opcode(v.key.opcode);
      o->set_size_class(v.key.size_class);
      o->set_verdict(v.verdict);
      o->set_predicted_cost_ns(v.predicted_cost_ns);
      o->set_measured_cost_ns(v.measured.mean_ns);
      o->set_measured_low_ns(v.measured.low_ns);
      o->set_measured_high_ns(v.measured.high_ns);
      o->set_requests(v.requests);
      o->set_incumbent_version(v.incumbent_version);
      o->set_incumbent_cost_ns(v.incumbent.mean_ns);
      o->set_incumbent_low_ns(v.incumbent.low_ns);
      o->set_incumbent_high_ns(v.incumbent.high_ns);
      o->set_rollback_version(v.rollback_version);
      o->set_reason(v.reason);
      o->set_method(v.method);
    }
    done(std::move(resp));
  });
}

}  // namespace spintune
