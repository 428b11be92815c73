// Known-answer tests of the optimizer. Each expected answer is derived in the
// comment next to it from the cost table in cost_model.h. Write
// B = irq_cpu + lambda * irq_wake, the "buy price" of ski rental: for
// SPIN_THEN_IRQ(T), J(T) = E[min(X, T)] + P(X > T) * B + lambda * E[X].
#include "models/wait_optimizer.h"

#include <cmath>
#include <random>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace spintune {
namespace {

// Relative tolerance for costs computed by two different summation orders
// over <= 1e6 doubles: far above rounding (~1e-13), far below any real gap.
constexpr double kSumTolerance = 1e-9;

PlatformCosts Costs(double irq_cpu_us, double irq_wake_us, double poll_read_us = 0.1,
                    double timer_cpu_us = 2, double timer_wake_us = 50) {
  PlatformCosts c;
  c.irq_cpu_ns = irq_cpu_us * 1000;
  c.irq_wake_ns = irq_wake_us * 1000;
  c.poll_read_ns = poll_read_us * 1000;
  c.timer_cpu_ns = timer_cpu_us * 1000;
  c.timer_wake_ns = timer_wake_us * 1000;
  return c;
}

OptimizerOptions SpinOrIrqOnly(double lambda = 1.0) {
  OptimizerOptions o;
  o.objective = {lambda, false};
  o.Disallow(Strategy::kSleepThenSpin);
  o.Disallow(Strategy::kPollSleep);
  o.max_spin_ns = 1'000'000'000;
  return o;
}

std::vector<uint64_t> Repeat(uint64_t value, int n) {
  return std::vector<uint64_t>(n, value);
}

TEST(WaitOptimizer, DeterministicWaitSpinsIffShorterThanB) {
  // X = d always. Spinning costs d + lambda d; IRQ costs c + lambda (d + w).
  // Spin wins iff d < c + lambda w = B. Here c = 20us, w = 30us, lambda = 1:
  // B = 50us.
  const PlatformCosts costs = Costs(20, 30);
  {
    auto r = OptimizeWait(WaitDistribution::FromSamples(Repeat(49'000, 100)), costs,
                          SpinOrIrqOnly());
    ASSERT_TRUE(r.ok()) << r.status();
    // Ties between SPIN and SPIN_THEN_IRQ(T = max) go to the IRQ fallback;
    // a threshold that catches every sample is raised to B = 50 us.
    EXPECT_EQ(r->params, WaitParams::SpinThenIrq(50'000));
    EXPECT_NEAR(r->cost_ns, 2 * 49'000.0, 1e-6);
  }
  {
    auto r = OptimizeWait(WaitDistribution::FromSamples(Repeat(51'000, 100)), costs,
                          SpinOrIrqOnly());
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->params, WaitParams::Irq());
    EXPECT_NEAR(r->cost_ns, 20'000 + 51'000 + 30'000.0, 1e-6);
  }
}

TEST(WaitOptimizer, TwoPointMixtureHasInteriorThreshold) {
  // X = 1us w.p. 0.9, 1ms w.p. 0.1; c = 20us, w = 30us, lambda = 1, so
  // E[X] = 100.9us and
  //   T = 0   : 20 + (100.9 + 30)                         = 150.9us
  //   T = 1us : 0.9*1 + 0.1*(1 + 20) + (100.9 + 0.1*30)   = 106.9us
  //   T = 1ms : 100.9 + 100.9                             = 201.8us
  // so the optimum is T = 1us: spin through the fast mode, then block.
  std::vector<uint64_t> x = Repeat(1'000, 900);
  auto slow = Repeat(1'000'000, 100);
  x.insert(x.end(), slow.begin(), slow.end());
  auto r = OptimizeWait(WaitDistribution::FromSamples(x), Costs(20, 30), SpinOrIrqOnly());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->params, WaitParams::SpinThenIrq(1'000));
  EXPECT_NEAR(r->cost_ns, 106'900, 1e-6);
  EXPECT_NEAR(r->expected.cpu_ns, 3'000, 1e-6);
  EXPECT_NEAR(r->expected.latency_ns, 103'900, 1e-6);
}

TEST(WaitOptimizer, ThreePointMixturePicksTheMiddlePoint) {
  // X in {2us, 10us, 5ms} w.p. {0.5, 0.3, 0.2}; c = 40us, w = 0, lambda = 0
  // (B = 40us), so J(T) = E[min(X,T)] + P(X>T) * 40 + 0:
  //   T = 0    : 40
  //   T = 2us  : 0.5*2 + 0.5*(2 + 40)            = 22
  //   T = 10us : 0.5*2 + 0.3*10 + 0.2*(10 + 40)  = 14
  //   T = 5ms  : 0.5*2 + 0.3*10 + 0.2*5000       = 1004
  // so T = 10us.
  std::vector<uint64_t> x = Repeat(2'000, 50);
  for (auto v : Repeat(10'000, 30)) x.push_back(v);
  for (auto v : Repeat(5'000'000, 20)) x.push_back(v);
  auto r = OptimizeWait(WaitDistribution::FromSamples(x), Costs(40, 0), SpinOrIrqOnly(0.0));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->params, WaitParams::SpinThenIrq(10'000));
  EXPECT_NEAR(r->cost_ns, 14'000, 1e-6);
}

TEST(WaitOptimizer, ExponentialWaitsSpinToCompletionIffMeanBelowB) {
  // Constant hazard 1/m: dJ/dT = (1 - F(T)) (1 - B/m) has one sign, so the
  // optimum is an endpoint: spin everything when m < B, block at once when
  // m > B (models/cost_model.h; Karlin et al. 1991).
  const PlatformCosts costs = Costs(30, 20);  // B = 50us at lambda = 1
  std::mt19937_64 rng(3);
  for (double mean_us : {25.0, 100.0}) {
    std::exponential_distribution<double> e(1.0 / (mean_us * 1000));
    std::vector<uint64_t> x;
    for (int i = 0; i < 50000; ++i) x.push_back(static_cast<uint64_t>(e(rng)) + 1);
    const auto dist = WaitDistribution::FromSamples(x);
    auto r = OptimizeWait(dist, costs, SpinOrIrqOnly());
    ASSERT_TRUE(r.ok());
    if (mean_us < 50) {
      // Sampling noise may stop the spin a few outliers short of the maximum;
      // it must still catch essentially every request.
      ASSERT_EQ(r->params.strategy, Strategy::kSpinThenIrq);
      // T >= 6 means catches all but e^-6 = 0.25% of requests.
      EXPECT_GE(static_cast<double>(r->params.spin_ns), 6 * mean_us * 1000);
    } else {
      EXPECT_EQ(r->params, WaitParams::Irq());
    }
  }
}

TEST(WaitOptimizer, UniformWaitsPickAnEndpoint) {
  // X ~ U[0, u]: J(T) = T - T^2/(2u) + B (1 - T/u) + lambda E[X] is concave,
  // so the optimum is T = 0 (cost B) or T = u (cost u/2): spin iff u/2 < B.
  const PlatformCosts costs = Costs(50, 0);  // B = 50us
  for (double u_us : {90.0, 110.0}) {
    std::vector<uint64_t> x;
    for (int i = 1; i <= 10000; ++i) {
      x.push_back(static_cast<uint64_t>(u_us * 1000 * i / 10000));
    }
    const auto dist = WaitDistribution::FromSamples(x);
    auto r = OptimizeWait(dist, costs, SpinOrIrqOnly(0.0));
    ASSERT_TRUE(r.ok());
    if (u_us / 2 < 50) {
      EXPECT_EQ(r->params, WaitParams::SpinThenIrq(static_cast<uint64_t>(u_us * 1000)));
    } else {
      EXPECT_EQ(r->params, WaitParams::Irq());
    }
  }
}

TEST(WaitOptimizer, SleepThenSpinWinsForALongDeterministicWait) {
  // X = 100us; c = w = 50us; timer_cpu = 2us, timer_wake = 5us; lambda = 1.
  //   IRQ              : 50 + 150 = 200us; SPIN: 100 + 100 = 200us
  //   SLEEP_THEN_SPIN  : sleep S = 95us so S + tw = X: cpu 2, latency 100
  //                      -> 102us, the optimum.
  const PlatformCosts costs = Costs(50, 50, 0.1, 2, 5);
  OptimizerOptions o;
  o.objective = Objective::Balanced();
  auto r = OptimizeWait(WaitDistribution::FromSamples(Repeat(100'000, 10)), costs, o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->params, WaitParams::SleepThenSpin(95'000, o.max_spin_ns));
  EXPECT_NEAR(r->cost_ns, 102'000, 1e-6);
}

TEST(WaitOptimizer, MaxSpinCapsTheThreshold) {
  // Same mixture as TwoPointMixtureHasInteriorThreshold but with lambda = 0
  // and a slow mode of 60us: uncapped the best is spinning everything; a
  // 10us cap forces T <= 10us.
  std::vector<uint64_t> x = Repeat(1'000, 900);
  for (auto v : Repeat(60'000, 100)) x.push_back(v);
  OptimizerOptions o = SpinOrIrqOnly(0.0);
  o.max_spin_ns = 10'000;
  auto r = OptimizeWait(WaitDistribution::FromSamples(x), Costs(100, 0), o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->params, WaitParams::SpinThenIrq(1'000));
  EXPECT_FALSE(r->families[static_cast<int>(Strategy::kSpin) - 1].feasible);
}

TEST(WaitOptimizer, CpuObjectiveRespectsTheIrqLatency) {
  // lambda = 0 alone would sleep forever: SLEEP_THEN_SPIN(S huge) costs
  // timer_cpu only. The cpu objective caps mean latency at the IRQ path's.
  const PlatformCosts costs = Costs(50, 20, 0.1, 2, 5);
  std::vector<uint64_t> x = Repeat(30'000, 50);
  for (auto v : Repeat(300'000, 50)) x.push_back(v);
  OptimizerOptions o;
  o.objective = Objective::Cpu();
  auto r = OptimizeWait(WaitDistribution::FromSamples(x), costs, o);
  ASSERT_TRUE(r.ok());
  const double irq_latency = (30'000 + 300'000) / 2.0 + 20'000;
  EXPECT_LE(r->expected.latency_ns, irq_latency * (1 + 1e-12));
  for (const auto& f : r->families) {
    if (f.feasible) {
      EXPECT_LE(f.expected.latency_ns, irq_latency * (1 + 1e-12));
    }
  }
}

TEST(WaitOptimizer, ExcludedStrategiesAreNeverChosen) {
  const PlatformCosts costs = Costs(20, 30);
  OptimizerOptions o = SpinOrIrqOnly();
  o.Disallow(Strategy::kSpinThenIrq);
  o.Disallow(Strategy::kSpin);
  auto r = OptimizeWait(WaitDistribution::FromSamples(Repeat(1'000, 10)), costs, o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->params.strategy, Strategy::kIrq);
  o.Disallow(Strategy::kIrq);
  EXPECT_EQ(OptimizeWait(WaitDistribution::FromSamples(Repeat(1'000, 10)), costs, o)
                .status()
                .code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(WaitOptimizer, RejectsBadInput) {
  OptimizerOptions o;
  EXPECT_EQ(OptimizeWait(WaitDistribution(), Costs(1, 1), o).status().code(),
            absl::StatusCode::kInvalidArgument);
  PlatformCosts bad = Costs(1, 1);
  bad.irq_cpu_ns = -1;
  EXPECT_EQ(OptimizeWait(WaitDistribution::FromSamples({5}), bad, o).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(WaitOptimizer, CompletionTimesBeyondExactDoublesStillFinish) {
  // Above 2^53 ns consecutive integers are no longer doubles; the
  // SLEEP_THEN_SPIN sweep must still move on (garbage in a CSV, say).
  const auto dist = WaitDistribution::FromSamples(
      {1000, uint64_t{1} << 54, (uint64_t{1} << 60) + 1, ~uint64_t{0}});
  OptimizerOptions o;
  auto r = OptimizeWait(dist, Costs(20, 30), o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->families[static_cast<int>(Strategy::kSleepThenSpin) - 1].feasible);
}

// Mixtures of lognormal modes, the shape of real completion times.
std::vector<uint64_t> RandomMixture(std::mt19937_64& rng, int n) {
  std::uniform_real_distribution<double> u(0, 1);
  const double m1 = std::exp(7 + 4 * u(rng)), m2 = std::exp(9 + 5 * u(rng));
  const double p = u(rng);
  std::lognormal_distribution<double> a(std::log(m1), 0.3), b(std::log(m2), 0.6);
  std::vector<uint64_t> x;
  for (int i = 0; i < n; ++i) x.push_back(static_cast<uint64_t>(u(rng) < p ? a(rng) : b(rng)));
  return x;
}

// Latency weights 0, 1, 10 in turn.
Objective ObjectiveOfTrial(int trial) {
  return {trial % 3 == 0 ? 0.0 : (trial % 3 == 1 ? 1.0 : 10.0), false};
}

// The cost the sweep reports is the chosen policy's cost by direct evaluation.
void ExpectCostOfTheChosenPolicy(const WaitDistribution& dist, const PlatformModel& model,
                                 const OptimizerResult& r) {
  const ExpectedCost direct = EvaluateWait(dist, r.params, model);
  EXPECT_NEAR(direct.cpu_ns, r.expected.cpu_ns, kSumTolerance * (1 + direct.cpu_ns));
  EXPECT_NEAR(direct.latency_ns, r.expected.latency_ns, kSumTolerance * (1 + direct.latency_ns));
}

TEST(WaitOptimizer, SweepMatchesDirectEvaluationAndBeatsEveryCandidate) {
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 30; ++trial) {
    const auto x = RandomMixture(rng, 2000);
    const auto dist = WaitDistribution::FromSamples(x);
    const PlatformCosts costs = Costs(5 + trial * 3, 10 + trial, 0.1, 2, 5 + trial);
    OptimizerOptions o;
    o.objective = ObjectiveOfTrial(trial);
    o.max_spin_ns = 10'000'000;
    auto r = OptimizeWait(dist, costs, o);
    ASSERT_TRUE(r.ok());
    ExpectCostOfTheChosenPolicy(dist, costs, *r);
    // No threshold anywhere (samples, midpoints, a fine grid) does better.
    std::vector<uint64_t> candidates = x;
    for (uint64_t t = 0; t < 3'000'000; t += 9973) candidates.push_back(t);
    for (uint64_t t : candidates) {
      if (t > o.max_spin_ns) continue;
      const double j = EvaluateWait(dist, WaitParams::SpinThenIrq(t), costs)
                           .Cost(o.objective.latency_weight);
      ASSERT_GE(j, r->cost_ns * (1 - kSumTolerance)) << "T=" << t;
      const double s = EvaluateWait(dist, WaitParams::SleepThenSpin(t, o.max_spin_ns), costs)
                           .Cost(o.objective.latency_weight);
      ASSERT_GE(s, r->cost_ns * (1 - kSumTolerance)) << "S=" << t;
    }
  }
}

// POLL_SLEEP's candidates are pruned by a lower bound against the other
// families' best. The pruned search must return what the full search does:
// the minimum over the other families (POLL_SLEEP disallowed) and over
// every POLL_SLEEP interval evaluated directly. Costs are drawn so that
// polling wins in part of the trials (cheap timers, an expensive wake-up).
TEST(WaitOptimizer, PollSleepPruningKeepsTheFullSearchOptimum) {
  std::mt19937_64 rng(11);
  int poll_won = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const auto x = RandomMixture(rng, 1500);
    const auto dist = WaitDistribution::FromSamples(x);
    const PlatformCosts costs =
        Costs(20 + trial, 100 + 20 * trial, 0.05, 0.2 + 0.05 * (trial % 7), 1 + trial % 5);
    OptimizerOptions o;
    o.objective = ObjectiveOfTrial(trial);
    o.max_spin_ns = 10'000'000;
    const double lambda = o.objective.latency_weight;
    auto pruned = OptimizeWait(dist, costs, o);
    ASSERT_TRUE(pruned.ok()) << pruned.status();
    OptimizerOptions others = o;
    others.Disallow(Strategy::kPollSleep);
    auto without_poll = OptimizeWait(dist, costs, others);
    ASSERT_TRUE(without_poll.ok());
    double full = without_poll->cost_ns;
    for (uint64_t interval : DefaultPollIntervalsNs()) {
      const ExpectedCost c = EvaluateWait(dist, WaitParams::PollSleep(interval), costs);
      full = std::min(full, c.Cost(lambda));
    }
    EXPECT_NEAR(pruned->cost_ns, full, full * 1e-9) << "trial " << trial;
    poll_won += pruned->params.strategy == Strategy::kPollSleep;
  }
  EXPECT_GT(poll_won, 0) << "no trial where polling wins: the pruning went untested";
}

TEST(WaitOptimizer, HistogramOptimumAgreesWithExactWithinBucketResolution) {
  // The histogram optimizer sees bucket midpoints; its policy, evaluated on
  // the raw samples, must cost within bucket resolution (1%) of the exact
  // optimum.
  std::mt19937_64 rng(9);
  for (int trial = 0; trial < 40; ++trial) {
    const auto x = RandomMixture(rng, 5000);
    LatencyHistogram h;
    for (auto v : x) h.Record(v);
    const auto exact_dist = WaitDistribution::FromSamples(x);
    const PlatformCosts costs = Costs(3 + trial, 5 + 2 * trial, 0.1, 2, 10);
    OptimizerOptions o;
    o.objective = {trial % 2 ? 1.0 : 10.0, false};
    o.max_spin_ns = 50'000'000;
    auto exact = OptimizeWait(exact_dist, costs, o);
    auto hist = OptimizeWait(WaitDistribution::FromHistogram(h), costs, o);
    ASSERT_TRUE(exact.ok() && hist.ok());
    const double j_hist_on_samples =
        EvaluateWait(exact_dist, hist->params, costs).Cost(o.objective.latency_weight);
    EXPECT_LE(j_hist_on_samples, exact->cost_ns * 1.01) << "trial " << trial;
    EXPECT_NEAR(hist->cost_ns, exact->cost_ns, exact->cost_ns * 0.01);
  }
}

// A measured timer oversleep: `counts[v]` samples of v ns each.
PlatformModel WithTimerOversleep(const PlatformCosts& declared,
                                 std::vector<std::pair<uint64_t, uint64_t>> counts) {
  MeasuredCosts m;
  for (const auto& [value, count] : counts) m.timer_wake.Record(value, count);
  return PlatformModel::Measured(declared, m);
}

TEST(WaitOptimizer, SleepThenSpinOptimumIsExactOverTheOversleepDistribution) {
  // X = 100 ns always; oversleep tw = 10 ns w.p. 0.75, 50 ns w.p. 0.25 (mean
  // 20); timer_cpu 5, irq_cpu 40, irq_wake 20, lambda 1, spin bound 1 ms.
  // SLEEP_THEN_SPIN(S), D = S + tw: spin X - D when D < X, else wait to D.
  //   S <= 50      : cpu .75 (95 - S) + .25 (55 - S), latency 100: J = 185 - S
  //   50 <= S <= 90: cpu .75 (95 - S) + .25 * 5, latency .75 * 100
  //                  + .25 (S + 50):                               J = 160 - S/2
  //   S >= 90      : cpu 5, latency .75 (S + 10) + .25 (S + 50):   J = S + 25
  // so S = 90 (the sleep that reaches X under the short oversleep), J = 115:
  // cpu 5, latency 110. The mean oversleep alone would choose S = 80 (J 105
  // predicted), which truly costs cpu .75 * 15 + .25 * 5 = 12.5, latency
  // .75 * 100 + .25 * 130 = 107.5: J = 120. IRQ (160), SPIN (200) and
  // POLL_SLEEP (>= 1 us of latency) lose.
  const PlatformCosts declared = Costs(0.040, 0.020, 0.001, 0.005, 0.020);
  const PlatformModel measured = WithTimerOversleep(declared, {{10, 3}, {50, 1}});
  OptimizerOptions o;
  const auto dist = WaitDistribution::FromSamples(Repeat(100, 10));
  auto r = OptimizeWait(dist, measured, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->params, WaitParams::SleepThenSpin(90, o.max_spin_ns));
  EXPECT_NEAR(r->expected.cpu_ns, 5, kSumTolerance);
  EXPECT_NEAR(r->expected.latency_ns, 110, kSumTolerance);
  auto constant = OptimizeWait(dist, declared, o);
  ASSERT_TRUE(constant.ok());
  EXPECT_EQ(constant->params, WaitParams::SleepThenSpin(80, o.max_spin_ns));
  EXPECT_NEAR(constant->cost_ns, 105, kSumTolerance);
  EXPECT_NEAR(EvaluateWait(dist, constant->params, measured).Cost(1), 120, kSumTolerance);
}

TEST(WaitOptimizer, PollSleepIntervalIsPricedOverTheOversleepDistribution) {
  // X = 2300 ns; oversleep 100 or 200 ns, one half each; poll_read 1,
  // timer_cpu 5, lambda 1; POLL_SLEEP only. One oversleep per request, k =
  // ceil(X / (I + tw)), latency k (I + tw):
  //   I = 1 us: k = 3 or 2: cpu 2.5 * 6 = 15, latency (3300 + 2400) / 2
  //             = 2850: J = 2865
  //   I = 2 us: k = 2, 2:   cpu 12, latency (4200 + 4400) / 2 = 4300
  //   I = 5 us: k = 1, 1:   cpu 6,  latency 5150
  // and longer intervals only add latency: I = 1 us, J = 2865. The mean
  // oversleep (150) alone would price I = 1 us at k = 2: J = 12 + 2300.
  const PlatformCosts declared = Costs(0.040, 0.020, 0.001, 0.005, 0.150);
  OptimizerOptions o;
  for (Strategy s : {Strategy::kIrq, Strategy::kSpin, Strategy::kSpinThenIrq,
                     Strategy::kSleepThenSpin}) {
    o.Disallow(s);
  }
  const auto dist = WaitDistribution::FromSamples(Repeat(2300, 10));
  auto r = OptimizeWait(dist, WithTimerOversleep(declared, {{100, 1}, {200, 1}}), o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->params, WaitParams::PollSleep(1000));
  EXPECT_NEAR(r->expected.cpu_ns, 15, kSumTolerance);
  EXPECT_NEAR(r->expected.latency_ns, 2850, kSumTolerance);
  auto constant = OptimizeWait(dist, declared, o);
  ASSERT_TRUE(constant.ok());
  EXPECT_NEAR(constant->cost_ns, 2312, kSumTolerance);
}

TEST(WaitOptimizer, SweepIsExactOverOversleepDistributions) {
  // Random completion mixtures and random oversleep distributions of several
  // atoms: the reported cost is the chosen policy's cost by direct
  // convolution, and no sleep S (every X - tw and X - bound - tw, and a
  // grid) nor threshold T does better.
  std::mt19937_64 rng(21);
  for (int trial = 0; trial < 9; ++trial) {
    const auto x = RandomMixture(rng, 120);
    const auto dist = WaitDistribution::FromSamples(x);
    MeasuredCosts m;
    std::lognormal_distribution<double> oversleep(std::log(2000.0 + 3000 * trial), 0.8);
    for (int k = 0; k < 25; ++k) m.timer_wake.Record(static_cast<uint64_t>(oversleep(rng)));
    const PlatformModel model =
        PlatformModel::Measured(Costs(5 + trial * 3, 10 + trial, 0.1, 2, 5), m);
    ASSERT_GT(model.timer_wake().size(), 10u);
    OptimizerOptions o;
    o.objective = ObjectiveOfTrial(trial);
    o.max_spin_ns = 200'000;
    auto r = OptimizeWait(dist, model, o);
    ASSERT_TRUE(r.ok());
    ExpectCostOfTheChosenPolicy(dist, model, *r);
    const auto& sleep = r->families[static_cast<int>(Strategy::kSleepThenSpin) - 1];
    ASSERT_TRUE(sleep.feasible);
    const double lambda = o.objective.latency_weight;
    std::vector<double> sleeps;
    for (uint64_t t = 0; t < 2'000'000; t += 7919) sleeps.push_back(static_cast<double>(t));
    for (const auto& p : dist.points()) {
      for (const CostAtom& a : model.timer_wake()) {
        for (double s : {p.value_ns - a.value_ns, p.value_ns - a.value_ns - 200'000.0}) {
          if (s >= 0) sleeps.push_back(std::ceil(s));
        }
      }
    }
    for (double s : sleeps) {
      const double j =
          EvaluateWait(dist, WaitParams::SleepThenSpin(static_cast<uint64_t>(s), o.max_spin_ns),
                       model)
              .Cost(lambda);
      ASSERT_GE(j, sleep.cost_ns * (1 - kSumTolerance)) << "trial " << trial << " S=" << s;
    }
    for (uint64_t t : x) {
      if (t > o.max_spin_ns) continue;
      const double j = EvaluateWait(dist, WaitParams::SpinThenIrq(t), model).Cost(lambda);
      ASSERT_GE(j, r->cost_ns * (1 - kSumTolerance)) << "T=" << t;
    }
  }
}

}  // namespace
}  // namespace spintune

namespace spintune {
namespace {

TEST(PollsUntil, EqualsCeilingOfTheQuotient) {
  std::mt19937_64 rng(17);
  for (int i = 0; i < 1'000'000; ++i) {
    const double x = static_cast<double>(rng() % 4'000'000'000'000ull);
    const double p = static_cast<double>(1 + rng() % 100'000'000);
    ASSERT_EQ(PollsUntil(x, p, 1.0 / p), std::ceil(x / p)) << x << " / " << p;
  }
  // Exact multiples and zero.
  EXPECT_EQ(PollsUntil(0, 7, 1.0 / 7), 0);
  EXPECT_EQ(PollsUntil(21, 7, 1.0 / 7), 3);
  EXPECT_EQ(PollsUntil(22, 7, 1.0 / 7), 4);
}

}  // namespace
}  // namespace spintune
