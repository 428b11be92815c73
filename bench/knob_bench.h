// `spintune-bench --knobs`: the ahci_sunxi knob experiment (issue 13) on
// every simulated board of agent/knobs/ahci_sunxi_sim.h, one per leftover
// TXTS/RXTS start value of field report 003. Each run is the real thing
// minus the network: the agent's KnobController on the simulated board,
// the tuner's ExperimentRunner with an in-memory store, messages handed
// across directly.
//
// Thread-compatible.
#ifndef SPINTUNE_BENCH_KNOB_BENCH_H_
#define SPINTUNE_BENCH_KNOB_BENCH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace spintune {

struct KnobBenchRun {
  std::string board;
  std::string start;  // "TXTS=5,RXTS=6"
  std::string found;  // the setting the board was left on
  // Expected (noise-free) write MB/s of `found` and of the best setting, at
  // the experiment's block size.
  double found_mbps = 0;
  double best_mbps = 0;
  double share_of_best = 0;
  uint64_t trials = 0;
  std::string verdict;
  std::string statement;
};

// One run per simulated board; `seed` drives the boards' noise and the
// trial order.
absl::StatusOr<std::vector<KnobBenchRun>> RunKnobBench(uint64_t seed);
// {"seed": N, "exhaustive_trials": 256, "runs": [{"start", "found",
// "share_of_best", "trials", ...}]}
nlohmann::json KnobBenchToJson(uint64_t seed, const std::vector<KnobBenchRun>& runs);
std::string RenderKnobBench(const std::vector<KnobBenchRun>& runs);

}  // namespace spintune

#endif  // SPINTUNE_BENCH_KNOB_BENCH_H_
