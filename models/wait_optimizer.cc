#include "models/wait_optimizer.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace spintune {
namespace {

// Two costs closer than this (relative) are a tie; rounding in the prefix
// sums of ~1e6 terms stays far below it.
constexpr double kTieRelTolerance = 1e-12;

bool Cheaper(double a, double b) {
  return a < b - kTieRelTolerance * std::max({1.0, std::fabs(a), std::fabs(b)});
}

class FamilySearch {
 public:
  FamilySearch(Strategy strategy, const Objective& objective, double latency_cap_ns)
      : objective_(objective), latency_cap_ns_(latency_cap_ns) {
    best_.strategy = strategy;
  }

  // Offers one candidate; keeps it when feasible and strictly cheaper.
  void Offer(const WaitParams& params, const ExpectedCost& expected) {
    if (objective_.cap_latency_at_irq &&
        Cheaper(latency_cap_ns_, expected.latency_ns)) {
      return;
    }
    const double cost = expected.Cost(objective_.latency_weight);
    if (!best_.feasible || Cheaper(cost, best_.cost_ns)) {
      best_.feasible = true;
      best_.params = params;
      best_.expected = expected;
      best_.cost_ns = cost;
    }
  }
  const FamilyOptimum& best() const { return best_; }

 private:
  const Objective& objective_;
  double latency_cap_ns_;
  FamilyOptimum best_;
};

// Sum over points of weight * ceil(value / period).
double SumOfCeilings(const WaitDistribution& dist, double period) {
  const auto& pts = dist.points();
  const double max_k = std::ceil(dist.max_ns() / period);
  double total = 0;
  if (max_k < static_cast<double>(pts.size())) {
    // Few distinct k: walk the boundaries k * period by binary search.
    size_t below = dist.CountAtOrBelow(0.0);  // k = 0 for X = 0
    for (double k = 1; k <= max_k; ++k) {
      const size_t upto = dist.CountAtOrBelow(k * period);
      total += k * (dist.prefix_weight(upto) - dist.prefix_weight(below));
      below = upto;
    }
  } else {
    for (const auto& p : pts) total += p.weight * std::ceil(p.value_ns / period);
  }
  return total;
}

}  // namespace

const std::vector<uint64_t>& DefaultPollIntervalsNs() {
  static const std::vector<uint64_t> kIntervals = [] {
    std::vector<uint64_t> v;
    for (uint64_t decade = 1000; decade <= 100'000'000; decade *= 10) {
      for (uint64_t m : {1, 2, 5}) {
        if (m * decade <= 100'000'000) v.push_back(m * decade);
      }
    }
    return v;
  }();
  return kIntervals;
}

ExpectedCost EvaluateWait(const WaitDistribution& dist, const WaitParams& params,
                          const PlatformCosts& costs) {
  ExpectedCost sum;
  for (const auto& p : dist.points()) {
    const RequestCost c = CostOfRequest(p.value_ns, params, costs);
    sum.cpu_ns += p.weight * c.cpu_ns;
    sum.latency_ns += p.weight * c.latency_ns;
  }
  if (!dist.empty()) {
    sum.cpu_ns /= dist.total_weight();
    sum.latency_ns /= dist.total_weight();
  }
  return sum;
}

