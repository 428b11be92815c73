// The tuner's counters in the Prometheus text exposition format (version
// 0.0.4), for the --metrics-listen endpoint.
//
// Pure function; thread-safe.
#ifndef SPINTUNE_TUNER_TUNER_METRICS_H_
#define SPINTUNE_TUNER_TUNER_METRICS_H_

#include <string>

#include "tuner/tuner_core.h"

namespace spintune {

std::string RenderPrometheusText(const TunerCounters& counters);

}  // namespace spintune

#endif  // SPINTUNE_TUNER_TUNER_METRICS_H_
