#include "models/experiment_design.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace spintune {
namespace {

// z quantiles for the confirmation's size: two-sided 95% and 80% power.
constexpr double kZConfidence = 1.959964;
constexpr double kZPower = 0.841621;

}  // namespace

absl::Status ExperimentDesignOptions::Validate() const {
  if (!(confidence > 0 && confidence < 1)) {
    return absl::InvalidArgumentError("confidence must be in (0, 1)");
  }
  if (!(plateau >= 0 && plateau < 1)) return absl::InvalidArgumentError("plateau must be in [0, 1)");
  if (start_replicates < 2) return absl::InvalidArgumentError("start_replicates must be >= 2");
  if (confirm_min < 2 || confirm_max < confirm_min) {
    return absl::InvalidArgumentError("need 2 <= confirm_min <= confirm_max");
  }
  if (max_trials < 2 * confirm_min + start_replicates + 1 || max_trials > 100000) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_trials must be in [", 2 * confirm_min + start_replicates + 1, ", 100000]"));
  }
  if (max_rounds < 1 || max_passes < 1) {
    return absl::InvalidArgumentError("max_rounds and max_passes must be >= 1");
  }
  if (!(prior_sigma > 0)) return absl::InvalidArgumentError("prior_sigma must be > 0");
  return absl::OkStatus();
}

const char* VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kBetter:
      return "better";
    case Verdict::kNoSignificantDifference:
      return "no_significant_difference";
    case Verdict::kStartIsBest:
      return "start_is_best";
  }
  return "unknown";
}

std::string ConclusionStatement(const KnobSpace& space, const ExperimentConclusion& c,
                                const std::string& metric) {
  const std::string ci =
      c.confirmed ? absl::StrFormat("%.3gx, %g%% CI [%.3g, %.3g]", c.comparison.ratio,
                                    100 * c.confidence, c.comparison.low, c.comparison.high)
                  : "";
  const std::string trials = absl::StrCat(c.trials, " trials");
  switch (c.verdict) {
    case Verdict::kBetter:
      return absl::StrCat(space.Format(c.best), " beats the start (", space.Format(c.start),
                          ") by ", ci.empty() ? "?" : ci, " in ", metric, ", ", trials);
    case Verdict::kNoSignificantDifference:
      if (!c.confirmed) {
        return absl::StrCat("no significant difference: ", c.reason, "; keeping the start (",
                            space.Format(c.start), "), ", trials);
      }
      return absl::StrCat("no significant difference: ", space.Format(c.best), " vs the start (",
                          space.Format(c.start), ") ", ci, " in ", metric, " (", c.reason,
                          "); keeping the start, ", trials);
    case Verdict::kStartIsBest:
      return absl::StrCat("the start (", space.Format(c.start), ") is the best setting found (",
                          c.reason, "), ", trials);
  }
  return "";
}

absl::Status ExperimentDesign::ValidateSpace(const KnobSpace& space, const KnobSetting& start) {
  if (space.coordinates.empty()) return absl::InvalidArgumentError("no knobs");
  for (const auto& c : space.coordinates) {
    if (c.values.empty() || c.values.size() > 4096) {
      return absl::InvalidArgumentError(
          absl::StrCat("knob '", c.name, "' needs 1..4096 candidate values"));
    }
    if (std::set<int64_t>(c.values.begin(), c.values.end()).size() != c.values.size()) {
      return absl::InvalidArgumentError(absl::StrCat("knob '", c.name, "' repeats a value"));
    }
  }
  if (!space.Contains(start)) {
    return absl::InvalidArgumentError("the start setting is not in the space");
  }
  return absl::OkStatus();
}

ExperimentDesign::ExperimentDesign(KnobSpace space, KnobSetting start,
                                   ExperimentDesignOptions options, bool lower_is_better)
    : space_(std::move(space)),
      start_(std::move(start)),
      options_(options),
      lower_is_better_(lower_is_better),
      joint_(space_.Size() <= options.joint_limit),
      search_budget_(options.max_trials -
                     std::min(2 * options.confirm_max, options.max_trials / 2)),
      rng_(options.seed),
      incumbent_(start_) {
  assert(options_.Validate().ok() && ValidateSpace(space_, start_).ok());
}

double ExperimentDesign::Score(double metric) const {
  return lower_is_better_ ? -std::log(metric) : std::log(metric);
}

const ExperimentDesign::Arm* ExperimentDesign::FindArm(const KnobSetting& s) const {
  auto it = arms_.find(s);
  return it == arms_.end() ? nullptr : &it->second;
}

PooledNoise ExperimentDesign::Noise() const {
  std::vector<RunningMoments> groups;
  for (const auto& [setting, arm] : arms_) groups.push_back(arm.scores);
  PooledNoise noise = PoolNoise(groups);
  // Before any setting was measured twice (or when every repeat was
  // identical): the prior, worth one degree of freedom.
  if (noise.df == 0 || noise.sigma == 0) noise = {options_.prior_sigma, 1};
  return noise;
}

