#include "bench/bench_runner.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <random>

#include "cli/table_format.h"
#include "bench/online_tuner.h"
#include "bench/peer_policies.h"
#include "bench/references.h"
#include "models/wait_optimizer.h"

namespace spintune {
namespace {

// Relative slack on the latency cap for the cpu objective: the evaluated part
// is a different sample from the fitted one.
constexpr double kCapSlack = 0.01;

struct Stream {
  std::vector<double> x;
  std::vector<size_t> segment_end;  // exclusive end of each segment
};

Stream Generate(const Scenario& s) {
  std::mt19937_64 rng(std::hash<std::string>()(s.name));
  Stream out;
  for (const auto& seg : s.segments) {
    // Whole ns, as a driver measures them, so every policy and reference
    // sees the same values.
    for (size_t i = 0; i < seg.length; ++i) {
      out.x.push_back(std::max(1.0, std::round(seg.draw(rng))));
    }
    out.segment_end.push_back(out.x.size());
  }
  return out;
}

std::vector<uint64_t> AsInts(const std::vector<double>& x, size_t from, size_t to) {
  std::vector<uint64_t> v;
  for (size_t i = from; i < to; ++i) v.push_back(static_cast<uint64_t>(x[i]));
  return v;
}

OptimizerOptions Options(const Scenario& s, const RunOptions& r) {
  OptimizerOptions o;
  o.objective = s.lambda == 0 ? Objective::Cpu() : Objective{s.lambda, false};
  o.max_spin_ns = r.max_spin_ns;
  return o;
}

double J(const ExpectedCost& e, double lambda) { return e.Cost(lambda); }

// Per-request costs of an online policy over the whole stream; the longest
// busy-wait from `from` on goes to *longest_spin_ns.
std::vector<RequestCost> RunOnline(OnlinePolicy* p, const Scenario& s, const Stream& st,
                                   size_t from, double* longest_spin_ns) {
  std::vector<RequestCost> costs;
  costs.reserve(st.x.size());
  double now = 0;
  *longest_spin_ns = 0;
  for (size_t i = 0; i < st.x.size(); ++i) {
    const double x = st.x[i];
    const WaitParams w = p->Decide(s.opcode, s.bytes);
    const RequestCost c = CostOfRequest(x, w, s.costs);
    if (i >= from) *longest_spin_ns = std::max(*longest_spin_ns, BusyWaitNs(x, w, s.costs));
    now += c.latency_ns;
    p->Observe(x, w, c, now);
    costs.push_back(c);
  }
  return costs;
}

ExpectedCost MeanOf(const std::vector<RequestCost>& c, size_t from, size_t to) {
  ExpectedCost e;
  for (size_t i = from; i < to; ++i) {
    e.cpu_ns += c[i].cpu_ns;
    e.latency_ns += c[i].latency_ns;
  }
  const double n = static_cast<double>(to - from);
  e.cpu_ns /= n;
  e.latency_ns /= n;
  return e;
}

double MeanX(const Stream& st, size_t from, size_t to) {
  double sum = 0;
  for (size_t i = from; i < to; ++i) sum += st.x[i];
  return sum / static_cast<double>(to - from);
}

}  // namespace

std::vector<double> GenerateStream(const Scenario& scenario) { return Generate(scenario).x; }

const PolicyResult* ScenarioResult::Find(const std::string& policy) const {
  for (const auto& p : policies) {
    if (p.name == policy) return &p;
  }
  return nullptr;
}

const PolicyResult& ScenarioResult::Spintune() const {
  return *Find(shifting ? "spintune-online" : "spintune");
}

ScenarioResult RunScenario(const Scenario& s, const RunOptions& r) {
  const Stream st = Generate(s);
  const size_t n = st.x.size();
  const OptimizerOptions options = Options(s, r);
  const double lambda = s.lambda;
  ScenarioResult out;
  out.name = s.name;
  out.family = s.family;
  out.lambda = lambda;
  out.shifting = s.shifting();

  // The evaluated part and the reference on it.
  const size_t train = std::min(r.train_samples, st.segment_end[0] / 2);
  const size_t eval_from = out.shifting ? 0 : train;
  double best = 0;
  size_t seg_from = 0;
  for (size_t k = 0; k < st.segment_end.size(); ++k) {
    const size_t from = out.shifting ? seg_from : eval_from;
    const size_t to = st.segment_end[k];
    auto fit = OptimizeWait(WaitDistribution::FromSamples(AsInts(st.x, from, to)), s.costs,
                            options);
    if (fit.ok()) {
      best += fit->cost_ns * static_cast<double>(to - from);
      out.best_static += (k ? " | " : "") + DescribeWait(fit->params);
    }
    seg_from = to;
  }
  out.best_static_j = best / static_cast<double>(n - eval_from);
  double clair = 0;
  for (size_t i = eval_from; i < n; ++i) clair += ClairvoyantCost(st.x[i], s.costs, lambda);
  out.clairvoyant_j = clair / static_cast<double>(n - eval_from);
  const double latency_cap = (MeanX(st, eval_from, n) + s.costs.irq_wake_ns) * (1 + kCapSlack);

  auto finish = [&](PolicyResult p, const ExpectedCost& e, double longest_spin_ns) {
    p.within_spin_cap = longest_spin_ns <= static_cast<double>(r.max_spin_ns);
    p.cpu_ns = e.cpu_ns;
    p.latency_ns = e.latency_ns;
    p.j_ns = J(e, lambda);
    p.feasible = lambda > 0 || e.latency_ns <= latency_cap;
    p.vs_best_static = p.j_ns / out.best_static_j;
    p.vs_clairvoyant = p.j_ns / out.clairvoyant_j;
    out.policies.push_back(std::move(p));
  };

  // spintune as the tuner runs it: a histogram of the training part.
  auto fit_on = [&](size_t count) {
    LatencyHistogram h;
    for (size_t i = 0; i < count; ++i) h.Record(static_cast<uint64_t>(st.x[i]));
    return OptimizeWait(WaitDistribution::FromHistogram(h), s.costs, options);
  };
  double static_spin = 0;
  auto evaluate_static = [&](const WaitParams& w) {
    ExpectedCost e;
    static_spin = 0;
    for (size_t i = eval_from; i < n; ++i) {
      static_spin = std::max(static_spin, BusyWaitNs(st.x[i], w, s.costs));
      const RequestCost c = CostOfRequest(st.x[i], w, s.costs);
      e.cpu_ns += c.cpu_ns;
      e.latency_ns += c.latency_ns;
    }
    e.cpu_ns /= static_cast<double>(n - eval_from);
    e.latency_ns /= static_cast<double>(n - eval_from);
    return e;
  };
  {
    auto fit = fit_on(train);
    PolicyResult p;
    p.name = "spintune";
    const WaitParams w = fit.ok() ? fit->params : WaitParams::Irq();
    out.spintune_choice = DescribeWait(w);
    if (!out.shifting) {
      p.samples_to_2pct = -1;
      for (size_t count : r.learning_grid) {
        if (count > train) break;
        auto small = fit_on(count);
        if (small.ok() &&
            J(evaluate_static(small->params), lambda) <= 1.02 * out.best_static_j) {
          p.samples_to_2pct = static_cast<long>(count);
          break;
        }
      }
    }
    const ExpectedCost e = evaluate_static(w);
    finish(std::move(p), e, static_spin);
  }

  // spintune online, then every peer, over the stream in order.
  std::vector<std::unique_ptr<OnlinePolicy>> online;
  OnlineTunerOptions tuner_options;
  tuner_options.optimizer = options;
  online.push_back(std::make_unique<OnlineTuner>(s.costs, tuner_options));
  for (auto& p : MakePeerPolicies({s.costs, lambda, std::hash<std::string>()(s.name) ^ 1}))
    online.push_back(std::move(p));
  for (auto& policy : online) {
    double longest_spin = 0;
    const std::vector<RequestCost> costs = RunOnline(policy.get(), s, st, eval_from, &longest_spin);
    PolicyResult p;
    p.name = policy->name();
    p.adaptive = policy->adaptive();
    if (p.adaptive && !out.shifting) {
      // First stream position from which the next test-length stretch is
      // within 2% of the best static policy.
      p.samples_to_2pct = -1;
      const size_t span = n - train;
      for (size_t at : r.learning_grid) {
        if (at + span > n) break;
        if (J(MeanOf(costs, at, at + span), lambda) <= 1.02 * out.best_static_j) {
          p.samples_to_2pct = static_cast<long>(at);
          break;
        }
      }
    }
    finish(std::move(p), MeanOf(costs, eval_from, n), longest_spin);
  }
  return out;
}

}  // namespace spintune
