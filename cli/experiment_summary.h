// What `spintune experiments show` and the report say about one knob
// experiment: per setting measured, its trials and the geometric mean of
// its metric with a 95% interval (models/knob_statistics.h: multiplicative
// noise; a setting measured once borrows the pooled noise of the others),
// and the JSON form of an experiment.
//
// Pure functions; thread-safe.
#ifndef SPINTUNE_CLI_EXPERIMENT_SUMMARY_H_
#define SPINTUNE_CLI_EXPERIMENT_SUMMARY_H_

#include <string>
#include <vector>

#include "models/knob_statistics.h"
#include "nlohmann/json.hpp"
#include "absl/status/statusor.h"
#include "storage/experiment_record.h"

namespace spintune {

struct ExperimentEvidence {
  ExperimentRecord record;
  std::vector<KnobTrialRecord> trials;
};

struct SettingSummary {
  KnobSetting setting;
  std::string label;       // "TXTS=3,RXTS=3"
  size_t trials = 0;       // every trial of the setting
  size_t failed = 0;       // of them, failed or broke a constraint
  bool measured = false;   // at least one trial ran (mean is valid)
  MeanInterval metric;     // over the trials that ran
  bool is_start = false, is_best = false, is_applied = false;
};

// Best first (by geometric mean in the metric's direction; settings with
// only failed trials last).
std::vector<SettingSummary> SummarizeSettings(const ExperimentEvidence& e);

class Store;
// Every experiment of the target `agent_id` with its trials, oldest first.
absl::StatusOr<std::vector<ExperimentEvidence>> LoadExperimentEvidence(Store& store,
                                                                       const std::string& agent_id);

// "running", or "finished: better" ...
std::string ExperimentStateText(const ExperimentRecord& r);
nlohmann::json ExperimentToJson(const ExperimentRecord& r);
// With the per-setting summary and every trial.
nlohmann::json ExperimentEvidenceToJson(const ExperimentEvidence& e);

}  // namespace spintune

#endif  // SPINTUNE_CLI_EXPERIMENT_SUMMARY_H_