absl::StatusOr<OptimizerResult> OptimizeWait(const WaitDistribution& dist,
                                             const PlatformCosts& costs,
                                             const OptimizerOptions& options) {
  if (dist.empty()) {
    return absl::InvalidArgumentError("no completion samples to optimize over");
  }
  SPINTUNE_RETURN_IF_ERROR(costs.Validate());
  if (options.max_spin_ns == 0) {
    return absl::InvalidArgumentError("max_spin_ns must be > 0");
  }
  const double lambda = options.objective.latency_weight;
  if (!std::isfinite(lambda) || lambda < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("latency weight must be finite and >= 0, got ", lambda));
  }

  const size_t n = dist.size();
  const double total = dist.total_weight();
  const double sum_all = dist.prefix_sum(n);
  const double mean = sum_all / total;
  const double max_x = dist.max_ns();
  const double spin_cap = static_cast<double>(options.max_spin_ns);
  const double c = costs.irq_cpu_ns;
  const double w = costs.irq_wake_ns;
  const double latency_cap = mean + w;  // the IRQ path's mean latency
  const Objective& obj = options.objective;

  OptimizerResult result;
  auto family = [&](Strategy s) { return FamilySearch(s, obj, latency_cap); };

  // IRQ.
  FamilySearch irq = family(Strategy::kIrq);
  if (options.IsAllowed(Strategy::kIrq)) {
    irq.Offer(WaitParams::Irq(), {c, mean + w});
  }

  // SPIN: to completion, bounded by the spin cap as timeout.
  FamilySearch spin = family(Strategy::kSpin);
  if (options.IsAllowed(Strategy::kSpin) && max_x <= spin_cap) {
    spin.Offer(WaitParams::Spin(options.max_spin_ns), {mean, mean});
  }

  // SPIN_THEN_IRQ(T): T = catch threshold of point j-1 catches points [0, j).
  FamilySearch spin_then_irq = family(Strategy::kSpinThenIrq);
  if (options.IsAllowed(Strategy::kSpinThenIrq)) {
    const auto& pts = dist.points();
    for (size_t j = 1; j <= n; ++j) {
      const double t = static_cast<double>(pts[j - 1].catch_ns);
      if (t > spin_cap) break;
      const double missed = total - dist.prefix_weight(j);
      const ExpectedCost e{(dist.prefix_sum(j) + missed * (t + c)) / total,
                           (sum_all + missed * w) / total};
      spin_then_irq.Offer(WaitParams::SpinThenIrq(pts[j - 1].catch_ns), e);
    }
  }

  // SLEEP_THEN_SPIN(S): D = S + timer_wake at timer_wake and at every X_j > it.
  FamilySearch sleep_then_spin = family(Strategy::kSleepThenSpin);
  if (options.IsAllowed(Strategy::kSleepThenSpin)) {
    const double tw = costs.timer_wake_ns;
    auto offer_sleep = [&](uint64_t s_ns) {
      const double d = static_cast<double>(s_ns) + tw;
      if (max_x - d > spin_cap) return;
      const size_t j = dist.CountAtOrBelow(d);
      const double above_w = total - dist.prefix_weight(j);
      const double above_sum = sum_all - dist.prefix_sum(j);
      const ExpectedCost e{costs.timer_cpu_ns + (above_sum - above_w * d) / total,
                           (dist.prefix_weight(j) * d + above_sum) / total};
      sleep_then_spin.Offer(WaitParams::SleepThenSpin(s_ns), e);
    };
    offer_sleep(0);
    for (const auto& p : dist.points()) {
      if (p.value_ns > tw) {
        offer_sleep(static_cast<uint64_t>(std::llround(p.value_ns - tw)));
      }
    }
  }

  // POLL_SLEEP(I) over the documented candidate set.
  FamilySearch poll_sleep = family(Strategy::kPollSleep);
  if (options.IsAllowed(Strategy::kPollSleep)) {
    std::vector<uint64_t> intervals = DefaultPollIntervalsNs();
    intervals.insert(intervals.end(), options.extra_poll_intervals_ns.begin(),
                     options.extra_poll_intervals_ns.end());
    std::sort(intervals.begin(), intervals.end());
    intervals.erase(std::unique(intervals.begin(), intervals.end()), intervals.end());
    for (uint64_t i_ns : intervals) {
      const double period = static_cast<double>(i_ns) + costs.timer_wake_ns;
      if (period <= 0) continue;
      const double mean_k = SumOfCeilings(dist, period) / total;
      poll_sleep.Offer(WaitParams::PollSleep(i_ns),
                       {mean_k * (costs.poll_read_ns + costs.timer_cpu_ns),
                        mean_k * period});
    }
  }

  result.families[0] = irq.best();
  result.families[1] = spin.best();
  result.families[2] = spin_then_irq.best();
  result.families[3] = sleep_then_spin.best();
  result.families[4] = poll_sleep.best();

  // Preference order for ties: IRQ, SPIN_THEN_IRQ, SPIN, POLL_SLEEP,
  // SLEEP_THEN_SPIN.
  const Strategy order[] = {Strategy::kIrq, Strategy::kSpinThenIrq, Strategy::kSpin,
                            Strategy::kPollSleep, Strategy::kSleepThenSpin};
  const FamilyOptimum* best = nullptr;
  for (Strategy s : order) {
    const FamilyOptimum& f = result.families[static_cast<int>(s) - 1];
    if (f.feasible && (best == nullptr || Cheaper(f.cost_ns, best->cost_ns))) {
      best = &f;
    }
  }
  if (best == nullptr) {
    return absl::FailedPreconditionError(
        "no allowed wait strategy is feasible under the spin cap and latency cap");
  }
  result.params = best->params;
  result.expected = best->expected;
  result.cost_ns = best->cost_ns;
  return result;
}

}  // namespace spintune
