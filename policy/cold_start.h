// Cold start: a predicted policy table for a board that has sent no samples
// yet, from boards that have, with models/cross_board_model.h.
//
// For every device of the new board, the other boards' devices with the same
// driver and model contribute their keys: per (opcode, size class) the
// completion-time quantiles are fitted as device_ns + cycles / f_cpu across
// those boards' clocks (CPU class 0), predicted at the new board's clock, and
// turned into a synthetic histogram; the new board's own declared platform
// costs are used when it declared them, otherwise costs predicted from the
// other boards. The table is then fitted as usual (BuildPolicyTable).
// PredictPolicyTable reads all of `others` for one prediction; the tuner
// keeps them as policy/cold_start_evidence.h (the same prediction, O(the
// target's keys) each).
//
// Pure function; thread-safe.
#ifndef SPINTUNE_POLICY_COLD_START_H_
#define SPINTUNE_POLICY_COLD_START_H_

#include <vector>

#include "absl/status/statusor.h"
#include "policy/policy_builder.h"

namespace spintune {

// What one board has measured (the tuner's stored evidence of a target).
struct BoardEvidence {
  std::vector<CpuClassInfo> cpu_classes;  // [0] gives the clock
  std::vector<DeviceInfo> devices;
  std::vector<KeyEvidence> keys;
};

// `target` describes the new board (its keys are ignored). NotFound when no
// other board shares a device (driver and model) with it.
absl::StatusOr<PolicyTable> PredictPolicyTable(const std::vector<BoardEvidence>& others,
                                               const FitInputs& target,
                                               const FitConfig& config);

}  // namespace spintune

#endif  // SPINTUNE_POLICY_COLD_START_H_
