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

struct SampleSet {
  std::vector<KeyEvidence> keys;    // sorted by key
  std::vector<std::string> devices; // in order of first appearance
  std::vector<std::string> cpu_classes;
  uint64_t samples = 0;
  // Every row in file order, when the file has an issue_ns column; else
  // empty. Indexes keys and devices above.
  std::vector<TimedRequest> requests;
};

// InvalidArgument naming file and line for any bad value; NotFound when the
// file cannot be opened.
absl::StatusOr<SampleSet> ReadSamplesCsv(const std::string& path);

}  // namespace spintune

#endif  // SPINTUNE_POLICY_SAMPLES_CSV_H_
