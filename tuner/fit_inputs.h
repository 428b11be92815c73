// Assembles the inputs of BuildPolicyTable() from what the Store holds for a
// target: its declared platform costs and, per CPU class, the measured
// dispatch histograms of all its devices merged, as MeasuredCosts:
//
//   irq_handler + irq_overhead_cpu_ns  -> irq_cpu (when the agent declared
//                                         the overhead and handler samples exist)
//   wake                               -> irq_wake
//
// BuildPolicyTable prices every candidate over them (PlatformModel::Measured;
// irq_cpu and irq_wake enter the cost linearly, so through their means). The
// CPU classes' costs are already those means, for callers that read them
// directly (cold start from other boards). The timer oversleep stays the
// declared constant: the Store has no measured oversleep histogram yet.
//
// Pure function; thread-safe.
#ifndef SPINTUNE_TUNER_FIT_INPUTS_H_
#define SPINTUNE_TUNER_FIT_INPUTS_H_

#include <vector>

#include "policy/policy_builder.h"
#include "storage/store.h"

namespace spintune {

FitInputs BuildFitInputs(const TargetRecord& target, std::vector<KeyEvidence> keys,
                         const std::vector<DispatchRecord>& dispatch);

}  // namespace spintune

#endif  // SPINTUNE_TUNER_FIT_INPUTS_H_
