// Reads completion samples from CSV (docs/csv-formats.md) into per-key
// evidence, aggregating exactly as the tuner aggregates a SampleBatch, so
// `spintune tune` and the tuner fit the same table from the same samples.
//
// Required columns: device, opcode, bytes, wait_ns. Optional: cpu_class
// (default "default"), path (irq|spin|unknown), error (0|1), timeout (0|1),
// issue_ns (when the command was issued; in every row or in none). Extra
// columns are ignored.
#ifndef SPINTUNE_POLICY_SAMPLES_CSV_H_
#define SPINTUNE_POLICY_SAMPLES_CSV_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "policy/policy_builder.h"

namespace spintune {

// One row of a file with issue times: what the context features of its
// key's samples are recomputed from (policy/context_fit.h).
struct TimedRequest {
  uint32_t key = 0;     // index into SampleSet::keys
  uint32_t device = 0;  // index into SampleSet::devices
  uint32_t opcode = 0;
  uint64_t bytes = 0;
  uint64_t issue_ns = 0;
  uint64_t wait_ns = 0;
};

struct SampleSet {
  std::vector<KeyEvidence> keys;    // sorted by key
  std::vector<std::string> devices; // in order of first appearance
  std::vector<std::string> cpu_classes;
  uint64_t samples = 0;
  // Every row in file order, when the file has an issue_ns column; else empty.
  std::vector<TimedRequest> requests;
};

// InvalidArgument naming file and line for any bad value; NotFound when the
// file cannot be opened.
absl::StatusOr<SampleSet> ReadSamplesCsv(const std::string& path);

}  // namespace spintune

#endif  // SPINTUNE_POLICY_SAMPLES_CSV_H_
