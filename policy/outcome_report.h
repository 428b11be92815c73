// OutcomeReport: a driver's own measurement of what its waits cost, per key,
// under one policy version (docs/verification.md, "Outcome report files"):
// the file `spintune-uring-ref --report` writes, `spintune verify` compares
// with a table's predictions and `spintune-agent --outcomes` sends to the
// tuner's verifier.
//
// Pure functions; thread-safe.
#ifndef SPINTUNE_POLICY_OUTCOME_REPORT_H_
#define SPINTUNE_POLICY_OUTCOME_REPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "models/cost_moments.h"
#include "policy/policy_table.h"

namespace spintune {

struct OutcomeReportKey {
  std::string cpu_class;  // "default" when the file names none
  uint32_t opcode = 0;
  uint32_t size_class = 0;
  uint64_t bytes = 0;
  // The arm of the version's A/B trial the requests took ("arm": "table" or
  // "incumbent"; absent: table).
  OutcomeArm arm = OutcomeArm::kTable;
  CostMoments moments;
};

struct OutcomeReport {
  std::string device;
  std::string mode;             // "table", "block", ... (free text, may be empty)
  uint64_t policy_version = 0;  // the version waited by; 0: the driver's default rule
  // each (cpu_class, opcode, size_class, arm) at most once
  std::vector<OutcomeReportKey> keys;
};

// Reads and validates a `spintune-outcomes` version 1 file. InvalidArgument
// naming the path and field for anything else: every number present,
// finite and >= 0, requests >= 1, size_class <= 64, opcode < 2^32 - 1, arm
// "table" or "incumbent" when present, no key and arm twice; NotFound / FailedPrecondition for unreadable files.
absl::StatusOr<OutcomeReport> ReadOutcomeReport(const std::string& path);

// spintune.ko knows a CPU class only by its index in the blob it was given,
// and names it "default" (index 0) or "classN" (index N, 1-3 digits) in its
// outcome reports. The blob's classes are `class_names` in order (a table's
// `cpu_classes`; an agent writes them in its Hello's order), so a report's
// class is the one of that name, else the kernel's index when it is within
// the list; -1 when neither.
int OutcomeCpuClassIndex(absl::string_view name, const std::vector<std::string>& class_names);

}  // namespace spintune

#endif  // SPINTUNE_POLICY_OUTCOME_REPORT_H_
