// SimSource: an endless, deterministic stream of completion and dispatch
// samples from a BoardModel (board_model.h), with issue times. The board
// runs its stock driver, so each request's wait path follows the board's
// default rules.
//
// Thread-safety: one thread per source.
#ifndef SPINTUNE_AGENT_SIM_SOURCE_H_
#define SPINTUNE_AGENT_SIM_SOURCE_H_

#include <random>

#include "agent/board_model.h"
#include "agent/sample_source.h"

namespace spintune {

class SimSource : public SampleSource {
 public:
  // `board` must outlive the source.
  SimSource(const BoardModel& board, uint64_t seed);

  void Describe(v1::Hello* hello) const override;
  absl::StatusOr<size_t> Fill(size_t max_completions, v1::SampleBatch* batch) override;
  bool exhausted() const override { return false; }

 private:
  const BoardModel& board_;
  std::mt19937_64 rng_;
  BoardSimulator sim_;
};

}  // namespace spintune

#endif  // SPINTUNE_AGENT_SIM_SOURCE_H_
