// Cold start on held-back boards: for each simulated board, the table
// predicted from the other boards (policy/cold_start.h) against the table
// fitted on the board's own samples, both evaluated on those samples.
#ifndef SPINTUNE_BENCH_COLD_START_EVAL_H_
#define SPINTUNE_BENCH_COLD_START_EVAL_H_

#include <string>
#include <vector>

namespace spintune {

struct ColdStartResult {
  std::string board;
  int donor_boards = 0;    // boards sharing its device
  int keys = 0;            // keys with a prediction
  int same_decisions = 0;  // keys where the predicted strategy equals the fitted one
  double j_ratio = 0;      // J(predicted) / J(fitted), sample-weighted over keys
  double worst_key_ratio = 0;
  std::string note;        // why there is no prediction, if none
};

std::vector<ColdStartResult> EvaluateColdStart(size_t samples_per_board);
std::string RenderColdStart(const std::vector<ColdStartResult>& results);

}  // namespace spintune

#endif  // SPINTUNE_BENCH_COLD_START_EVAL_H_
