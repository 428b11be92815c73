#include "tuner/fitter.h"

#include <pthread.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "common/cpu_clock.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "tuner/fit_inputs.h"

namespace spintune {

absl::StatusOr<std::unique_ptr<Fitter>> Fitter::Create(FitterOptions options,
                                                       std::function<void(FitResult)> deliver) {
  if (!(options.max_cpu_share > 0 && options.max_cpu_share <= 1)) {
    return absl::InvalidArgumentError("max_cpu_share must be in (0, 1]");
  }
  if (options.db_path.empty() || options.db_path == ":memory:") {
    return absl::InvalidArgumentError("the tuner needs a database file, not ':memory:'");
  }
  StoreOptions store_options = options.store;
  store_options.reserve_bytes = 0;  // the tuner's own connection keeps it
  SPINTUNE_ASSIGN_OR_RETURN(auto store, Store::Open(options.db_path, store_options));
  return std::unique_ptr<Fitter>(
      new Fitter(std::move(options), std::move(store), std::move(deliver)));
}

Fitter::Fitter(FitterOptions options, std::unique_ptr<Store> store,
               std::function<void(FitResult)> deliver)
    : options_(std::move(options)),
      store_(std::move(store)),
      deliver_(std::move(deliver)),
      evidence_(options_.fit) {
  thread_ = std::thread([this] { Loop(); });
}

Fitter::~Fitter() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

uint64_t Fitter::Enqueue(Request request) {
  absl::MutexLock lock(&mu_);
  std::vector<uint64_t>& waiting = waiting_[request.target_id];
  if (request.kind != Kind::kPredict) {
    // Merge into the target's waiting request of the same kind, or a sync
    // into the target's LAST waiting request: it has to come after all of
    // them (a drain's answer after the refit queued behind a verification).
    for (auto t = waiting.rbegin(); t != waiting.rend(); ++t) {
      Request& q = requests_.at(*t);
      if (request.kind == Kind::kSync || q.kind == request.kind) {
        const bool was_deferrable = Deferrable(q);
        q.force = q.force || request.force;
        // A sync (a drain) or a forced refit makes the request it joins urgent.
        q.urgent = q.urgent || request.kind == Kind::kSync || request.force;
        if (was_deferrable && !Deferrable(q)) ++urgent_;
        return q.ticket;
      }
    }
  }
  request.ticket = next_ticket_++;
  if (!Deferrable(request)) ++urgent_;
  waiting.push_back(request.ticket);
  requests_.emplace(request.ticket, std::move(request));
  return waiting.back();
}

bool Fitter::Deferrable(const Request& r) {
  return r.kind != Kind::kSync && !r.force && !r.urgent;
}

uint64_t Fitter::Predict(int64_t target_id, TargetRecord target) {
  return Enqueue({target_id, Kind::kPredict, false, std::move(target), 0});
}

uint64_t Fitter::Refit(int64_t target_id, bool force) {
  return Enqueue({target_id, Kind::kRefit, force, {}, 0});
}

uint64_t Fitter::Sync(int64_t target_id) { return Enqueue({target_id, Kind::kSync, false, {}, 0}); }

uint64_t Fitter::Verify(int64_t target_id) {
  return Enqueue({target_id, Kind::kVerify, false, {}, 0});
}

void Fitter::Loop() {
  // Fits yield the CPU to ingest (acks wait on it; fits only delay tables).
  setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 10);
  pthread_setname_np(pthread_self(), "fitter");
  absl::Time not_before = absl::InfinitePast();  // of the next deferrable request
  while (true) {
    Request request;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || !requests_.empty();
      };
      mu_.Await(absl::Condition(&ready));
      // Within the CPU share, unless a drain waits for something queued.
      auto urgent_or_stop = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || urgent_ > 0;
      };
      if (!stop_ && absl::Now() < not_before) {
        mu_.AwaitWithDeadline(absl::Condition(&urgent_or_stop), not_before);
      }
      if (stop_) return;
      request = std::move(requests_.begin()->second);
      requests_.erase(requests_.begin());
      if (!Deferrable(request)) --urgent_;
      // Tickets rise: the oldest request is its target's first.
      auto waiting = waiting_.find(request.target_id);
      waiting->second.erase(waiting->second.begin());
      if (waiting->second.empty()) waiting_.erase(waiting);
    }
    const uint64_t cpu_start_ns = ThreadCpuNs();
    FitResult result = Run(request);
    if (Deferrable(request) && options_.max_cpu_share < 1) {
      const double cpu = static_cast<double>(ThreadCpuNs() - cpu_start_ns) / 1e9;
      not_before = absl::Now() + absl::Seconds(cpu * (1 / options_.max_cpu_share - 1));
    }
    result.target_id = request.target_id;
    result.ticket = request.ticket;
    deliver_(std::move(result));
  }
}

