#include "tuner/tuner_core.h"

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "policy/cold_start.h"
#include "policy/policy_json.h"
#include "policy/policy_proto.h"
#include "tuner/batch_decoder.h"
#include "tuner/fit_inputs.h"

namespace spintune {
namespace {

v1::TunerMessage RejectedMessage(uint64_t seq, const absl::Status& status, bool retry = false) {
  v1::TunerMessage m;
  auto* r = m.mutable_rejected();
  r->set_seq(seq);
  r->set_code(static_cast<int>(status.code()));
  r->set_message(std::string(status.message()));
  r->set_retry(retry);
  return m;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TunerCore>> TunerCore::Create(const TunerOptions& options) {
  if (options.fit.max_spin_ns == 0 || options.refit_samples == 0) {
    return absl::InvalidArgumentError("max_spin_ns and refit_samples must be > 0");
  }
  SPINTUNE_ASSIGN_OR_RETURN(auto store, Store::Open(options.db_path, options.store));
  return std::unique_ptr<TunerCore>(new TunerCore(options, std::move(store)));
}

TunerCore::TunerCore(TunerOptions options, std::unique_ptr<Store> store)
    : options_(std::move(options)), store_(std::move(store)) {
  worker_ = std::thread([this] { WorkerLoop(); });
}

TunerCore::~TunerCore() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    cv_.notify_all();
  }
  worker_.join();
}

void TunerCore::Post(std::function<void()> job) {
  std::lock_guard<std::mutex> lock(mu_);
  jobs_.push_back(Job{std::move(job), nullptr, {}, nullptr});
  cv_.notify_one();
}

void TunerCore::WorkerLoop() {
  constexpr size_t kMaxGroupBatches = 64;
  constexpr int kMaxGroupSamples = 1 << 18;
  absl::Time last_external_check = absl::Now();
  while (true) {
    std::vector<Job> group;
    {
      std::unique_lock<std::mutex> lock(mu_);
      // Once a second, busy or not: look for versions stored by another
      // process (a rollback by `spintune profiles`).
      const bool work = cv_.wait_for(lock, std::chrono::seconds(1),
                                     [this] { return stopping_ || !jobs_.empty(); });
      if (absl::Now() - last_external_check > absl::Seconds(1)) {
        last_external_check = absl::Now();
        lock.unlock();
        PushExternalVersions();
        continue;
      }
      if (!work) continue;
      if (jobs_.empty()) return;  // stopping, queue drained
      int samples = 0;
      do {
        samples += jobs_.front().batch.completions().wait_ns_size();
        group.push_back(std::move(jobs_.front()));
        jobs_.pop_front();
      } while (group.front().session && !jobs_.empty() && jobs_.front().session &&
               group.size() < kMaxGroupBatches && samples < kMaxGroupSamples);
    }
    if (group.front().session) {
      IngestGroup(group);
    } else {
      group.front().run();
    }
  }
}

void TunerCore::OnSessionEnd(std::shared_ptr<SessionHandle> session) {
  Post([this, session = std::move(session)] {
    if (session->target_id == 0) return;  // never said hello successfully
    std::lock_guard<std::mutex> lock(mu_);
    --counters_.active_sessions;
  });
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
  std::lock_guard<std::mutex> lock(mu_);
  ++(authenticated ? counters_.permission_denied : counters_.unauthenticated);
}

absl::StatusOr<TokenRecord> TunerCore::Authenticate(const std::string& token) {
  return store_->LookupToken(token);
}

TunerCounters TunerCore::counters() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counters_;
}

