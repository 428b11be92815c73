#include "policy/cold_start.h"

#include "policy/cold_start_evidence.h"

namespace spintune {

absl::StatusOr<PolicyTable> PredictPolicyTable(const std::vector<BoardEvidence>& others,
                                               const FitInputs& target,
                                               const FitConfig& config) {
  ColdStartEvidence evidence(config);
  for (size_t i = 0; i < others.size(); ++i) evidence.Set(static_cast<int64_t>(i), others[i]);
  return evidence.Predict(target, -1);
}

}  // namespace spintune