FitResult Fitter::Run(const Request& r) {
  switch (r.kind) {
    case Kind::kRefit:
      return RunRefit(r);
    case Kind::kPredict:
      return RunPredict(r);
    case Kind::kVerify:
      return RunVerify(r);
    case Kind::kSync:
      break;
  }
  return {};
}

FitResult Fitter::RunRefit(const Request& r) {
  FitResult out;
  const int64_t target_id = r.target_id;
  // Tuners sharing a database refit a target one at a time: the one that
  // holds its lease stores the version, the others push it to their
  // sessions (TunerCore::PushExternalVersions).
  auto lease = LeaseTarget(target_id, absl::ZeroDuration());
  if (!lease.ok()) {
    out.status = lease.status();
    return out;
  }
  if (!*lease) {
    Logger().debug("target={} is being refitted by another tuner", target_id);
    return out;
  }
  absl::Cleanup release = [&] { store_->ReleaseTarget(target_id); };
  auto changed = store_->DetectChanges(target_id, options_.change);
  // Everything below stops at its first failed statement; a failed drift
  // detection does not stop the refit, unless it failed because the
  // connection was lost (the lease ended with its session).
  if (!store_->HoldsLease(target_id)) {
    Logger().warn("refit target={}: the lease ended with a lost database connection: {}",
                  target_id, changed.status().ToString());
    out.status = changed.ok() ? absl::AbortedError("target lease lost") : changed.status();
    return out;
  }
  if (!changed.ok()) {
    Logger().error("drift detection for target={} failed: {}", target_id,
                   changed.status().ToString());
  } else {
    for (const auto& k : *changed) {
      Logger().info("target={} key {}/{}/op{}/sc{}: distribution changed, refitting on the "
                    "samples since",
                    target_id, k.device, k.cpu_class, k.opcode, k.size_class);
    }
    out.changes_detected = changed->size();
    // Drifts a verification detected since the last refit count too.
    auto earlier = drifted_.extract(target_id);
    if (!earlier.empty()) changed->insert(changed->end(), earlier.mapped().begin(),
                                          earlier.mapped().end());
  }
  auto target = store_->LoadTarget(target_id);
  auto keys = target.ok() ? store_->LoadKeys(target_id) : target.status();
  auto dispatch = keys.ok() ? store_->LoadDispatch(target_id) : keys.status();
  auto timers = dispatch.ok() ? store_->LoadTimerOversleep(target_id) : dispatch.status();
  if (!timers.ok()) {
    Logger().error("refit target={} cannot load evidence: {}", target_id,
                   timers.status().ToString());
    out.status = timers.status();
    return out;
  }
  uint64_t total = 0;
  for (const auto& k : *keys) total += k.histogram.total_count();
  if (!r.force && total < options_.fit.min_samples) return out;
  auto summary = store_->FindTarget(target->agent_id);
  if (summary.ok() && summary->has_value() && (*summary)->pinned_version != 0) {
    Logger().debug("target={} is pinned to version {}: no refit", target_id,
                   (*summary)->pinned_version);
    return out;
  }
  auto latest = store_->LoadPolicy(target_id, 0);
  if (!latest.ok()) {
    Logger().error("refit target={}: {}", target_id, latest.status().ToString());
    out.status = latest.status();
    return out;
  }
  auto irq = IrqPathOutcomes(*store_, target_id, target->devices);
  if (!irq.ok()) {
    Logger().error("refit target={}: {}", target_id, irq.status().ToString());
    out.status = irq.status();
    return out;
  }
  FitInputs inputs = BuildFitInputs(*target, *keys, *dispatch, *timers);
  inputs.irq_outcomes = std::move(*irq);
  auto table = BuildPolicyTable(inputs, options_.fit, latest->has_value() ? &**latest : nullptr);
  if (!table.ok()) {
    Logger().error("refit target={} failed: {}", target_id, table.status().ToString());
    return out;
  }
  // Keys rolled back by a verification keep their wait until their
  // evidence changes.
  auto released = ApplyHeldKeys(*store_, target_id, *keys,
                                changed.ok() ? *changed : std::vector<PolicyKey>(), &*table);
  if (!released.ok()) {
    out.status = released.status();
    return out;
  }
  out.released = std::move(*released);
  out.status = AttachTrials(*store_, target_id, latest->has_value() ? &**latest : nullptr,
                            TrialShare(*target, options_.verify.ab_share), &*table);
  if (!out.status.ok()) return out;
  out.fitted = true;
  // A predicted table is kept as it was; the first fitted one is a version
  // of its own even with the same decisions.
  if (latest->has_value() && (*latest)->origin == "fitted" && SameDecisions(**latest, *table)) {
    table->version = (*latest)->version;
    out.status = store_->UpdatePolicyEvidence(target_id, &*table);
    if (!out.status.ok()) Logger().error("refreshing evidence failed: {}", out.status.ToString());
    return out;
  }
  auto version = store_->AppendPolicyVersion(target_id, &*table,
                                             latest->has_value() ? (*latest)->version : 0);
  // Pinned meanwhile, or another tuner stored a version this fit did not
  // build on: the next refit starts from it.
  if (absl::IsFailedPrecondition(version.status()) || absl::IsAborted(version.status())) {
    Logger().info("target={}: {}; refit not stored", target_id, version.status().message());
    return out;
  }
  if (!version.ok()) {
    Logger().error("storing policy for target={} failed: {}", target_id,
                   version.status().ToString());
    out.status = version.status();
    return out;
  }
  Logger().info("target={} board={} new policy version={} entries={} samples={}", target_id,
                table->board, *version, table->entries.size(), table->TotalSamples());
  out.stored = std::move(*table);
  return out;
}

