#include "tuner/predictor.h"

#include "common/logging.h"
#include "common/status_macros.h"
#include "tuner/fit_inputs.h"

namespace spintune {

Predictor::Predictor(std::string db_path, FitConfig fit, Deliver deliver,
                     absl::Duration evidence_ttl)
    : db_path_(std::move(db_path)),
      fit_(std::move(fit)),
      deliver_(std::move(deliver)),
      evidence_ttl_(evidence_ttl) {
  thread_ = std::thread([this] { Loop(); });
}

Predictor::~Predictor() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    cv_.notify_all();
  }
  thread_.join();
}

void Predictor::Request(int64_t target_id, TargetRecord target) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!pending_.insert(target_id).second) return;
  requests_.emplace_back(target_id, std::move(target));
  cv_.notify_one();
}

absl::Status Predictor::LoadEvidence() {
  if (!store_) {
    if (db_path_ == ":memory:" || db_path_.empty()) {
      return absl::NotFoundError("an in-memory database is not shared with the predictor");
    }
    SPINTUNE_ASSIGN_OR_RETURN(store_, Store::Open(db_path_));
  }
  SPINTUNE_ASSIGN_OR_RETURN(auto targets, store_->ListTargets());
  const absl::Time now = absl::Now();
  for (const auto& t : targets) {
    if (t.total_samples == 0) continue;
    auto it = cache_.find(t.id);
    if (it != cache_.end() && (it->second.total_samples == t.total_samples ||
                               now - it->second.loaded_at < evidence_ttl_)) {
      continue;
    }
    SPINTUNE_ASSIGN_OR_RETURN(auto record, store_->LoadTarget(t.id));
    SPINTUNE_ASSIGN_OR_RETURN(auto keys, store_->LoadKeys(t.id));
    SPINTUNE_ASSIGN_OR_RETURN(auto dispatch, store_->LoadDispatch(t.id));
    FitInputs in = BuildFitInputs(record, std::move(keys), dispatch);
    BoardEvidence e{std::move(in.cpu_classes), std::move(in.devices), std::move(in.keys)};
    if (it == cache_.end()) {
      it = cache_.emplace(t.id, Cached{0, now, evidence_.size()}).first;
      evidence_.push_back(std::move(e));
    } else {
      evidence_[it->second.index] = std::move(e);
    }
    it->second.total_samples = t.total_samples;
    it->second.loaded_at = now;
  }
  return absl::OkStatus();
}

void Predictor::Loop() {
  while (true) {
    std::pair<int64_t, TargetRecord> request;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !requests_.empty(); });
      if (stop_) return;
      request = std::move(requests_.front());
      requests_.pop_front();
    }
    // Only targets with samples are evidence, and the requester has none.
    const absl::Status loaded = LoadEvidence();
    absl::StatusOr<PolicyTable> table =
        loaded.ok() ? PredictPolicyTable(evidence_, BuildFitInputs(request.second, {}, {}), fit_)
                    : loaded;
    if (!loaded.ok() && !absl::IsNotFound(loaded)) {
      Logger().error("cold start: cannot read the other targets' evidence: {}",
                     loaded.ToString());
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      pending_.erase(request.first);
    }
    deliver_(request.first, std::move(table));
  }
}

}  // namespace spintune
