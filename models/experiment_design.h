// ExperimentDesign: which knob setting to try next, and when to stop.
//
// The design runs in two phases on the noise model of knob_statistics.h
// (multiplicative noise; all comparisons on log y, oriented so that larger
// is better):
//
// 1. Search. A space of at most `joint_limit` settings is one race over all
//    of them; a larger one is searched coordinate by coordinate (each bit
//    field of a register, each knob): a race over one coordinate's values
//    with the others held at the incumbent, moving the incumbent to the
//    winner, until a whole cycle of coordinates changes nothing (or
//    `max_passes` cycles). A race is successive halving with elimination:
//    round 0 measures every arm once (the start `start_replicates` times,
//    which also seeds the noise estimate), each later round doubles the
//    trials of the arms that are left after (a) dropping every arm whose
//    upper confidence bound is below the leader's lower bound (Bonferroni
//    over the arms, pooled sigma, Student t) and (b) keeping the better half
//    by mean. It ends with one arm left, when every arm left is within
//    `plateau` of the leader with confidence, or after ceil(log2(arms))
//    rounds (at most `max_rounds`): arms still tied then are equally good
//    for the search, and the confirmation decides against the start. A
//    setting that failed its constraints (or whose metric is not positive)
//    is out for good. Every round runs in a random order (seeded).
// 2. Confirmation. The search's winner and the start are measured afresh,
//    n times each in randomly ordered pairs (n from the search's effect and
//    noise for 80% power at `confidence`, within [confirm_min,
//    confirm_max]); only these trials make the final statement (the search
//    trials would flatter the winner), by Welch's t on the log values: the
//    winner beats the start when the lower end of the ratio's interval is
//    above 1, otherwise there is no significant difference.
//
// The design is a pure state machine: the same outcomes in the same order
// give the same plan, so a design rebuilt from stored trials continues
// exactly where it was (replay them through Next() and Record()).
//
// Thread-compatible.
#ifndef SPINTUNE_MODELS_EXPERIMENT_DESIGN_H_
#define SPINTUNE_MODELS_EXPERIMENT_DESIGN_H_

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "models/knob_space.h"
#include "models/knob_statistics.h"

namespace spintune {

struct ExperimentDesignOptions {
  uint64_t seed = 1;
  // Every trial, search and confirmation. The search stops early enough to
  // leave room for the confirmation.
  size_t max_trials = 120;
  // Of the final statement (and of each elimination, Bonferroni-corrected).
  double confidence = 0.95;
  // Settings within this share of each other count as equally good: a race
  // stops once every arm left is within it of the leader, with confidence.
  double plateau = 0.03;
  // Spaces with at most this many settings are searched jointly.
  uint64_t joint_limit = 24;
  size_t start_replicates = 3;
  size_t confirm_min = 3;
  size_t confirm_max = 8;
  size_t max_rounds = 4;   // per race, after round 0
  size_t max_passes = 3;   // coordinate cycles
  // Log-scale sigma assumed before any setting was measured twice.
  double prior_sigma = 0.05;

  absl::Status Validate() const;
};

enum class TrialPhase { kSearch, kConfirm };

struct PlannedTrial {
  KnobSetting setting;
  TrialPhase phase = TrialPhase::kSearch;
};

struct TrialOutcome {
  KnobSetting setting;
  double metric = 0;      // in the metric's unit (> 0)
  bool feasible = true;   // false: a constraint failed, or the trial did
};

enum class Verdict {
  kBetter,                  // the winner beats the start with confidence
  kNoSignificantDifference, // it does not (or did not hold up)
  kStartIsBest,             // the search found nothing better than the start
};
// "better", "no_significant_difference", "start_is_best".
const char* VerdictName(Verdict v);

struct ExperimentConclusion {
  Verdict verdict = Verdict::kStartIsBest;
  KnobSetting best;   // the search's winner
  KnobSetting start;
  // What the board should be left on: best when kBetter, else start.
  KnobSetting apply;
  // best vs start from the confirmation trials, as an improvement factor
  // (> 1: best is better; for lower-is-better metrics start / best).
  RatioInterval comparison;
  bool confirmed = false;   // the confirmation ran (comparison is valid)
  double confidence = 0.95;
  size_t trials = 0;          // all trials
  size_t confirm_trials = 0;  // per setting
  std::string reason;         // why it is not kBetter ("" when it is)
};

// "TXTS=3,RXTS=3 beats the start (TXTS=5,RXTS=6) by 2.90x in write_mbps,
// 95% CI [2.86, 2.95], 46 trials".
std::string ConclusionStatement(const KnobSpace& space, const ExperimentConclusion& c,
                                const std::string& metric);

class ExperimentDesign {
 public:
  using Step = std::variant<PlannedTrial, ExperimentConclusion>;

  // REQUIRES: options.Validate() and ValidateSpace(space, start) are OK.
  ExperimentDesign(KnobSpace space, KnobSetting start, ExperimentDesignOptions options,
                   bool lower_is_better);
  // Every coordinate has 1..4096 distinct values, start is in the space.
  static absl::Status ValidateSpace(const KnobSpace& space, const KnobSetting& start);

  // The next trial to run, or the conclusion once there is none. Calling it
  // again without Record() gives the same answer.
  Step Next();
  // The outcome of a trial (normally the one Next() returned; any other
  // setting counts as extra search evidence).
  void Record(const TrialOutcome& outcome);

  size_t trials() const { return trials_; }
  const KnobSpace& space() const { return space_; }
  const KnobSetting& start() const { return start_; }
  const KnobSetting& incumbent() const { return incumbent_; }

 private:
  struct Arm {
    RunningMoments scores;  // log values, oriented
    bool out = false;       // failed a constraint
  };
  struct Race {
    std::vector<KnobSetting> arms;  // those still in
    size_t round = 0;
    // Successive halving's own end: ceil(log2(arms at the start)) rounds.
    size_t last_round = 1;
  };
  enum class Stage { kSearch, kConfirm, kDone };

  void Plan();
  void PlanSearch();
  void StartRace();
  // Drops arms (eliminated or out); true when the race is over.
  bool Evaluate();
  void EndRace();
  void PlanConfirm();
  void Conclude(Verdict verdict, std::string reason);
  // Appends `plan` (shuffled) to the queue within the search budget; false
  // when the budget is used up.
  bool Enqueue(std::vector<PlannedTrial> plan);
  PooledNoise Noise() const;
  double Score(double metric) const;
  const Arm* FindArm(const KnobSetting& s) const;

  const KnobSpace space_;
  const KnobSetting start_;
  const ExperimentDesignOptions options_;
  const bool lower_is_better_;
  const bool joint_;
  const size_t search_budget_;

  std::mt19937_64 rng_;
  Stage stage_ = Stage::kSearch;
  std::deque<PlannedTrial> queue_;
  size_t trials_ = 0;
  std::map<KnobSetting, Arm> arms_;
  KnobSetting incumbent_;
  std::optional<Race> race_;
  size_t coordinate_ = 0;
  size_t races_ = 0;
  size_t unchanged_ = 0;  // consecutive coordinate races that kept the incumbent
  bool first_race_ = true;
  // Confirmation.
  bool confirm_planned_ = false;
  KnobSetting best_;
  std::vector<double> confirm_best_, confirm_start_;
  bool best_failed_ = false;
  ExperimentConclusion conclusion_;
};

}  // namespace spintune

#endif  // SPINTUNE_MODELS_EXPERIMENT_DESIGN_H_