ExperimentDesign::Step ExperimentDesign::Next() {
  Plan();
  if (!queue_.empty()) return queue_.front();
  return conclusion_;
}

void ExperimentDesign::Record(const TrialOutcome& outcome) {
  Plan();
  ++trials_;
  TrialPhase phase = TrialPhase::kSearch;
  if (!queue_.empty() && queue_.front().setting == outcome.setting) {
    phase = queue_.front().phase;
    queue_.pop_front();
  }
  const bool ok = outcome.feasible && outcome.metric > 0 && std::isfinite(outcome.metric);
  if (phase == TrialPhase::kConfirm) {
    // A failed trial of the start only counts as missing data: the
    // verdict needs the start measured twice.
    const bool is_best = outcome.setting == best_;
    if (!ok) {
      best_failed_ = best_failed_ || is_best;
    } else {
      (is_best ? confirm_best_ : confirm_start_).push_back(Score(outcome.metric));
    }
    return;
  }
  Arm& arm = arms_[outcome.setting];
  if (!ok) {
    arm.out = true;
  } else {
    arm.scores.Add(Score(outcome.metric));
  }
}

void ExperimentDesign::Plan() {
  while (queue_.empty() && stage_ != Stage::kDone) {
    if (stage_ == Stage::kSearch) {
      PlanSearch();
    } else {
      PlanConfirm();
    }
  }
}

bool ExperimentDesign::Enqueue(std::vector<PlannedTrial> plan) {
  const size_t left = trials_ + queue_.size() < search_budget_
                          ? search_budget_ - trials_ - queue_.size()
                          : 0;
  if (left == 0) return false;
  std::shuffle(plan.begin(), plan.end(), rng_);
  if (plan.size() > left) plan.resize(left);
  for (auto& p : plan) queue_.push_back(std::move(p));
  return true;
}

void ExperimentDesign::PlanSearch() {
  if (!race_) {
    StartRace();
    if (!queue_.empty()) return;
  }
  if (Evaluate()) {
    EndRace();
    return;
  }
  Race& race = *race_;
  ++race.round;
  // Successive halving: the better half by mean goes on.
  if (race.arms.size() > 2) {
    std::stable_sort(race.arms.begin(), race.arms.end(),
                     [this](const KnobSetting& a, const KnobSetting& b) {
                       return FindArm(a)->scores.mean > FindArm(b)->scores.mean;
                     });
    race.arms.resize((race.arms.size() + 1) / 2);
  }
  const size_t target = size_t{1} << race.round;
  std::vector<PlannedTrial> plan;
  for (const auto& s : race.arms) {
    for (size_t n = FindArm(s)->scores.n; n < target; ++n) plan.push_back({s, TrialPhase::kSearch});
  }
  // Nothing to add (the arms were measured in earlier races): the next
  // round's target is higher; Plan() comes back here.
  if (!plan.empty() && !Enqueue(std::move(plan))) EndRace();
}

void ExperimentDesign::StartRace() {
  Race race;
  if (joint_) {
    race.arms = space_.AllSettings();
  } else {
    for (int64_t v : space_.coordinates[coordinate_].values) {
      KnobSetting s = incumbent_;
      s[coordinate_] = v;
      race.arms.push_back(std::move(s));
    }
  }
  std::vector<PlannedTrial> plan;
  std::vector<KnobSetting> in;
  for (auto& s : race.arms) {
    const Arm* arm = FindArm(s);
    if (arm && arm->out) continue;
    const size_t need = first_race_ && s == start_ ? options_.start_replicates : 1;
    for (size_t n = arm ? arm->scores.n : 0; n < need; ++n) plan.push_back({s, TrialPhase::kSearch});
    in.push_back(std::move(s));
  }
  race.arms = std::move(in);
  while ((size_t{1} << race.last_round) < race.arms.size()) ++race.last_round;
  first_race_ = false;
  race_ = std::move(race);
  if (!plan.empty() && !Enqueue(std::move(plan))) EndRace();
}

bool ExperimentDesign::Evaluate() {
  Race& race = *race_;
  std::vector<KnobSetting> in;
  for (const auto& s : race.arms) {
    const Arm* arm = FindArm(s);
    if (arm && !arm->out && arm->scores.n > 0) in.push_back(s);
  }
  race.arms = std::move(in);
  if (race.arms.size() <= 1) return true;
  // The leader: highest mean; ties go to the incumbent, then domain order.
  const KnobSetting* leader = &race.arms.front();
  for (const auto& s : race.arms) {
    const double m = FindArm(s)->scores.mean, best = FindArm(*leader)->scores.mean;
    if (m > best || (m == best && s == incumbent_)) leader = &s;
  }
  const PooledNoise noise = Noise();
  const double alpha = (1 - options_.confidence) / static_cast<double>(race.arms.size());
  const double q = StudentTQuantile(1 - alpha / 2, noise.df);
  auto half = [&](const KnobSetting& s) {
    return q * noise.sigma / std::sqrt(static_cast<double>(FindArm(s)->scores.n));
  };
  const KnobSetting leader_setting = *leader;
  const double leader_low = FindArm(leader_setting)->scores.mean - half(leader_setting);
  std::vector<KnobSetting> kept;
  double worst_gap = 0;  // how much better than the leader any arm left may be
  for (const auto& s : race.arms) {
    const double high = FindArm(s)->scores.mean + half(s);
    if (high < leader_low) continue;  // eliminated
    worst_gap = std::max(worst_gap, high - leader_low);
    kept.push_back(s);
  }
  race.arms = std::move(kept);
  return race.arms.size() <= 1 || worst_gap <= std::log1p(options_.plateau) ||
         race.round >= std::min(options_.max_rounds, race.last_round);
}

