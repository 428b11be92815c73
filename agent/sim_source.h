// SimSource: an endless, deterministic stream of completion and dispatch
// samples from a BoardModel (board_model.h), with issue times (a
// BoardSimulator's request stream). The board's driver waits by
// the table the agent applied (until then by its stock rules) through a
// SimDriver, and reports what each key's waits cost under the version in
// force (SampleBatch.outcomes) and the oversleep of its timer sleeps. The
// completion times do not depend on the table: the driver draws from a
// generator of its own. A table with A/B trials is waited by through the
// driver helpers (policy.h: the blob the agent would write, spintune_lookup()
// and spintune_ab_pick()), and each arm's outcomes are reported apart.
//
// Thread-safety: one thread per source.
#ifndef SPINTUNE_AGENT_SIM_SOURCE_H_
#define SPINTUNE_AGENT_SIM_SOURCE_H_

#include <memory>
#include <optional>
#include <random>

#include "agent/board_model.h"
#include "agent/sim_driver.h"
#include "agent/sample_source.h"
#include "policy/policy_blob.h"

namespace spintune {

class SimSource : public SampleSource {
 public:
  // `board` must outlive the source.
  SimSource(const BoardModel& board, uint64_t seed, double timer_wake_factor = 1);

  void Describe(v1::Hello* hello) const override;
  absl::StatusOr<size_t> Fill(size_t max_completions, v1::SampleBatch* batch) override;
  bool exhausted() const override { return false; }
  void OnTableApplied(const PolicyTable& table) override;

  // Tests: from the first table applied on, every completion takes
  // `factor` times as long (a workload drift at the push).
  void DriftAtFirstTable(double factor) { drift_factor_ = factor; }

 private:
  const BoardModel& board_;
  SimDriver driver_;
  std::optional<PolicyTable> table_;
  std::unique_ptr<DecodedBlob> blob_;  // table_'s, when it has A/B trials
  spintune_ab ab_{};
  double drift_factor_ = 1;
  std::mt19937_64 rng_;
  BoardSimulator sim_;
};

}  // namespace spintune

#endif  // SPINTUNE_AGENT_SIM_SOURCE_H_
