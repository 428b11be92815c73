// The benchmark's scenario suite: every simulated board x key, and synthetic
// families (deterministic, uniform, exponential, lognormal, bimodal, Pareto,
// shifting), each under several platform costs and latency weights.
#ifndef SPINTUNE_BENCH_SCENARIOS_H_
#define SPINTUNE_BENCH_SCENARIOS_H_

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "models/cost_model.h"

namespace spintune {

using Sampler = std::function<double(std::mt19937_64&)>;

// A stretch of the stream with one distribution.
struct Segment {
  std::string label;
  Sampler draw;
  size_t length = 0;
};

struct Scenario {
  std::string name;    // "board/litex-rocket-50mhz-slowcard/op18/4KiB"
  std::string family;  // "board", "exponential", ..., "shift"
  uint32_t opcode = 0;
  uint64_t bytes = 0;
  PlatformCosts costs;
  std::string costs_label;  // "B=50us" or the board name
  double lambda = 1;        // 0 means the "cpu" objective (latency capped)
  std::vector<Segment> segments;
  bool shifting() const { return segments.size() > 1; }
};

struct ScenarioOptions {
  size_t train_samples = 5000;  // stationary: fit on these ...
  size_t test_samples = 20000;  // ... evaluate on these
  size_t segment_samples = 20000;  // shifting: length of each segment
  bool boards = true;
  bool synthetic = true;
  std::vector<double> lambdas = {0, 1, 10};
  std::string filter;  // keep scenarios whose name contains this
};

std::vector<Scenario> BuildScenarios(const ScenarioOptions& options);

}  // namespace spintune

#endif  // SPINTUNE_BENCH_SCENARIOS_H_
