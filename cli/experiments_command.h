// `spintune experiments list|show|abort`: the knob experiments of a tuner
// database (docs/knobs.md). list: one line per experiment (optionally of
// one target); show: its declaration, conclusion, every setting measured
// with its mean and 95% interval, and the trial log; abort: asks the tuner
// running on the database to stop a running experiment (within a second
// it ends it and the agent restores the start values; with no tuner
// running, the agent restores them itself and the experiment is ended when
// it next connects).
#ifndef SPINTUNE_CLI_EXPERIMENTS_COMMAND_H_
#define SPINTUNE_CLI_EXPERIMENTS_COMMAND_H_

#include <cstdint>
#include <ostream>
#include <string>

#include "absl/status/status.h"

namespace spintune {

struct ExperimentsFlags {
  std::string action;    // list | show | abort
  int64_t id = 0;        // show, abort
  std::string target;    // list: only this agent id
  size_t max_trials_shown = 60;  // show, table: the last this many trials (0: all)
  std::string format = "table";
};

absl::Status RunExperiments(const std::string& db, const ExperimentsFlags& flags,
                            std::ostream& out);

}  // namespace spintune

#endif  // SPINTUNE_CLI_EXPERIMENTS_COMMAND_H_
