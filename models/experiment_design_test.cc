#include "models/experiment_design.h"

#include <cmath>
#include <functional>
#include <random>

#include "gtest/gtest.h"

namespace spintune {
namespace {

using Landscape = std::function<double(const KnobSetting&)>;  // <= 0: fails a constraint

KnobSpace TwoFields() {
  KnobSpace space;
  for (const char* name : {"REG.A", "REG.B"}) {
    KnobCoordinate c;
    c.name = name;
    c.register_name = "REG";
    for (int v = 0; v < 16; ++v) c.values.push_back(v);
    space.coordinates.push_back(c);
  }
  return space;
}

// A peak at (3, 3): 100 there, falling off fast along A and slowly along B.
double Peak(const KnobSetting& s) {
  return 100.0 / (1 + 0.25 * std::abs(s[0] - 3)) * (1 - 0.01 * std::abs(s[1] - 3));
}

struct DesignRun {
  ExperimentConclusion conclusion;
  std::vector<TrialOutcome> outcomes;
};

DesignRun RunDesign(const KnobSpace& space, const KnobSetting& start, const Landscape& truth,
              double sigma, uint64_t seed, ExperimentDesignOptions options = {},
              bool lower_is_better = false) {
  options.seed = seed;
  ExperimentDesign design(space, start, options, lower_is_better);
  std::mt19937_64 rng(seed * 7919);
  std::normal_distribution<double> noise(0, sigma);
  DesignRun run;
  while (true) {
    auto step = design.Next();
    if (auto* c = std::get_if<ExperimentConclusion>(&step)) {
      run.conclusion = *c;
      return run;
    }
    const KnobSetting s = std::get<PlannedTrial>(step).setting;
    const double v = truth(s);
    TrialOutcome o{s, v > 0 ? v * std::exp(noise(rng)) : 1, v > 0};
    run.outcomes.push_back(o);
    design.Record(o);
  }
}

TEST(ExperimentDesign, CoordinateSearchFindsThePeakFromEveryStart) {
  for (const KnobSetting& start : {KnobSetting{5, 6}, KnobSetting{4, 4}, KnobSetting{0, 0}}) {
    for (uint64_t seed = 1; seed <= 5; ++seed) {
      const DesignRun r = RunDesign(TwoFields(), start, Peak, 0.01, seed);
      const ExperimentConclusion& c = r.conclusion;
      SCOPED_TRACE(TwoFields().Format(start) + " seed " + std::to_string(seed));
      EXPECT_EQ(c.verdict, Verdict::kBetter);
      EXPECT_GE(Peak(c.apply), 0.95 * Peak({3, 3}));
      EXPECT_LT(c.trials, 128u) << "an exhaustive search takes 256";
      EXPECT_EQ(c.trials, r.outcomes.size());
      // The interval is about the real ratio.
      const double truth = Peak(c.best) / Peak(start);
      EXPECT_LE(c.comparison.low, truth * 1.01);
      EXPECT_GE(c.comparison.high, truth / 1.01);
    }
  }
}

TEST(ExperimentDesign, NoEffectIsReportedAsNoSignificantDifference) {
  // Every setting is the same: a "better" verdict would be a false
  // positive; at 95% at most a few of 40 may happen.
  int false_positives = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    const DesignRun r = RunDesign(TwoFields(), {5, 6}, [](const KnobSetting&) { return 50.0; }, 0.02,
                            seed);
    EXPECT_LE(r.conclusion.trials, ExperimentDesignOptions{}.max_trials);
    if (r.conclusion.verdict == Verdict::kBetter) ++false_positives;
    if (r.conclusion.verdict != Verdict::kBetter) {
      EXPECT_EQ(r.conclusion.apply, (KnobSetting{5, 6}));
    }
  }
  EXPECT_LE(false_positives, 4);
}

TEST(ExperimentDesign, AStartTrialFailingInTheConfirmationIsNoEvidenceForTheBest) {
  // Every confirmation trial of the start fails (a write refused, say):
  // without the start measured there is no verdict for the other setting.
  KnobSpace space;
  KnobCoordinate c;
  c.name = "depth";
  c.values = {1, 2};
  space.coordinates = {c};
  ExperimentDesign design(space, {1}, ExperimentDesignOptions{}, false);
  std::mt19937_64 rng(4);
  std::normal_distribution<double> noise(0, 0.01);
  while (true) {
    auto step = design.Next();
    if (auto* done = std::get_if<ExperimentConclusion>(&step)) {
      EXPECT_EQ(done->best, (KnobSetting{2}));
      EXPECT_EQ(done->verdict, Verdict::kNoSignificantDifference) << done->reason;
      EXPECT_EQ(done->apply, (KnobSetting{1}));
      break;
    }
    const PlannedTrial p = std::get<PlannedTrial>(step);
    // Setting 2 is 10% better: it goes to the confirmation.
    const double v = (p.setting[0] == 2 ? 110 : 100) * std::exp(noise(rng));
    const bool start_in_confirmation = p.phase == TrialPhase::kConfirm && p.setting[0] == 1;
    design.Record({p.setting, v, !start_in_confirmation});
  }
}

TEST(ExperimentDesign, SettingsThatFailTheirConstraintsAreNeverChosen) {
  // Values of A above 9 would be twice as fast but fail (DMA errors).
  auto truth = [](const KnobSetting& s) { return s[0] > 9 ? -1.0 : (s[0] > 7 ? 200.0 : Peak(s)); };
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    const DesignRun r = RunDesign(TwoFields(), {0, 0}, truth, 0.01, seed);
    EXPECT_LE(r.conclusion.apply[0], 9);
    EXPECT_GT(r.conclusion.apply[0], 7) << "the best feasible values are 8 and 9";
    for (const auto& o : r.outcomes) {
      if (o.setting[0] > 9) {
        EXPECT_FALSE(o.feasible);
      }
    }
  }
}

