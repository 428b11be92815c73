// Runs one scenario: spintune (fitted on the first part of the stream,
// evaluated on the rest; for shifting streams also online), every peer
// online over the stream in order, and the references (best static policy
// in hindsight, clairvoyant).
#ifndef SPINTUNE_BENCH_BENCH_RUNNER_H_
#define SPINTUNE_BENCH_BENCH_RUNNER_H_

#include <string>
#include <vector>

#include "bench/scenarios.h"

namespace spintune {

struct RunOptions {
  size_t train_samples = 5000;
  uint64_t max_spin_ns = 10'000'000;  // the driver header's cap
  std::vector<size_t> learning_grid = {50, 100, 200, 500, 1000, 2000, 5000};
};

struct PolicyResult {
  std::string name;
  bool adaptive = false;
  double j_ns = 0;
  double cpu_ns = 0;
  double latency_ns = 0;
  bool feasible = true;          // lambda 0: mean latency within the IRQ path's
  bool within_spin_cap = true;   // no busy-wait longer than max_spin_ns
  double vs_best_static = 0;     // J / J(best static in hindsight)
  double vs_clairvoyant = 0;     // J / J(clairvoyant)
  long samples_to_2pct = -2;     // -1: never; -2: not applicable
};

struct ScenarioResult {
  std::string name;
  std::string family;
  double lambda = 1;
  bool shifting = false;
  double best_static_j = 0;
  std::string best_static;  // description of the best static policy
  double clairvoyant_j = 0;
  std::string spintune_choice;
  std::vector<PolicyResult> policies;  // spintune first, then spintune-online, then peers

  const PolicyResult* Find(const std::string& policy) const;
  // The policy that stands for spintune: online on shifting streams.
  const PolicyResult& Spintune() const;
};

ScenarioResult RunScenario(const Scenario& scenario, const RunOptions& options);

// The scenario's completion times, whole ns, seeded by its name: the stream
// RunScenario() evaluates.
std::vector<double> GenerateStream(const Scenario& scenario);

}  // namespace spintune

#endif  // SPINTUNE_BENCH_BENCH_RUNNER_H_
