// ColdStartEvidence: the other boards' evidence for cold-start predictions
// (policy/cold_start.h), kept as the sums of its least-squares fits.
//
// PredictPolicyTable reads every key of every board for each prediction: in
// a fleet of N boards that is O(N) per new board and O(N^2) for the fleet,
// and it needs every board's histograms in memory. This holds, per (device
// driver, device model, opcode, size class), the sums of
// models/inverse_clock_sums.h over the boards, and per board only what it
// added (a clock, a weight and the buckets of 100 grid quantiles per key,
// about 220 bytes a key), so that
//   - adding or replacing a board costs O(its keys),
//   - a prediction costs O(the target's keys), whatever the number of
//     boards, also when it leaves one board (the requester) out.
// The result is PredictPolicyTable's on the same boards.
//
// Thread-compatible: const methods may run concurrently; Set() and Erase()
// need exclusive access.
#ifndef SPINTUNE_POLICY_COLD_START_EVIDENCE_H_
#define SPINTUNE_POLICY_COLD_START_EVIDENCE_H_

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "models/cross_board_model.h"
#include "models/inverse_clock_sums.h"
#include "policy/cold_start.h"
#include "policy/policy_builder.h"

namespace spintune {

class ColdStartEvidence {
 public:
  // `config` is the one every prediction fits with; keys with fewer than
  // config.min_samples samples are not evidence.
  explicit ColdStartEvidence(FitConfig config);

  // Board `board_id`'s evidence, replacing what the id had. A board without
  // a CPU class with a clock contributes nothing.
  void Set(int64_t board_id, const BoardEvidence& board);
  void Erase(int64_t board_id);
  size_t boards() const { return boards_.size(); }

  // PredictPolicyTable(every board but `exclude`, target, config); pass an
  // id no board has (e.g. -1) to use them all.
  absl::StatusOr<PolicyTable> Predict(const FitInputs& target, int64_t exclude) const;

 private:
  // (driver, model, opcode, size class)
  using GroupKey = std::tuple<std::string, std::string, uint32_t, uint32_t>;
  using Groups = std::map<GroupKey, InverseClockSums>;
  struct KeyContribution {
    Groups::iterator group;
    double weight = 0;
    std::array<uint16_t, kQuantileGridPoints> quantile_buckets;
  };
  struct Board {
    double cpu_khz = 0;
    Eigen::VectorXd costs;  // CostOutputs of CPU class 0
    std::vector<KeyContribution> keys;
  };
  static Eigen::VectorXd Quantiles(const KeyContribution& key);

  const FitConfig config_;
  Groups groups_;
  InverseClockSums costs_{5};  // every board with a clock, weight 1
  std::map<int64_t, Board> boards_;
};

}  // namespace spintune

#endif  // SPINTUNE_POLICY_COLD_START_EVIDENCE_H_
