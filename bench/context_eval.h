// The context suite of spintune-bench (issue 16): per key, a table fitted
// with context leaves (models/context_tree.h) against the fixed fit, the
// best static policy in hindsight and the clairvoyant, on commands that
// come after the ones it was fitted on.
//
//   structured streams: the Markov-modulated simulated boards (the "-gc"
//     boards: garbage collection in episodes, slower reads right after a
//     write) and the replayed stream of this machine's disk under an
//     fsync-heavy load (tests/fixtures/context/);
//   i.i.d. streams: every stationary scenario of the main suite
//     (scenarios.h), its requests issued one at a time 50 us (exponential
//     mean) after the previous one completed, so the context varies but
//     tells nothing.
//
// Every key: its samples in issue order, the first `train` fit, the rest
// is evaluated. Both tables are fitted as `spintune tune` fits (histograms,
// OptimizeWait(); the contextual one through FitContextTree()).
#ifndef SPINTUNE_BENCH_CONTEXT_EVAL_H_
#define SPINTUNE_BENCH_CONTEXT_EVAL_H_

#include <cmath>
#include <string>
#include <vector>

#include "models/context_tree.h"
#include "models/platform_model.h"
#include "nlohmann/json.hpp"

namespace spintune {

struct ContextScenario {
  std::string name;    // "markov/litex-rocket-100mhz-fastcard-gc/op25/4KiB/l1"
  std::string stream;  // "markov/litex-rocket-100mhz-fastcard-gc", "replay/vda-fsync", "iid"
  bool structured = false;
  PlatformCosts costs;
  double lambda = 1;  // 0: the cpu objective
  size_t train = 0;   // the first `train` samples fit
  std::vector<ContextSample> samples;
  // The simulator's hidden state per sample (1: a garbage-collection
  // episode), for the state oracle; empty where unknown (replay, i.i.d.).
  std::vector<uint8_t> busy;
};

struct ContextResult {
  std::string name;
  std::string stream;
  bool structured = false;
  double lambda = 1;
  size_t train = 0, test = 0;
  int leaves = 1;
  std::string tree;  // the leaves' conditions, for humans
  // Mean J per request on the evaluated part.
  double fixed_j = 0;        // spintune's fit without context
  double context_j = 0;      // with context leaves
  double best_static_j = 0;  // the best single wait in hindsight
  double clairvoyant_j = 0;
  // Upper bounds of what context leaves could reach on the evaluated part,
  // fitted on that part itself (in sample, no held-out test, no penalty):
  // a tree over the same four features (depth <= 3), and (Markov boards
  // only, else NaN) such a tree for each value of the simulator's hidden
  // busy state, which no driver sees.
  double oracle_j = std::nan("");
  double state_oracle_j = std::nan("");
  // Latency weight 0 (the cpu objective): whether the mean latency stays
  // within the IRQ path's (+1%: the evaluated part is not the fitted one).
  bool fixed_feasible = true;
  bool context_feasible = true;
  // (best static - context) / (best static - clairvoyant); 0 when there is
  // no gap.
  double GapClosed() const;
  // The same for oracle_j and state_oracle_j (NaN when not computed).
  double OracleGapClosed() const;
  double StateOracleGapClosed() const;
};

struct ContextSuiteOptions {
  bool iid = true;         // the stationary scenarios of the main suite
  bool markov = true;      // the -gc boards
  std::string replay_dir;  // the replayed stream's fixture directory ("": none)
  std::string filter;      // keep scenarios whose name contains this
};

// NotFound/InvalidArgument when the replay fixture cannot be read.
absl::StatusOr<std::vector<ContextScenario>> BuildContextScenarios(
    const ContextSuiteOptions& options);
// `oracles`: also the in-sample upper bounds (ORACLE, STATE ORACLE; about
// 10 s over the suite), else they are NaN.
ContextResult RunContextScenario(const ContextScenario& scenario, bool oracles = true);

// The acceptance rules (issue 16):
//  - each structured stream (all of its keys' requests together, per
//    latency weight) closes >= 30% of the best static -> clairvoyant gap;
//  - i.i.d.: context J <= 1.005 x fixed J on every scenario (and within
//    the latency cap of the cpu objective wherever the fixed fit is), and
//    one leaf on >= 95% of them.
struct ContextCheck {
  std::string what;
  bool ok = true;
};
std::vector<ContextCheck> CheckContextResults(const std::vector<ContextResult>& results);

std::string RenderContextResults(const std::vector<ContextResult>& results);
nlohmann::json ContextResultsToJson(const std::vector<ContextResult>& results);

}  // namespace spintune

#endif  // SPINTUNE_BENCH_CONTEXT_EVAL_H_
