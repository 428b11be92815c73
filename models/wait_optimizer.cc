#include "models/wait_optimizer.h"

#include <algorithm>
#include <cmath>
#include <limits>

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
  // Same expected cost, longer threshold (see the caller).
  void RaiseThreshold(uint64_t spin_ns) { best_.params.spin_ns = spin_ns; }

 private:
  const Objective& objective_;
  double latency_cap_ns_;
  FamilyOptimum best_;
};

// For every period c: sum over points of weight * PollsUntil(value, period),
// in one pass over the points.
std::vector<double> SumOfPollCounts(const WaitDistribution& dist,
                                    const std::vector<double>& periods) {
  const size_t m = periods.size();
  std::vector<double> inv(m), sums(m, 0.0);
  for (size_t c = 0; c < m; ++c) inv[c] = 1.0 / periods[c];
  for (const auto& p : dist.points()) {
    for (size_t c = 0; c < m; ++c) {
      sums[c] += p.weight * PollsUntil(p.value_ns, periods[c], inv[c]);
    }
  }
  return sums;
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
  const bool robust = options.robustness_rho > 0;
  if (robust && !(options.robustness_rho <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("robustness rho must be in (0, 1], got ", options.robustness_rho));
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
  if (!robust && options.IsAllowed(Strategy::kIrq)) {
    irq.Offer(WaitParams::Irq(), {c, mean + w});
  }

  // SPIN: to completion, bounded by the spin cap as timeout.
  FamilySearch spin = family(Strategy::kSpin);
  if (!robust && options.IsAllowed(Strategy::kSpin) && max_x <= spin_cap) {
    spin.Offer(WaitParams::Spin(options.max_spin_ns), {mean, mean});
  }

  // SPIN_THEN_IRQ(T): T = catch threshold of point j-1 catches points [0, j).
  FamilySearch spin_then_irq = family(Strategy::kSpinThenIrq);
  auto offer_threshold = [&](uint64_t t_ns, size_t j) {
    const double t = static_cast<double>(t_ns);
    const double missed = total - dist.prefix_weight(j);
    spin_then_irq.Offer(WaitParams::SpinThenIrq(t_ns),
                        {(dist.prefix_sum(j) + missed * (t + c)) / total,
                         (sum_all + missed * w) / total});
  };
  const auto& points = dist.points();
  if (options.robustness_rho > 0) {
    // Clamp: the bounds themselves plus every point inside them (J is
    // piecewise linear in T between points, so this is still exact).
    const double b = c + lambda * w;
    const double lo = std::ceil(options.robustness_rho * b);
    const double hi = std::min(std::floor(b / options.robustness_rho), spin_cap);
    if (lo <= hi) {
      for (double t : {lo, hi}) {
        offer_threshold(static_cast<uint64_t>(t), dist.CountAtOrBelow(t));
      }
      for (size_t j = 1; j <= n; ++j) {
        const double t = static_cast<double>(points[j - 1].catch_ns);
        if (t > lo && t < hi) offer_threshold(points[j - 1].catch_ns, j);
      }
    }
  } else if (options.IsAllowed(Strategy::kSpinThenIrq)) {
    for (size_t j = 1; j <= n; ++j) {
      if (static_cast<double>(points[j - 1].catch_ns) > spin_cap) break;
      offer_threshold(points[j - 1].catch_ns, j);
    }
  }

  // When the best threshold catches every sample, nothing in the data prices
  // a longer spin: raise it to B (capped), which costs nothing on the
  // samples and, for waits longer than any seen, keeps Karlin's 2-competitive
  // bound instead of paying B just above the largest sample.
  if (spin_then_irq.best().feasible && n > 0 &&
      spin_then_irq.best().params.spin_ns >= points[n - 1].catch_ns) {
    const double b = c + lambda * w;
    const double raised = std::min(b, robust ? std::min(b / options.robustness_rho, spin_cap)
                                             : spin_cap);
    if (raised > static_cast<double>(spin_then_irq.best().params.spin_ns)) {
      spin_then_irq.RaiseThreshold(static_cast<uint64_t>(raised));
    }
  }

  // SLEEP_THEN_SPIN(S) with the spin after the sleep bounded by the cap P
  // (then IRQ). With D = S + timer_wake, j1 = #{X <= D}, j2 = #{X <= D + P}:
  //   cpu(D) = timer_cpu + ((P_j2 - P_j1) - (W_j2 - W_j1) D
  //            + (N - W_j2)(P + irq_cpu)) / N
  //   lat(D) = (W_j1 D + (P_n - P_j1) + (N - W_j2) irq_wake) / N
  // Linear in D between the breakpoints X_j and X_j - P, so those (>= tw)
  // and D = tw are the exact candidates, visited in increasing order.
  FamilySearch sleep_then_spin = family(Strategy::kSleepThenSpin);
  if (!robust && options.IsAllowed(Strategy::kSleepThenSpin)) {
    const double tw = costs.timer_wake_ns;
    const double bound = spin_cap;
    std::vector<uint64_t> sleeps = {0};
    for (const auto& p : points) {
      if (p.value_ns > tw) sleeps.push_back(static_cast<uint64_t>(p.value_ns - tw + 0.5));
      if (p.value_ns - bound > tw) {
        sleeps.push_back(static_cast<uint64_t>(p.value_ns - bound - tw + 0.5));
      }
    }
    std::sort(sleeps.begin(), sleeps.end());
    sleeps.erase(std::unique(sleeps.begin(), sleeps.end()), sleeps.end());
    size_t j1 = 0, j2 = 0;
    for (uint64_t s_ns : sleeps) {
      const double d = static_cast<double>(s_ns) + tw;
      while (j1 < n && points[j1].value_ns <= d) ++j1;
      while (j2 < n && points[j2].value_ns <= d + bound) ++j2;
      const double spun_w = dist.prefix_weight(j2) - dist.prefix_weight(j1);
      const double spun_sum = dist.prefix_sum(j2) - dist.prefix_sum(j1);
      const double missed = total - dist.prefix_weight(j2);
      const ExpectedCost e{
          costs.timer_cpu_ns + (spun_sum - spun_w * d + missed * (bound + c)) / total,
          (dist.prefix_weight(j1) * d + (sum_all - dist.prefix_sum(j1)) + missed * w) / total};
      sleep_then_spin.Offer(WaitParams::SleepThenSpin(s_ns, options.max_spin_ns), e);
    }
  }

  // POLL_SLEEP(I) over the documented candidate set. With k = ceil(X / p),
  // p = I + timer_wake: E[k] >= max(E[X] / p, P(X > 0)), which bounds J from
  // below; a candidate whose bound is already worse than the best of the
  // other families is skipped (exactness is kept: it cannot win or tie).
  FamilySearch poll_sleep = family(Strategy::kPollSleep);
  if (!robust && options.IsAllowed(Strategy::kPollSleep)) {
    double best_other = std::numeric_limits<double>::infinity();
    for (const FamilySearch* f : {&irq, &spin, &spin_then_irq, &sleep_then_spin}) {
      if (f->best().feasible) best_other = std::min(best_other, f->best().cost_ns);
    }
    const double positive = total - dist.prefix_weight(dist.CountAtOrBelow(0.0));
    const double p_positive = positive / total;
    std::vector<uint64_t> intervals = DefaultPollIntervalsNs();
    intervals.insert(intervals.end(), options.extra_poll_intervals_ns.begin(),
                     options.extra_poll_intervals_ns.end());
    std::sort(intervals.begin(), intervals.end());
    intervals.erase(std::unique(intervals.begin(), intervals.end()), intervals.end());
    std::vector<uint64_t> kept;
    std::vector<double> periods;
    for (uint64_t i_ns : intervals) {
      const double period = static_cast<double>(i_ns) + costs.timer_wake_ns;
      if (period <= 0) continue;
      const double k_lb = std::max(mean / period, p_positive);
      const double j_lb = k_lb * (costs.poll_read_ns + costs.timer_cpu_ns) +
                          lambda * std::max(mean, period * p_positive);
      if (Cheaper(best_other, j_lb)) continue;
      kept.push_back(i_ns);
      periods.push_back(period);
    }
    const std::vector<double> sums = SumOfPollCounts(dist, periods);
    for (size_t c = 0; c < kept.size(); ++c) {
      const double mean_k = sums[c] / total;
      poll_sleep.Offer(WaitParams::PollSleep(kept[c]),
                       {mean_k * (costs.poll_read_ns + costs.timer_cpu_ns),
                        mean_k * periods[c]});
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
        robust ? "the robustness clamp [rho*B, B/rho] lies above max_spin_ns"
               : "no allowed wait strategy is feasible under the spin cap and latency cap");
  }
  result.params = best->params;
  result.expected = best->expected;
  result.cost_ns = best->cost_ns;
  return result;
}

}  // namespace spintune
