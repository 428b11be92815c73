#include "models/wait_optimizer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/container/inlined_vector.h"
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

// Neumaier's compensated sum: the SLEEP_THEN_SPIN sweep over several timer
// atoms adds and removes O(n m) terms, and plain summation would let
// rounding drift towards the tie tolerance of Cheaper().
class CompensatedSum {
 public:
  void Add(double x) {
    const double t = sum_ + x;
    compensation_ += std::fabs(sum_) >= std::fabs(x) ? (sum_ - t) + x : (x - t) + sum_;
    sum_ = t;
  }
  double value() const { return sum_ + compensation_; }

 private:
  double sum_ = 0;
  double compensation_ = 0;
};

// Buffers of up to this many poll periods, timer atoms or events stay on the
// stack: with constant costs the optimizer allocates nothing per key.
constexpr size_t kInline = 32;

// For every period c: sums[c] = sum over points of weight * PollsUntil(value,
// periods[c]). Periods go in blocks of kPollBlock whose accumulators stay in
// registers across one pass over the points (accumulating into a buffer in
// memory ran 1.8x slower inside optimizer_bench than in a standalone program
// with the same object code).
constexpr size_t kPollBlock = 8;

void SumOfPollCounts(const WaitDistribution& dist, absl::Span<const double> periods,
                     absl::Span<double> sums) {
  for (size_t first = 0; first < periods.size(); first += kPollBlock) {
    const size_t width = std::min(kPollBlock, periods.size() - first);
    double period[kPollBlock], inv[kPollBlock], acc[kPollBlock] = {};
    for (size_t c = 0; c < kPollBlock; ++c) {
      period[c] = c < width ? periods[first + c] : 1.0;  // padding lanes: unused
      inv[c] = 1.0 / period[c];
    }
    for (const auto& p : dist.points()) {
      for (size_t c = 0; c < kPollBlock; ++c) {
        acc[c] += p.weight * PollsUntil(p.value_ns, period[c], inv[c]);
      }
    }
    for (size_t c = 0; c < width; ++c) sums[first + c] = acc[c];
  }
}

// Expected CPU and latency of SLEEP_THEN_SPIN(S) as lines in S:
// cpu = cpu0 + cpu1 S, latency = lat0 + lat1 S.
struct Line {
  double cpu0 = 0, cpu1 = 0, lat0 = 0, lat1 = 0;
};

// The smallest integer sleep S >= 0 (held in a double: the sweep stays in
// floating point) with x <= (S + tw) + extra, the comparison CostOfRequest
// makes. Starts from x - tw - extra truncated (one instruction, unlike ceil
// without SSE4.1); the loops round it up and mend any rounding of the
// subtraction. From 2^53 on every double is an integer and s + 1 == s.
double FirstSleepReaching(double x, double tw, double extra) {
  constexpr double kIntegersEnd = 0x1p53;
  const double start = std::max(0.0, x - tw - extra);
  if (start >= kIntegersEnd) return start;
  double s = static_cast<double>(static_cast<int64_t>(start));
  while ((s + tw) + extra < x && s < kIntegersEnd) s += 1;
  while (s > 0 && ((s - 1) + tw) + extra >= x) s -= 1;
  return s;
}

constexpr double kNever = std::numeric_limits<double>::infinity();

// One timer atom in the SLEEP_THEN_SPIN sweep. With D = S + tw, the first j1
// points have X <= D (the sleep outlasts them), the first j2 have X <= D + P
// (the spin after the sleep catches them); the rest take the IRQ. next_s1
// and next_s2 are the sleeps at which j1 and j2 move next (kNever: done).
struct AtomState {
  double tw = 0;
  double probability = 0;
  size_t j1 = 0, j2 = 0;
  double next_s1 = 0, next_s2 = 0;
  Line line;

  double next_s() const { return std::min(next_s1, next_s2); }
  // Moves j1 and j2 past every point reached at sleep `s`. A point counts as
  // reached exactly when its event is due, so every due event moves a
  // pointer (the sweep always progresses).
  void AdvanceTo(double s, const std::vector<WaitDistribution::Point>& points, double bound) {
    Advance(s, points, 0, &j1, &next_s1);
    Advance(s, points, bound, &j2, &next_s2);
  }

 private:
  void Advance(double s, const std::vector<WaitDistribution::Point>& points, double extra,
               size_t* j, double* next) const {
    while (*next <= s) {
      *next = ++*j < points.size() ? FirstSleepReaching(points[*j].value_ns, tw, extra) : kNever;
    }
  }
};

// The sum of the atoms' lines weighted by probability. One atom (constant
// costs): its own line. More: compensated sums, in which an atom's old line
// is taken out exactly as it was put in.
class LineMixture {
 public:
  explicit LineMixture(bool single_atom) : single_atom_(single_atom) {}

