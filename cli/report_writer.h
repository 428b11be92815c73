// RenderHtmlReport: one self-contained HTML page (inline CSS and SVG, no
// scripts, nothing fetched at view time) that shows why a profile's table
// is what it is:
//   - at the top, a summary table of every entry sorted by expected saving
//     per request; then the platform costs the fit used;
//   - per key one chart of two panels: the completion-time CDF on a log
//     axis with the chosen threshold (and the driver default's) marked, and
//     the expected cost per request over thresholds for every strategy
//     family, with the chosen wait and the driver's default marked (a
//     default costing more than kDefaultAxisFactor times the best candidate
//     is left off the y axis and its cost stated in the legend and a note,
//     so it does not squash the curves that decide);
//   - per CPU class and device the IRQ handler and wake-up distributions
//     with the declared irq_cpu_ns / irq_wake_ns marked;
//   - the verifications of pushed versions against the driver's
//     measurements, when there are any.
//   - the knob settings in force, and a section per knob experiment.
// Curves are evaluated exactly (EvaluateWait) at thresholds drawn from the
// key's own samples; only the drawing thins them out.
//
// Pure function; thread-safe.
#ifndef SPINTUNE_CLI_REPORT_WRITER_H_
#define SPINTUNE_CLI_REPORT_WRITER_H_

#include <string>
#include <vector>

#include "cli/experiment_summary.h"
#include "storage/profile.h"
#include "storage/store.h"

namespace spintune {

// The cost panel's y axis reaches a driver default only when it costs at
// most this many times the cheapest candidate (IRQ, chosen, best families).
inline constexpr double kDefaultAxisFactor = 4;

struct ReportOptions {
  std::string title;         // default: "spintune report: <target>"
  std::string generated_at;  // RFC 3339
  std::string tool_version;
  // At most this many key charts (the keys with the most samples); 0: all.
  // Every key stays in the summary.
  size_t max_key_charts = 0;
  // Knob experiments of the target: one section each (cli/experiment_report.h).
  std::vector<ExperimentEvidence> experiments;
  // The target's verifications (tuner/verifier.h), shown after the platform
  // costs: per key and version, predicted against measured, the verdict and
  // any rollback.
  std::vector<VerificationRecord> verifications;
  // Where the profile's samples (keys, IRQ dispatch) come from, in words
  // ("today's samples of target 'b1'"; "": "the profile's samples"). When
  // they are not the samples the table was fitted on (IsFitEvidence(),
  // cli/report_evidence.h), the page says so above the summary, which then
  // lists both counts per entry ("fitted on" and "shown"); the header,
  // summary, key sections and charts all state the counts shown.
  std::string evidence_source;
};

std::string RenderHtmlReport(const Profile& profile, const ReportOptions& options);

}  // namespace spintune

#endif  // SPINTUNE_CLI_REPORT_WRITER_H_
