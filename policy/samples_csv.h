// The completions CSV (docs/csv-formats.md): one codec that reads and writes
// it for `spintune tune`, the agent's csv: source, the agent's --record and
// `spintune extract --completions`; and ReadSamplesCsv, which aggregates a
// file into per-key evidence exactly as the tuner aggregates a SampleBatch,
// so `spintune tune` and the tuner fit the same table from the same samples.
//
// Required columns: device, opcode, bytes, wait_ns. Optional: cpu_class
// (default "default"), path (irq|spin|unknown), error (0|1), timeout (0|1),
// issue_ns (when the command was issued; in every row or in none), cpu (the
// CPU number a trace saw; informative). Extra columns are ignored.
//
// Thread-safety: a reader or writer is used by one thread.
#ifndef SPINTUNE_POLICY_SAMPLES_CSV_H_
#define SPINTUNE_POLICY_SAMPLES_CSV_H_

#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/csv_reader.h"
#include "policy/policy_builder.h"

namespace spintune {

// One completion sample: one row of the file.
struct CompletionRow {
  std::string device;                // 1..31 bytes
  uint32_t opcode = 0;               // 0..0xFFFFFFFE
  uint64_t bytes = 0;
  uint64_t wait_ns = 0;              // 0..LatencyHistogram::kMaxValueNs
  std::string cpu_class = "default";
  std::string path = "unknown";      // irq | spin | unknown
  bool error = false;
  bool timeout = false;
  std::optional<uint64_t> issue_ns;  // set in every row of a file with the column
  std::optional<uint64_t> cpu;       // set when the file has the column
};

class CompletionsCsvReader {
 public:
  // NotFound when the file cannot be opened; InvalidArgument (file:line)
  // for a missing required column.
  static absl::StatusOr<std::unique_ptr<CompletionsCsvReader>> Open(const std::string& path);

  // The next row, checked: InvalidArgument naming the file, line and column
  // for any bad value. False at the end of the file.
  absl::StatusOr<bool> Next(CompletionRow* row);

  bool has_issue_ns() const { return c_issue_ >= 0; }
  const std::string& name() const { return csv_->name(); }

 private:
  explicit CompletionsCsvReader(std::unique_ptr<CsvReader> csv);
  std::unique_ptr<CsvReader> csv_;
  std::vector<std::string> fields_;
  int c_device_, c_opcode_, c_bytes_, c_wait_, c_cpu_class_, c_path_, c_error_, c_timeout_,
      c_issue_, c_cpu_;
};

// Which optional columns a writer adds after the fixed ones (device, opcode,
// bytes, wait_ns, cpu_class, path, error, timeout).
struct CompletionsCsvColumns {
  bool issue_ns = false;
  bool cpu = false;
};

class CompletionsCsvWriter {
 public:
  // Creates (or truncates) `path` and writes the header. With `append`, an
  // existing file keeps its rows and must have this writer's header
  // (FailedPrecondition otherwise); a new or empty one gets the header.
  // NotFound when the file cannot be created.
  static absl::StatusOr<std::unique_ptr<CompletionsCsvWriter>> Open(
      const std::string& path, CompletionsCsvColumns columns, bool append = false);

  // REQUIRES: row.issue_ns is set when the column is (an unset cpu is
  // written empty).
  void Write(const CompletionRow& row);
  // Unavailable when a write since the last Flush failed.
  absl::Status Flush();

 private:
  CompletionsCsvWriter() = default;
  std::string path_;
  CompletionsCsvColumns columns_;
  std::ofstream out_;
};

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
