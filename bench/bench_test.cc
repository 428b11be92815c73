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
  ASSERT_EQ(results.size(), suite.size());
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
  const auto results = EvaluateColdStart(20000);
  ASSERT_FALSE(results.empty());
  int predicted = 0;
  for (const auto& r : results) {
    if (r.keys == 0) {
      EXPECT_EQ(r.donor_boards, 0) << r.board;
      continue;
    }
    ++predicted;
    EXPECT_LE(r.j_ratio, 1.05) << r.board;
    EXPECT_GE(r.j_ratio, 1.0 - 1e-9) << r.board << " beat the table fitted on its own samples";
  }
  EXPECT_GE(predicted, 2) << "boards with a prediction: the check must not pass vacuously";
}

}  // namespace
}  // namespace spintune

#include "bench/context_eval.h"

namespace spintune {
namespace {

// Issue 16 on the context suite (about 2 s): on the i.i.d. streams the
// contextual fit is never worse than the fixed one by more than 0.5%, stays
// within the cpu objective's latency cap wherever the fixed fit does, and
// keeps one leaf on >= 95% of them; on the Markov-modulated boards at
// latency weight 1 it closes >= 30% of the best static -> clairvoyant gap;
// on the replayed disk stream it is never worse than the fixed fit by more
// than 0.5% on any key. (docs/benchmarks.md has every figure, the streams
// where the 30% is not reached included.)
TEST(Benchmark, ContextSuite) {
  ContextSuiteOptions options;
  options.replay_dir = SPINTUNE_CONTEXT_FIXTURE_DIR;
  auto suite = BuildContextScenarios(options);
  ASSERT_TRUE(suite.ok()) << suite.status();
  std::vector<ContextResult> results;
  for (const auto& s : *suite) results.push_back(RunContextScenario(s, /*oracles=*/false));
  size_t markov = 0, replay = 0;
  for (const auto& r : results) {
    markov += r.stream.rfind("markov/", 0) == 0;
    replay += r.stream.rfind("replay/", 0) == 0;
    if (r.stream.rfind("replay/", 0) == 0) {
      EXPECT_LE(r.context_j, 1.005 * r.fixed_j) << r.name;
    }
  }
  EXPECT_GE(markov, 8u);
  EXPECT_GE(replay, 4u);
  for (const auto& c : CheckContextResults(results)) {
    const bool iid = c.what.rfind("i.i.d.", 0) == 0;
    const bool markov_l1 = c.what.rfind("markov/", 0) == 0 &&
                           c.what.find("(latency weight 1,") != std::string::npos;
    if (iid || markov_l1) {
      EXPECT_TRUE(c.ok) << c.what;
    }
  }
}

}  // namespace
}  // namespace spintune