  void Replace(double probability, const Line& old_line, const Line& new_line) {
    if (single_atom_) {
      line_ = new_line;
      return;
    }
    for (const auto& [line, sign] : {std::pair{&old_line, -1.0}, std::pair{&new_line, 1.0}}) {
      cpu0_.Add(sign * (probability * line->cpu0));
      cpu1_.Add(sign * (probability * line->cpu1));
      lat0_.Add(sign * (probability * line->lat0));
      lat1_.Add(sign * (probability * line->lat1));
    }
  }

  ExpectedCost At(double s) const {
    if (single_atom_) return {line_.cpu0 + line_.cpu1 * s, line_.lat0 + line_.lat1 * s};
    return {cpu0_.value() + cpu1_.value() * s, lat0_.value() + lat1_.value() * s};
  }

 private:
  bool single_atom_;
  Line line_;
  CompensatedSum cpu0_, cpu1_, lat0_, lat1_;
};

// SLEEP_THEN_SPIN(S) with the spin after the sleep bounded by P (then IRQ),
// over the timer oversleep atoms (tw_k, p_k). For one atom, with D = S + tw_k,
// j1 = #{X <= D}, j2 = #{X <= D + P}, prefix weights W and sums P_j of the
// points and N = W_n:
//   N cpu_k(S) = N timer_cpu + (P_j2 - P_j1) - (W_j2 - W_j1) D
//                + (N - W_j2)(P + irq_cpu)
//   N lat_k(S) = W_j1 D + (P_n - P_j1) + (N - W_j2) irq_wake
// (the cost table of cost_model.h summed over the points). Between the
// events S = X_j - tw_k and S = X_j - P - tw_k, where j1 or j2 of an atom
// moves, every atom's cost is linear in S, so their expectation
// sum_k p_k (cpu_k, lat_k) is too: its minimum over S >= 0 lies at S = 0 or
// at an event. Those are the exact candidates (as integer ns, the first S at
// which the event has happened). Each atom's two event sequences are sorted
// (the points are): the sweep takes the earlier of the two, and a heap of the
// atoms by their next event merges the atoms. O(n m log m) for m atoms, O(n)
// for constant costs, no sort.
void SweepSleepThenSpin(const WaitDistribution& dist, const PlatformModel& model,
                        uint64_t bound_ns, FamilySearch* family) {
  const auto& points = dist.points();
  const size_t n = points.size();
  const double bound = static_cast<double>(bound_ns);
  const double inv_total = 1.0 / dist.total_weight();
  const double sum_all = dist.prefix_sum(n);
  const PlatformCosts& mean = model.means();
  const auto atoms = model.timer_wake();

  auto line_of = [&](const AtomState& a) {
    const double caught = dist.prefix_weight(a.j2) - dist.prefix_weight(a.j1);
    const double spun_sum = dist.prefix_sum(a.j2) - dist.prefix_sum(a.j1);
    const double missed = dist.total_weight() - dist.prefix_weight(a.j2);
    Line l;
    l.cpu0 = mean.timer_cpu_ns +
             (spun_sum - caught * a.tw + missed * (bound + mean.irq_cpu_ns)) * inv_total;
    l.cpu1 = -caught * inv_total;
    l.lat0 = (dist.prefix_weight(a.j1) * a.tw + (sum_all - dist.prefix_sum(a.j1)) +
              missed * mean.irq_wake_ns) *
             inv_total;
    l.lat1 = dist.prefix_weight(a.j1) * inv_total;
    return l;
  };

  // Every atom starts with the first point's events pending and is moved to
  // S = 0; the heap holds the atoms by their next event, earliest first.
  absl::InlinedVector<AtomState, kInline> state_storage(atoms.size());
  AtomState* const state = state_storage.data();
  absl::InlinedVector<AtomState*, kInline> heap_storage(atoms.size());
  AtomState** const heap = heap_storage.data();
  const auto later = [](const AtomState* a, const AtomState* b) {
    return a->next_s() > b->next_s();
  };
  LineMixture mixture(atoms.size() == 1);
  for (size_t k = 0; k < atoms.size(); ++k) {
    AtomState& a = state[k];
    a.tw = atoms[k].value_ns;
    a.probability = atoms[k].probability;
    a.next_s1 = FirstSleepReaching(points[0].value_ns, a.tw, 0);
    a.next_s2 = FirstSleepReaching(points[0].value_ns, a.tw, bound);
    a.AdvanceTo(0, points, bound);
    a.line = line_of(a);
    mixture.Replace(a.probability, Line(), a.line);
    heap[k] = &a;
  }
  size_t live = atoms.size();
  std::make_heap(heap, heap + live, later);

  double s = 0;
  while (true) {
    family->Offer(WaitParams::SleepThenSpin(static_cast<uint64_t>(s), bound_ns),
                  mixture.At(s));
    while (live > 0 && heap[0]->next_s() == kNever) {
      std::pop_heap(heap, heap + live, later);
      --live;
    }
    if (live == 0) break;
    s = heap[0]->next_s();
    while (live > 0 && heap[0]->next_s() <= s) {
      AtomState& a = *heap[0];
      a.AdvanceTo(s, points, bound);
      const Line line = line_of(a);
      mixture.Replace(a.probability, a.line, line);
      a.line = line;
      // Sift the moved atom down: pop it to the back, push it back in.
      if (live > 1) {
        std::pop_heap(heap, heap + live, later);
        std::push_heap(heap, heap + live, later);
      }
    }
  }
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
                          const PlatformModel& model) {
  ExpectedCost sum;
  for (const auto& p : dist.points()) {
    const RequestCost c = ExpectedRequestCost(p.value_ns, params, model);
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
                                             const PlatformModel& model,
                                             const OptimizerOptions& options) {
  if (dist.empty()) {
    return absl::InvalidArgumentError("no completion samples to optimize over");
  }
  SPINTUNE_RETURN_IF_ERROR(model.Validate());
  const PlatformCosts& costs = model.means();
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
  const double inv_total = 1.0 / total;
  auto offer_threshold = [&](uint64_t t_ns, size_t j) {
    const double t = static_cast<double>(t_ns);
    const double missed = total - dist.prefix_weight(j);
    spin_then_irq.Offer(WaitParams::SpinThenIrq(t_ns),
                        {(dist.prefix_sum(j) + missed * (t + c)) * inv_total,
                         (sum_all + missed * w) * inv_total});
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

  FamilySearch sleep_then_spin = family(Strategy::kSleepThenSpin);
  if (!robust && options.IsAllowed(Strategy::kSleepThenSpin)) {
    SweepSleepThenSpin(dist, model, options.max_spin_ns, &sleep_then_spin);
  }

  // POLL_SLEEP(I) over the documented candidate set, with one oversleep tw
  // per request (platform_model.h): k = ceil(X / p), p = I + tw. Then
  // E[k] >= max(E[X] E[1/p], P(X > 0)) and E[k p] >= max(E[X], P(X > 0) E[p]),
  // which bound J from below; a candidate whose bound is already worse than
  // the best of the other families is skipped (exactness is kept: it cannot
  // win or tie).
  FamilySearch poll_sleep = family(Strategy::kPollSleep);
  if (!robust && options.IsAllowed(Strategy::kPollSleep)) {
    double best_other = std::numeric_limits<double>::infinity();
    for (const FamilySearch* f : {&irq, &spin, &spin_then_irq, &sleep_then_spin}) {
      if (f->best().feasible) best_other = std::min(best_other, f->best().cost_ns);
    }
    const double positive = total - dist.prefix_weight(dist.CountAtOrBelow(0.0));
    const double p_positive = positive / total;
    const auto atoms = model.timer_wake();
    // The default intervals are sorted; the extra ones go in their place.
    absl::InlinedVector<uint64_t, kInline> intervals(DefaultPollIntervalsNs().begin(),
                                                     DefaultPollIntervalsNs().end());
    for (uint64_t extra : options.extra_poll_intervals_ns) {
      auto at = std::lower_bound(intervals.begin(), intervals.end(), extra);
      if (at == intervals.end() || *at != extra) intervals.insert(at, extra);
    }
    absl::InlinedVector<uint64_t, kInline> kept;
    absl::InlinedVector<double, kInline> periods;  // kept x atoms, interval-major
    for (uint64_t i_ns : intervals) {
      const double interval = static_cast<double>(i_ns);
      if (interval + atoms.front().value_ns <= 0) continue;
      double mean_inv_period = 0;
      for (const CostAtom& a : atoms) mean_inv_period += a.probability / (interval + a.value_ns);
      const double mean_period = interval + costs.timer_wake_ns;
      const double k_lb = std::max(mean * mean_inv_period, p_positive);
      const double j_lb = k_lb * (costs.poll_read_ns + costs.timer_cpu_ns) +
                          lambda * std::max(mean, mean_period * p_positive);
      if (Cheaper(best_other, j_lb)) continue;
      kept.push_back(i_ns);
      for (const CostAtom& a : atoms) periods.push_back(interval + a.value_ns);
    }
    absl::InlinedVector<double, kInline> sums(periods.size());
    SumOfPollCounts(dist, periods, absl::MakeSpan(sums));
    for (size_t c = 0; c < kept.size(); ++c) {
      double mean_k = 0, mean_latency = 0;
      for (size_t k = 0; k < atoms.size(); ++k) {
        const size_t at = c * atoms.size() + k;
        mean_k += atoms[k].probability * sums[at] / total;
        mean_latency += atoms[k].probability * periods[at] * sums[at] / total;
      }
      poll_sleep.Offer(WaitParams::PollSleep(kept[c]),
                       {mean_k * (costs.poll_read_ns + costs.timer_cpu_ns), mean_latency});
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