// Loading a target's evidence takes about a millisecond: a fleet's worth
// is loaded over many predictions, each from what is loaded so far.
constexpr absl::Duration kLoadBudget = absl::Milliseconds(50);

absl::Status Fitter::LoadEvidence() {
  const absl::Time start = absl::Now();
  if (start < next_list_at_) return absl::OkStatus();
  SPINTUNE_ASSIGN_OR_RETURN(auto targets, store_->ListTargets());
  const absl::Time now = absl::Now();
  next_list_at_ = now + 10 * (now - start);
  for (const auto& t : targets) {
    if (t.total_samples == 0) continue;
    auto it = cache_.find(t.id);
    if (it != cache_.end() && (it->second.total_samples == t.total_samples ||
                               now - it->second.loaded_at < options_.evidence_ttl)) {
      continue;
    }
    if (absl::Now() - now > kLoadBudget) {
      // The rest at the next prediction (the list is read again for it).
      next_list_at_ = absl::InfinitePast();
      break;
    }
    SPINTUNE_ASSIGN_OR_RETURN(auto record, store_->LoadTarget(t.id));
    SPINTUNE_ASSIGN_OR_RETURN(auto keys, store_->LoadKeys(t.id));
    SPINTUNE_ASSIGN_OR_RETURN(auto dispatch, store_->LoadDispatch(t.id));
    FitInputs in = BuildFitInputs(record, std::move(keys), dispatch);
    evidence_.Set(t.id, BoardEvidence{std::move(in.cpu_classes), std::move(in.devices),
                                      std::move(in.keys)});
    cache_[t.id] = Cached{t.total_samples, now};
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> Fitter::LeaseTarget(int64_t target_id, absl::Duration wait) {
  const absl::Time deadline = absl::Now() + wait;
  while (true) {
    absl::StatusOr<bool> lease = store_->LeaseTarget(target_id);
    if (!lease.ok() || *lease || absl::Now() >= deadline) return lease;
    absl::SleepFor(absl::Milliseconds(50));
  }
}

FitResult Fitter::RunVerify(const Request& r) {
  FitResult out;
  // A rollback is a version like a refit's: it takes the target's lease
  // too, so no two tuners store competing versions of one target. Another
  // tuner holds it only while it refits the target, so this waits for it
  // (the outcomes that asked for this verification arrived here, and
  // nothing asks again until more arrive).
  absl::StatusOr<bool> lease = LeaseTarget(r.target_id, absl::Seconds(5));
  if (!lease.ok() || !*lease) {
    out.status = lease.ok() ? absl::UnavailableError(absl::StrCat(
                                  "target ", r.target_id, " stayed leased by another tuner for 5 s"))
                            : lease.status();
    Logger().error("verifying target={} failed: {}", r.target_id, out.status.ToString());
    return out;
  }
  absl::Cleanup release = [&] { store_->ReleaseTarget(r.target_id); };
  VerifierOptions verify = options_.verify;
  verify.change = options_.change;
  auto verified = VerifyTarget(*store_, r.target_id, verify);
  if (!verified.ok()) {
    Logger().error("verifying target={} failed: {}", r.target_id, verified.status().ToString());
    out.status = verified.status();
    return out;
  }
  // Drifts the verification detected count for the next refit's held keys.
  auto& pending = drifted_[r.target_id];
  pending.insert(pending.end(), verified->drifted.begin(), verified->drifted.end());
  out.verified = std::move(verified->decided);
  out.stored = std::move(verified->rollback);
  return out;
}

FitResult Fitter::RunPredict(const Request& r) {
  FitResult out;
  auto latest = store_->LoadPolicy(r.target_id, 0);
  if (!latest.ok() || latest->has_value()) return out;  // a table came first
  out.status = LoadEvidence();
  if (!out.status.ok()) {
    Logger().error("cold start: cannot read the other targets' evidence: {}",
                   out.status.ToString());
    return out;
  }
  // Only other targets with samples are evidence: the requester had none at
  // its hello, but under load its first batches may be stored before this
  // runs, and a "prediction" from its own samples is not one.
  auto table = evidence_.Predict(BuildFitInputs(r.record, {}, {}), r.target_id);
  if (!table.ok()) {
    Logger().info("target={} board={}: no predicted table ({})", r.target_id, r.record.board,
                  table.status().message());
    return out;
  }
  auto version = store_->AppendPolicyVersion(r.target_id, &*table, /*based_on=*/0);
  if (absl::IsAborted(version.status())) {  // a table came first after all
    Logger().info("target={}: {}; prediction not stored", r.target_id, version.status().message());
    return out;
  }
  if (!version.ok()) {
    Logger().error("storing the predicted table failed: {}", version.status().ToString());
    out.status = version.status();
    return out;
  }
  Logger().info("target={} board={} predicted policy version={} entries={} from {} boards",
                r.target_id, r.record.board, *version, table->entries.size(), evidence_.boards());
  out.predicted = true;
  out.stored = std::move(*table);
  return out;
}

}  // namespace spintune
