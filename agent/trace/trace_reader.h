// TraceReader: streams a trace text file (any size, constant memory)
// through ParseTraceLine and a TraceCorrelator, and keeps the report of the
// lines it could not use: counts by reason and the first few, with line
// numbers. Used by `spintune extract` and the agent's replay source.
//
// Thread-compatible.
#ifndef SPINTUNE_AGENT_TRACE_TRACE_READER_H_
#define SPINTUNE_AGENT_TRACE_TRACE_READER_H_

#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/trace/trace_correlator.h"

namespace spintune {

struct SkipReport {
  std::map<std::string, uint64_t> counts;                  // reason -> lines
  std::vector<std::pair<uint64_t, std::string>> examples;  // (line, "reason: text")
  // One line per reason, most frequent first, with examples.
  std::string Summary() const;
};

// Correlator options from the command-line flags shared by `spintune extract`
// and the agent's trace sources: `pairs_path` (--pairs, may be empty),
// `irq` ("DEVICE=IRQNAME" each), `block_names` ("MAJOR:MINOR=NAME" each;
// other block devices are named "MAJOR:MINOR"). InvalidArgument naming the
// flag for anything malformed.
absl::StatusOr<CorrelatorOptions> CorrelatorOptionsFromFlags(
    const std::string& pairs_path, const std::vector<std::string>& irq,
    const std::vector<std::string>& block_names);

class TraceReader {
 public:
  // NotFound when the file cannot be opened.
  static absl::StatusOr<std::unique_ptr<TraceReader>> Open(const std::string& path,
                                                           CorrelatorOptions options);
  ~TraceReader();

  // Reads until at least `want` completions are waiting or the file ends
  // (then it flushes the correlator). Returns false at the end of the file.
  absl::StatusOr<bool> ReadMore(size_t want);

  TraceCorrelator& correlator() { return correlator_; }
  const SkipReport& skipped() const { return skipped_; }
  uint64_t lines() const { return lines_; }
  uint64_t events() const { return events_; }
  uint64_t bytes_read() const { return bytes_read_; }
  const std::string& path() const { return path_; }
  // FailedPrecondition when the whole file gave neither completion nor
  // dispatch samples (call after the end of the file).
  absl::Status CheckUsable() const;

 private:
  TraceReader(std::string path, FILE* file, CorrelatorOptions options)
      : path_(std::move(path)), file_(file), correlator_(std::move(options)) {}
  void Skip(const char* reason, absl::string_view line);

  std::string path_;
  FILE* file_;
  TraceCorrelator correlator_;
  SkipReport skipped_;
  char* line_buf_ = nullptr;
  size_t line_cap_ = 0;
  uint64_t lines_ = 0, events_ = 0, bytes_read_ = 0;
  bool done_ = false;
};

}  // namespace spintune

#endif  // SPINTUNE_AGENT_TRACE_TRACE_READER_H_
