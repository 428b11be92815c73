#include "bench/online_tuner.h"

#include <algorithm>
#include <cmath>

namespace spintune {

OnlineTuner::OnlineTuner(const PlatformCosts& costs, OnlineTunerOptions options)
    : costs_(costs), options_(std::move(options)) {
  const double b = costs.irq_cpu_ns + options_.optimizer.objective.latency_weight * costs.irq_wake_ns;
  current_ = WaitParams::SpinThenIrq(
      static_cast<uint64_t>(std::min(b, static_cast<double>(options_.optimizer.max_spin_ns))));
}

void OnlineTuner::Observe(double x_ns, const WaitParams&, const RequestCost&, double) {
  window_.push_back(static_cast<uint64_t>(std::llround(std::max(0.0, x_ns))));
  if (window_.size() > options_.window) window_.pop_front();
  if (++since_refit_ >= next_refit_) {
    since_refit_ = 0;
    next_refit_ = std::min(next_refit_ * 2, options_.refit_every);
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
      // Most likely change point: the split of the recent block whose two
      // sides differ most from each other.
      constexpr size_t kStep = 64;
      size_t keep = recent;
      double best = -1;
      for (size_t k = kStep; k < recent; k += kStep) {
        LatencyHistogram older, newer;
        for (size_t i = window_.size() - recent; i < window_.size(); ++i) {
          (i + k < window_.size() ? older : newer).Record(window_[i]);
        }
        older.Merge(before);
        const double d = KsDistance(older, newer);
        if (d > best) {
          best = d;
          keep = k;
        }
      }
      window_.erase(window_.begin(), window_.end() - static_cast<std::ptrdiff_t>(keep));
      ++changes_;
      fitted_ = false;  // the old decision was for another distribution
      next_refit_ = kStep;
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
