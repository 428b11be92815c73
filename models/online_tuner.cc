#include "models/online_tuner.h"

#include <cmath>

namespace spintune {

void OnlineTuner::Observe(double x_ns, const WaitParams&, const RequestCost&, double) {
  window_.push_back(static_cast<uint64_t>(std::llround(std::max(0.0, x_ns))));
  if (window_.size() > options_.window) window_.pop_front();
  if (++since_refit_ >= options_.refit_every) {
    since_refit_ = 0;
    Refit();
  }
}

void OnlineTuner::Refit() {
  const size_t recent = options_.detect_samples;
  if (window_.size() >= 2 * recent) {
    LatencyHistogram before, after;
    for (size_t i = 0; i < window_.size(); ++i) {
      (i + recent < window_.size() ? before : after).Record(window_[i]);
    }
    if (DistributionChanged(before, after, options_.change)) {
      window_.erase(window_.begin(), window_.end() - static_cast<std::ptrdiff_t>(recent));
      ++changes_;
      fitted_ = false;  // the old decision was for another distribution
    }
  }
  if (window_.size() < options_.min_samples) return;
  const WaitDistribution dist =
      WaitDistribution::FromSamples(std::vector<uint64_t>(window_.begin(), window_.end()));
  auto fit = OptimizeWait(dist, costs_, options_.optimizer);
  if (!fit.ok()) return;
  const double lambda = options_.optimizer.objective.latency_weight;
  const ExpectedCost now = EvaluateWait(dist, current_, costs_);
  const bool breaks_cap = options_.optimizer.objective.cap_latency_at_irq &&
                          now.latency_ns > dist.mean_ns() + costs_.irq_wake_ns;
  if (!fitted_ || breaks_cap ||
      fit->cost_ns < (1 - options_.hysteresis) * now.Cost(lambda)) {
    current_ = fit->params;
    fitted_ = true;
  }
}

}  // namespace spintune
