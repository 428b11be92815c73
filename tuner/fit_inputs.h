// Assembles the inputs of BuildPolicyTable() from what the Store holds for a
// target, including the platform costs refined by measured dispatch samples:
//
//   irq_cpu_ns  = irq_overhead_cpu_ns + mean(handler_ns)  when the agent
//                 declared the overhead and handler samples exist
//   irq_wake_ns = mean(wake_ns)                            when wake samples exist
//
// otherwise the declared values. Pure function; thread-safe.
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