TEST(ExperimentDesign, LowerIsBetterMetricsAreMinimised) {
  // p99 latency: the inverse of the peak.
  auto latency = [](const KnobSetting& s) { return 1e6 / Peak(s); };
  const DesignRun r = RunDesign(TwoFields(), {0, 0}, latency, 0.01, 3, {}, /*lower_is_better=*/true);
  EXPECT_EQ(r.conclusion.verdict, Verdict::kBetter);
  EXPECT_GE(Peak(r.conclusion.apply), 0.95 * Peak({3, 3}));
  EXPECT_NEAR(r.conclusion.comparison.ratio, Peak(r.conclusion.best) / Peak({0, 0}), 0.05);
}

TEST(ExperimentDesign, SmallSpacesAreRacedJointly) {
  KnobSpace space;
  KnobCoordinate sched;
  sched.name = "scheduler";
  sched.labels = {"none", "mq-deadline", "bfq"};
  sched.values = {0, 1, 2};
  KnobCoordinate depth;
  depth.name = "nr_requests";
  depth.values = {32, 64, 128, 256};
  space.coordinates = {sched, depth};
  auto truth = [](const KnobSetting& s) { return s[0] == 0 && s[1] == 64 ? 130.0 : 100.0; };
  const DesignRun r = RunDesign(space, {1, 256}, truth, 0.02, 11);
  EXPECT_EQ(r.conclusion.verdict, Verdict::kBetter);
  EXPECT_EQ(r.conclusion.apply, (KnobSetting{0, 64}));
  EXPECT_EQ(space.Format(r.conclusion.apply), "scheduler=none,nr_requests=64");
}

TEST(ExperimentDesign, ReplayingStoredOutcomesContinuesTheSamePlan) {
  const DesignRun full = RunDesign(TwoFields(), {5, 6}, Peak, 0.01, 9);
  // A second design fed the first half of the outcomes (as a restarted
  // tuner replays stored trials) asks for the same next trials.
  ExperimentDesign replay(TwoFields(), {5, 6}, ExperimentDesignOptions{9}, false);
  for (size_t i = 0; i < full.outcomes.size(); ++i) {
    auto step = replay.Next();
    ASSERT_TRUE(std::holds_alternative<PlannedTrial>(step)) << i;
    EXPECT_EQ(std::get<PlannedTrial>(step).setting, full.outcomes[i].setting) << i;
    replay.Record(full.outcomes[i]);
  }
  auto end = replay.Next();
  ASSERT_TRUE(std::holds_alternative<ExperimentConclusion>(end));
  EXPECT_EQ(std::get<ExperimentConclusion>(end).apply, full.conclusion.apply);
  EXPECT_EQ(std::get<ExperimentConclusion>(end).comparison.ratio, full.conclusion.comparison.ratio);
}

TEST(ExperimentDesign, TheStatementCarriesTheEvidence) {
  const DesignRun r = RunDesign(TwoFields(), {0, 0}, Peak, 0.01, 2);
  const std::string s = ConclusionStatement(TwoFields(), r.conclusion, "write_mbps");
  EXPECT_NE(s.find("beats the start (A=0,B=0) by"), std::string::npos) << s;
  EXPECT_NE(s.find("95% CI ["), std::string::npos) << s;
  EXPECT_NE(s.find(std::to_string(r.conclusion.trials) + " trials"), std::string::npos) << s;
}

TEST(ExperimentDesign, OptionsAndSpacesAreValidated) {
  ExperimentDesignOptions o;
  o.max_trials = 5;
  EXPECT_FALSE(o.Validate().ok());
  o = {};
  o.confidence = 1;
  EXPECT_FALSE(o.Validate().ok());
  EXPECT_TRUE(ExperimentDesignOptions{}.Validate().ok());
  EXPECT_FALSE(ExperimentDesign::ValidateSpace(TwoFields(), {16, 0}).ok());
  KnobSpace dup = TwoFields();
  dup.coordinates[0].values.push_back(3);
  EXPECT_FALSE(ExperimentDesign::ValidateSpace(dup, {0, 0}).ok());
  EXPECT_TRUE(ExperimentDesign::ValidateSpace(TwoFields(), {15, 0}).ok());
}

}  // namespace
}  // namespace spintune
