// Assembles the inputs of BuildPolicyTable() from what the Store holds for a
// target: its declared platform costs and, per CPU class, the measured
// dispatch histograms of all its devices merged, as MeasuredCosts:
//
//   irq_handler + irq_overhead_cpu_ns  -> irq_cpu (when the agent declared
//                                         the overhead and handler samples exist)
//   wake                               -> irq_wake
//   timer oversleep a driver measured  -> timer_wake (a distribution: the
//                                         sleeping strategies are priced over it)
//
// BuildPolicyTable prices every candidate over them (PlatformModel::Measured;
// irq_cpu and irq_wake enter the cost linearly, so through their means). The
// CPU classes' costs are already those means, for callers that read them
// directly (cold start from other boards). Without measured oversleep the
// timer stays the declared constant.
//
// Pure function; thread-safe.
#ifndef SPINTUNE_TUNER_FIT_INPUTS_H_
#define SPINTUNE_TUNER_FIT_INPUTS_H_

#include <vector>

#include "policy/policy_builder.h"
#include "storage/store.h"

namespace spintune {

FitInputs BuildFitInputs(const TargetRecord& target, std::vector<KeyEvidence> keys,
                         const std::vector<DispatchRecord>& dispatch,
                         const std::vector<TimerRecord>& timers = {});

}  // namespace spintune

#endif  // SPINTUNE_TUNER_FIT_INPUTS_H_
