// KnobJournal: what an agent must remember about its knobs across a crash
// or a reboot, in one small JSON file in its state directory
// (STATE_DIR/AGENT.knobs.json), written atomically before every change:
//   - while an experiment runs: the raw value of every knob before its
//     first trial (the baseline). A restarted agent writes it back before
//     anything else, so `kill -9` mid-trial leaves no trial setting behind;
//   - after an experiment ended on a setting: that setting's raw values,
//     re-applied at every start (sysfs and registers reset at boot).
//
// Plain functions; thread-compatible.
#ifndef SPINTUNE_AGENT_KNOBS_KNOB_JOURNAL_H_
#define SPINTUNE_AGENT_KNOBS_KNOB_JOURNAL_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"

namespace spintune {

struct KnobJournalState {
  std::string declaration;  // KnobDeclaration::name the values belong to
  // The experiment whose trial settings may be in force (0: none).
  uint64_t experiment_id = 0;
  std::map<std::string, std::string> baseline;  // knob -> raw value
  std::map<std::string, std::string> applied;   // knob -> raw value

  bool empty() const { return experiment_id == 0 && baseline.empty() && applied.empty(); }
};

// An empty state when the file does not exist; DataLoss when it is not a
// journal (the agent then refuses to touch the knobs).
absl::StatusOr<KnobJournalState> LoadKnobJournal(const std::string& path);
// Writes `state` atomically (an empty state removes the file).
absl::Status SaveKnobJournal(const std::string& path, const KnobJournalState& state);

}  // namespace spintune

#endif  // SPINTUNE_AGENT_KNOBS_KNOB_JOURNAL_H_