void TunerCore::OnHello(std::shared_ptr<SessionHandle> session, v1::Hello hello,
                        std::function<void()> done) {
  Post([this, session, hello = std::move(hello), done = std::move(done)] {
    auto record = DecodeHello(hello);
    if (!record.ok()) {
      session->Fail(record.status());
      return done();
    }
    auto id = store_->UpsertTarget(*record);
    absl::StatusOr<uint64_t> durable = id.ok() ? store_->LastDurableSeq(*id) : id.status();
    absl::StatusOr<std::optional<PolicyTable>> latest =
        id.ok() ? store_->LoadPolicy(*id, 0) : id.status();
    if (!durable.ok() || !latest.ok()) {
      const absl::Status why = !durable.ok() ? durable.status() : latest.status();
      Logger().error("hello from agent={} failed: {}", hello.agent_id(), why.ToString());
      if (absl::IsResourceExhausted(why)) store_->ReclaimSpace();
      session->Fail(absl::UnavailableError("tuner storage unavailable"));
      return done();
    }
    if (!latest->has_value() && *durable == 0) {
      *latest = Predict(*id, *record);
    }
    if (hello.spool_dropped_batches() > 0 || hello.spool_dropped_samples() > 0) {
      Logger().warn("agent={} dropped {} batches ({} samples) from its full spool while the "
                    "tuner was away",
                    hello.agent_id(), hello.spool_dropped_batches(), hello.spool_dropped_samples());
      absl::Status s = store_->RecordSpoolDropped(*id, hello.spool_dropped_batches(),
                                                  hello.spool_dropped_samples());
      if (!s.ok()) {
        session->Fail(absl::UnavailableError("tuner storage unavailable"));
        return done();
      }
      std::lock_guard<std::mutex> lock(mu_);
      counters_.spool_dropped_samples += hello.spool_dropped_samples();
    }
    session->target_id = *id;
    session->hello = hello;
    sessions_[*id].push_back(session);
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++counters_.sessions;
      ++counters_.active_sessions;
    }
    v1::TunerMessage ack;
    ack.mutable_hello_ack()->set_last_durable_seq(*durable);
    const uint64_t current = latest->has_value() ? (*latest)->version : 0;
    ack.mutable_hello_ack()->set_current_policy_version(current);
    session->Send(std::move(ack));
    Logger().info("session agent={} board={} target={} last_durable_seq={} policy_version={} "
                  "applied={}",
                  hello.agent_id(), hello.target().board(), *id, *durable, current,
                  hello.applied_policy_version());
    pushed_version_[*id] = std::max(pushed_version_[*id], current);
    if (current != 0 && current != hello.applied_policy_version()) {
      v1::TunerMessage update;
      PolicyTableToProto(**latest, update.mutable_policy()->mutable_table());
      session->Send(std::move(update));
    }
    done();
  });
}

void TunerCore::OnBatch(std::shared_ptr<SessionHandle> session, v1::SampleBatch batch,
                        std::function<void()> done) {
  std::lock_guard<std::mutex> lock(mu_);
  jobs_.push_back(Job{nullptr, std::move(session), std::move(batch), std::move(done)});
  cv_.notify_one();
}

void TunerCore::IngestGroup(std::vector<Job>& jobs) {
  // A refused batch is resent later; refusing what follows it on its stream
  // keeps the target's durable sequence numbers free of gaps.
  auto defer = [this](Job& job, const absl::Status& why) {
    job.session->stalled = true;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++counters_.batches_deferred;
    }
    job.session->Send(RejectedMessage(job.batch.seq(), why, /*retry=*/true));
  };
  auto refuse = [this](Job& job, const absl::Status& why, uint64_t TunerCounters::*counter) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++(counters_.*counter);
    }
    job.session->Send(RejectedMessage(job.batch.seq(), why));
  };
  std::vector<size_t> accepted;  // indexes into jobs
  std::vector<BatchDelta> deltas(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    Job& job = jobs[i];
    SessionHandle& session = *job.session;
    if (session.target_id == 0) continue;  // the hello failed
    if (session.stalled) {
      defer(job, absl::UnavailableError("an earlier batch of this stream was refused; reconnect"));
      continue;
    }
    auto delta = DecodeBatch(job.batch, session.hello);
    if (!delta.ok()) {
      refuse(job, delta.status(), &TunerCounters::batches_rejected);
      continue;
    }
    if (absl::Status limit = CheckKeyLimit(session, *delta); !limit.ok()) {
      refuse(job, limit, &TunerCounters::batches_over_limit);
      continue;
    }
    if (absl::Status limit = CheckRate(session, *delta); !limit.ok()) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++counters_.batches_over_limit;
      }
      defer(job, limit);  // the same batch is fine later
      continue;
    }
    deltas[i] = std::move(*delta);
    accepted.push_back(i);
  }
  std::vector<std::pair<int64_t, const BatchDelta*>> to_store;
  for (size_t i : accepted) to_store.emplace_back(jobs[i].session->target_id, &deltas[i]);
  absl::StatusOr<std::vector<bool>> ingested = std::vector<bool>();
  if (!to_store.empty()) ingested = store_->IngestBatches(to_store);
  if (!ingested.ok()) {
    Logger().error("ingest of {} batches failed: {}", to_store.size(),
                   ingested.status().ToString());
    if (absl::IsResourceExhausted(ingested.status())) store_->ReclaimSpace();
    // The agents keep the batches and resend them on their next session.
    const absl::Status why = absl::UnavailableError(
        absl::IsResourceExhausted(ingested.status()) ? "tuner storage is full"
                                                     : "tuner storage unavailable");
    for (size_t i : accepted) defer(jobs[i], why);
    accepted.clear();
  }
  std::set<int64_t> refit;
  for (size_t n = 0; n < accepted.size(); ++n) {
    Job& job = jobs[accepted[n]];
    const BatchDelta& delta = deltas[accepted[n]];
    const bool stored = (*ingested)[n];
    for (const auto& k : delta.keys) {
      known_keys_[job.session->target_id].insert(k.key);
    }
    v1::TunerMessage ack;
    ack.mutable_batch_ack()->set_seq(job.batch.seq());
    ack.mutable_batch_ack()->set_duplicate(!stored);
    job.session->Send(std::move(ack));
    {
      std::lock_guard<std::mutex> lock(mu_);
      ObserveIngestLatency(absl::Now() - job.received);
      if (stored) {
        ++counters_.batches_ingested;
        counters_.samples_ingested += delta.completion_samples;
      } else {
        ++counters_.batches_duplicate;
      }
    }
    if (stored) {
      uint64_t& since = samples_since_fit_[job.session->target_id];
      since += delta.completion_samples;
      auto last = last_refit_.find(job.session->target_id);
      if (since >= options_.refit_samples &&
          (last == last_refit_.end() || absl::Now() - last->second >= options_.min_refit_interval)) {
        refit.insert(job.session->target_id);
      }
    }
  }
  for (int64_t target : refit) Refit(target, /*force=*/false);
  for (auto& job : jobs) job.done();
}

