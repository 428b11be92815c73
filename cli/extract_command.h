// `spintune extract`: completion and dispatch samples from a trace capture.
#ifndef SPINTUNE_CLI_EXTRACT_COMMAND_H_
#define SPINTUNE_CLI_EXTRACT_COMMAND_H_

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace spintune {

struct ExtractFlags {
  std::string trace;
  std::string pairs;               // JSON file of user-defined event pairs
  std::vector<std::string> irq;    // DEVICE=IRQNAME
  std::vector<std::string> block_dev;  // MAJOR:MINOR=NAME
  std::string completions_csv;     // policy/samples_csv.h, with issue_ns and cpu
  std::string dispatch_csv;        // cli/dispatch_csv.h
  bool summary = false;
  std::string format = "table";    // of the summary: table | json
  bool progress = false;           // progress lines on stderr
};

// InvalidArgument/NotFound for bad flags or files; FailedPrecondition when
// the trace has no usable events. The skip report goes to `err`.
absl::Status RunExtract(const ExtractFlags& flags, std::ostream& out, std::ostream& err);

}  // namespace spintune

#endif  // SPINTUNE_CLI_EXTRACT_COMMAND_H_
