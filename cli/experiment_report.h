// The report's section for one knob experiment: its conclusion and
// declaration, a chart of the metric per setting with 95% intervals (the
// best settings, the start and the one left on; a dashed line at the
// start's mean), a chart of every trial in order (search, confirmation,
// failures), and the per-setting table. Inline SVG, no scripts.
//
// Pure function; thread-safe.
#ifndef SPINTUNE_CLI_EXPERIMENT_REPORT_H_
#define SPINTUNE_CLI_EXPERIMENT_REPORT_H_

#include <string>

#include "cli/experiment_summary.h"

namespace spintune {

// At most `max_settings` settings are charted and listed (the start, the
// best and the one left on always are).
std::string RenderExperimentSection(const ExperimentEvidence& e, size_t max_settings = 24);

}  // namespace spintune

#endif  // SPINTUNE_CLI_EXPERIMENT_REPORT_H_