absl::Status TunerCore::CheckKeyLimit(SessionHandle& session, const BatchDelta& delta) {
  auto known = known_keys_.find(session.target_id);
  if (known == known_keys_.end()) {
    auto keys = store_->ListKeys(session.target_id);
    if (!keys.ok()) return absl::UnavailableError("tuner storage unavailable");
    known = known_keys_.emplace(session.target_id,
                                std::set<PolicyKey>(keys->begin(), keys->end())).first;
  }
  uint64_t added = 0;
  for (const auto& k : delta.keys) added += known->second.count(k.key) == 0 ? 1 : 0;
  if (known->second.size() + added > options_.max_keys_per_target) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "completions: the target would have ", known->second.size() + added,
        " keys (cpu class, device, opcode, size class); the limit is ",
        options_.max_keys_per_target, " (--max-keys-per-target)"));
  }
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
  Post([this, session, applied = std::move(applied), done = std::move(done)] {
    if (session->target_id != 0) {
      absl::Status s = store_->RecordApplied(session->target_id, applied.version(),
                                             applied.ok() ? "" : applied.error());
      if (!s.ok()) Logger().error("recording applied version failed: {}", s.ToString());
      if (applied.ok()) {
        Logger().info("agent={} applied policy version={}", session->hello.agent_id(),
                      applied.version());
      } else {
        Logger().warn("agent={} refused policy version={}: {}", session->hello.agent_id(),
                      applied.version(), applied.error());
      }
    }
    done();
  });
}

void TunerCore::OnDrain(std::shared_ptr<SessionHandle> session, std::function<void()> done) {
  Post([this, session, done = std::move(done)] {
    if (session->target_id == 0) return done();
    Refit(session->target_id, /*force=*/true);
    auto target = store_->FindTarget(session->hello.agent_id());
    v1::TunerMessage m;
    if (target.ok() && target->has_value()) {
      m.mutable_drained()->set_current_policy_version((*target)->current_version);
      m.mutable_drained()->set_total_samples((*target)->total_samples);
    }
    session->Send(std::move(m));
    done();
  });
}

std::optional<PolicyTable> TunerCore::Predict(int64_t target_id, const TargetRecord& target) {
  auto targets = store_->ListTargets();
  if (!targets.ok()) return std::nullopt;
  std::vector<BoardEvidence> others;
  for (const auto& t : *targets) {
    if (t.id == target_id || t.total_samples == 0) continue;
    auto record = store_->LoadTarget(t.id);
    auto keys = record.ok() ? store_->LoadKeys(t.id) : record.status();
    auto dispatch = keys.ok() ? store_->LoadDispatch(t.id) : keys.status();
    if (!dispatch.ok()) continue;
    FitInputs in = BuildFitInputs(*record, std::move(*keys), *dispatch);
    others.push_back({std::move(in.cpu_classes), std::move(in.devices), std::move(in.keys)});
  }
  FitInputs self = BuildFitInputs(target, {}, {});
  auto table = PredictPolicyTable(others, self, options_.fit);
  if (!table.ok()) {
    Logger().info("target={} board={}: no predicted table ({})", target_id, target.board,
                  table.status().message());
    return std::nullopt;
  }
  auto version = store_->AppendPolicyVersion(target_id, &*table);
  if (!version.ok()) {
    Logger().error("storing the predicted table failed: {}", version.status().ToString());
    return std::nullopt;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++counters_.predicted_tables;
    ++counters_.policy_versions;
  }
  Logger().info("target={} board={} predicted policy version={} entries={} from {} boards",
                target_id, target.board, *version, table->entries.size(), others.size());
  return std::move(*table);
}

