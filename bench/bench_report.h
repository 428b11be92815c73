// Tables and checks over the benchmark's results.
#ifndef SPINTUNE_BENCH_BENCH_REPORT_H_
#define SPINTUNE_BENCH_BENCH_REPORT_H_

#include <string>
#include <vector>

#include "bench/bench_runner.h"
#include "nlohmann/json.hpp"

namespace spintune {

// The acceptance rules of the benchmark (issue 3):
//  - stationary: spintune J <= 1.02 x best static in hindsight;
//  - shifting: spintune online J <= 1.05 x the per-segment best static;
//  - no feasible peer beats spintune by more than 0.5%.
struct Violation {
  std::string scenario;
  std::string what;
};
std::vector<Violation> CheckResults(const std::vector<ScenarioResult>& results);

std::string RenderResults(const std::vector<ScenarioResult>& results);
nlohmann::json ResultsToJson(const std::vector<ScenarioResult>& results);

}  // namespace spintune

#endif  // SPINTUNE_BENCH_BENCH_REPORT_H_