void ExperimentDesign::EndRace() {
  // Drop what failed since the last evaluation, then take the leader.
  KnobSetting leader = incumbent_;
  const Arm* incumbent_arm = FindArm(incumbent_);
  bool have = incumbent_arm && !incumbent_arm->out && incumbent_arm->scores.n > 0;
  double best = have ? incumbent_arm->scores.mean : 0;
  for (const auto& s : race_->arms) {
    const Arm* arm = FindArm(s);
    if (!arm || arm->out || arm->scores.n == 0) continue;
    if (!have || arm->scores.mean > best) {
      leader = s;
      best = arm->scores.mean;
      have = true;
    }
  }
  const bool changed = leader != incumbent_;
  incumbent_ = leader;
  race_.reset();
  ++races_;
  const size_t coords = space_.coordinates.size();
  if (joint_ || trials_ + queue_.size() >= search_budget_) {
    stage_ = Stage::kConfirm;
    return;
  }
  unchanged_ = changed ? 1 : unchanged_ + 1;
  if (unchanged_ >= coords || races_ >= options_.max_passes * coords) {
    stage_ = Stage::kConfirm;
    return;
  }
  coordinate_ = (coordinate_ + 1) % coords;
}

void ExperimentDesign::PlanConfirm() {
  if (!confirm_planned_) {
    confirm_planned_ = true;
    best_ = incumbent_;
    if (best_ == start_) {
      return Conclude(Verdict::kStartIsBest, "no other setting measured better");
    }
    // Size for 80% power at the search's effect: n = 2 (z_a + z_b)^2 s^2 / d^2.
    const Arm* b = FindArm(best_);
    const Arm* s = FindArm(start_);
    const double effect = b && s && s->scores.n > 0 ? b->scores.mean - s->scores.mean : 0;
    const double sigma = Noise().sigma;
    size_t n = options_.confirm_max;
    if (effect > 0) {
      const double z = kZConfidence + kZPower;
      n = static_cast<size_t>(std::ceil(2 * z * z * sigma * sigma / (effect * effect)));
      n = std::clamp(n, options_.confirm_min, options_.confirm_max);
    }
    const size_t left = options_.max_trials > trials_ ? options_.max_trials - trials_ : 0;
    n = std::min(n, left / 2);
    if (n < 2) {
      return Conclude(Verdict::kNoSignificantDifference,
                      "the trial budget ran out before the confirmation");
    }
    // Pairs in random order inside each pair: drift hits both alike.
    std::bernoulli_distribution coin(0.5);
    for (size_t i = 0; i < n; ++i) {
      const bool best_first = coin(rng_);
      queue_.push_back({best_first ? best_ : start_, TrialPhase::kConfirm});
      queue_.push_back({best_first ? start_ : best_, TrialPhase::kConfirm});
    }
    return;
  }
  conclusion_.confirmed = confirm_best_.size() >= 2 && confirm_start_.size() >= 2;
  if (conclusion_.confirmed) {
    conclusion_.comparison = CompareLogMeans(confirm_best_, confirm_start_, options_.confidence);
  }
  conclusion_.confirm_trials = std::min(confirm_best_.size(), confirm_start_.size());
  if (best_failed_) {
    return Conclude(Verdict::kNoSignificantDifference,
                    "the best setting failed its constraints in the confirmation");
  }
  if (!conclusion_.confirmed) {
    return Conclude(Verdict::kNoSignificantDifference, "too few confirmation trials");
  }
  if (conclusion_.comparison.low > 1) return Conclude(Verdict::kBetter, "");
  Conclude(Verdict::kNoSignificantDifference,
           conclusion_.comparison.high < 1 ? "the search's best did not hold up"
                                           : "the difference is within the noise");
}

void ExperimentDesign::Conclude(Verdict verdict, std::string reason) {
  stage_ = Stage::kDone;
  conclusion_.verdict = verdict;
  conclusion_.reason = std::move(reason);
  conclusion_.best = confirm_planned_ ? best_ : incumbent_;
  conclusion_.start = start_;
  conclusion_.apply = verdict == Verdict::kBetter ? conclusion_.best : start_;
  conclusion_.confidence = options_.confidence;
  conclusion_.trials = trials_;
}

}  // namespace spintune