void TunerCore::Refit(int64_t target_id, bool force) {
  samples_since_fit_[target_id] = 0;
  last_refit_[target_id] = absl::Now();
  auto changed = store_->DetectChanges(target_id, options_.change);
  if (!changed.ok()) {
    Logger().error("drift detection for target={} failed: {}", target_id,
                   changed.status().ToString());
  } else {
    for (const auto& k : *changed) {
      Logger().info("target={} key {}/{}/op{}/sc{}: distribution changed, refitting on the "
                    "samples since",
                    target_id, k.device, k.cpu_class, k.opcode, k.size_class);
    }
    std::lock_guard<std::mutex> lock(mu_);
    counters_.changes_detected += changed->size();
  }
  auto target = store_->LoadTarget(target_id);
  auto keys = target.ok() ? store_->LoadKeys(target_id) : target.status();
  auto dispatch = keys.ok() ? store_->LoadDispatch(target_id) : keys.status();
  if (!dispatch.ok()) {
    Logger().error("refit target={} cannot load evidence: {}", target_id,
                   dispatch.status().ToString());
    return;
  }
  uint64_t total = 0;
  for (const auto& k : *keys) total += k.histogram.total_count();
  if (!force && total < options_.fit.min_samples) return;
  auto summary = store_->FindTarget(target->agent_id);
  if (summary.ok() && summary->has_value() && (*summary)->pinned_version != 0) {
    Logger().debug("target={} is pinned to version {}: no refit", target_id,
                   (*summary)->pinned_version);
    return;
  }
  auto latest = store_->LoadPolicy(target_id, 0);
  if (!latest.ok()) {
    Logger().error("refit target={}: {}", target_id, latest.status().ToString());
    return;
  }
  auto table = BuildPolicyTable(BuildFitInputs(*target, std::move(*keys), *dispatch),
                                options_.fit, latest->has_value() ? &**latest : nullptr);
  if (!table.ok()) {
    Logger().error("refit target={} failed: {}", target_id, table.status().ToString());
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++counters_.refits;
  }
  // A predicted table is kept as it was; the first fitted one is a version
  // of its own even with the same decisions.
  if (latest->has_value() && (*latest)->origin == "fitted" && SameDecisions(**latest, *table)) {
    table->version = (*latest)->version;
    absl::Status s = store_->UpdatePolicyEvidence(target_id, &*table);
    if (!s.ok()) Logger().error("refreshing evidence failed: {}", s.ToString());
    return;
  }
  auto version = store_->AppendPolicyVersion(target_id, &*table);
  if (absl::IsFailedPrecondition(version.status())) {
    Logger().info("target={}: {}; refit not stored", target_id, version.status().message());
    return;
  }
  if (!version.ok()) {
    Logger().error("storing policy for target={} failed: {}", target_id,
                   version.status().ToString());
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++counters_.policy_versions;
  }
  Logger().info("target={} board={} new policy version={} entries={} samples={}", target_id,
                table->board, *version, table->entries.size(), table->TotalSamples());
  Push(target_id, *table);
}

void TunerCore::PushExternalVersions() {
  auto data_version = store_->DataVersion();
  if (!data_version.ok() || *data_version == data_version_) return;
  data_version_ = *data_version;
  for (const auto& [target_id, list] : sessions_) {
    if (list.empty()) continue;
    auto latest = store_->LoadPolicy(target_id, 0);
    if (!latest.ok() || !latest->has_value()) continue;
    auto pushed = pushed_version_.find(target_id);
    if (pushed != pushed_version_.end() && pushed->second >= (*latest)->version) continue;
    Logger().info("target={} policy version={} ({}) stored by another process: pushing",
                  target_id, (*latest)->version, (*latest)->origin);
    Push(target_id, **latest);
  }
}

void TunerCore::Push(int64_t target_id, const PolicyTable& table) {
  pushed_version_[target_id] = std::max(pushed_version_[target_id], table.version);
  v1::TunerMessage m;
  PolicyTableToProto(table, m.mutable_policy()->mutable_table());
  auto& list = sessions_[target_id];
  std::vector<std::weak_ptr<SessionHandle>> alive;
  for (auto& weak : list) {
    if (auto s = weak.lock()) {
      s->Send(m);
      alive.push_back(weak);
      std::lock_guard<std::mutex> lock(mu_);
      ++counters_.pushes;
    }
  }
  list = std::move(alive);
}

void TunerCore::ListTargets(std::function<void(absl::StatusOr<v1::ListTargetsResponse>)> done) {
  Post([this, done = std::move(done)] {
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
  Post([this, request, done = std::move(done)] {
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
    done(std::move(resp));
  });
}

}  // namespace spintune
