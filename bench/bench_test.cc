// The benchmark's acceptance rules over the whole scenario suite (issue 3):
// stationary spintune within 2% of the best static policy in hindsight with
// 5,000 training samples, shifting streams within 5% of the per-segment best
// static policy (online), and no peer that keeps the same caps beating
// spintune by more than 0.5%.
#include "bench/bench_report.h"
#include "gtest/gtest.h"

namespace spintune {
namespace {

TEST(Benchmark, WholeSuitePassesItsChecks) {
  const auto suite = BuildScenarios(ScenarioOptions());
  ASSERT_GT(suite.size(), 150u);
  std::vector<ScenarioResult> results;
  for (const auto& s : suite) results.push_back(RunScenario(s, RunOptions()));
  const auto violations = CheckResults(results);
  for (const auto& v : violations) ADD_FAILURE() << v.scenario << ": " << v.what;
  // And the references are consistent: nobody beats the clairvoyant.
  for (const auto& r : results) {
    EXPECT_LE(r.clairvoyant_j, r.best_static_j * (1 + 1e-9)) << r.name;
  }
}

}  // namespace
}  // namespace spintune

#include "bench/cold_start_eval.h"

namespace spintune {
namespace {

TEST(Benchmark, ColdStartPredictionsAreCloseOnHeldBackBoards) {
  // Boards whose card is also on boards at another clock: the predicted table
  // costs at most 5% more than the fitted one on the board's own samples.
  for (const auto& r : EvaluateColdStart(20000)) {
    if (r.keys == 0) {
      EXPECT_EQ(r.donor_boards, 0) << r.board;
      continue;
    }
    EXPECT_LE(r.j_ratio, 1.05) << r.board;
    EXPECT_GE(r.j_ratio, 1.0 - 1e-9) << r.board << " beat the table fitted on its own samples";
  }
}

}  // namespace
}  // namespace spintune
