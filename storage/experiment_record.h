// Knob experiments as stored (storage/SCHEMA.md, migration 9): one record
// per experiment, its trials, and the knob settings in force per target
// (what a finished experiment or a rollback left; profiles and release
// headers carry them).
//
// Plain values; thread-compatible.
#ifndef SPINTUNE_STORAGE_EXPERIMENT_RECORD_H_
#define SPINTUNE_STORAGE_EXPERIMENT_RECORD_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "models/knob_space.h"

namespace spintune {

struct ExperimentRecord {
  int64_t id = 0;
  int64_t target_id = 0;
  std::string agent_id;  // filled when loaded
  std::string name;      // the declaration's (KnobsDeclared.name)
  // Of the declaration without its start values: a changed declaration
  // starts a new experiment, a restarted agent resumes its own.
  uint64_t fingerprint = 0;
  KnobSpace space;
  KnobSetting start;
  std::string metric;
  std::string metric_unit;
  bool lower_is_better = false;
  std::string constraints;  // for people: "dma_errors <= 0"
  std::string workload;     // for people
  uint32_t max_trials = 0;
  bool apply_winner = true;
  uint64_t seed = 1;
  std::string state = "running";  // running | finished | aborted
  bool abort_requested = false;
  // Once finished (models/experiment_design.h): the verdict
  // (better | no_significant_difference | start_is_best | aborted), the
  // search's best, what the board was left on, best vs start from the
  // confirmation (improvement factor and interval; 0 when none ran).
  std::string verdict;
  KnobSetting best;
  KnobSetting applied;
  double ratio = 0;
  double ci_low = 0;
  double ci_high = 0;
  double confidence = 0.95;
  uint64_t trials = 0;
  std::string statement;
  std::string created_at;
  std::string finished_at;
  // The agent's answer to the end (KnobApplied): "ok", or its error; ""
  // while none came.
  std::string end_result;
};

struct KnobTrialRecord {
  uint32_t trial = 0;  // 1, 2, ...
  std::string phase;   // search | confirm
  KnobSetting setting;
  double metric = 0;
  std::map<std::string, double> metrics;
  bool feasible = true;  // ran, and every constraint held
  std::string error;     // the agent's, when the trial failed
  uint64_t duration_ns = 0;
  std::string measured_at;
};

// One coordinate's value in force on a target.
struct KnobSettingRecord {
  std::string declaration;  // the knob set
  std::string coordinate;   // "P0DMACR.TXTS", "nr_requests"
  int64_t value = 0;
  std::string label;        // how it prints ("3", "mq-deadline")
  // Register fields: the register and the field's place in it (for the
  // header's mask and value).
  std::string register_name;
  uint32_t shift = 0;
  uint32_t width = 0;
  int64_t experiment_id = 0;  // the experiment that found it (0: unknown)
  std::string evidence;       // its statement (and a rollback's note)
  std::string updated_at;
};

}  // namespace spintune

#endif  // SPINTUNE_STORAGE_EXPERIMENT_RECORD_H_
