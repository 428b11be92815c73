// ReplaySource: completion and dispatch samples from a captured trace text
// file (the kernel's trace / trace_pipe, trace-cmd report), streamed to the
// tuner as if measured live. Same parser and correlator as live capture and
// `spintune extract` (agent/trace/).
//
// The file is read twice: once to learn its devices for the hello (and to
// refuse a file without usable events before anything is sent), then to
// stream; memory stays constant either way. Platform costs come from a
// platform JSON (docs/csv-formats.md); the tuner refines irq_cpu_ns and
// irq_wake_ns from the trace's dispatch samples.
//
// Thread-safety: one thread.
#ifndef SPINTUNE_AGENT_REPLAY_SOURCE_H_
#define SPINTUNE_AGENT_REPLAY_SOURCE_H_

#include <memory>
#include <string>

#include "agent/sample_source.h"
#include "agent/trace/trace_batcher.h"
#include "agent/trace/trace_reader.h"

namespace spintune {

class ReplaySource : public SampleSource {
 public:
  // NotFound for a missing file; InvalidArgument for bad options;
  // FailedPrecondition when the trace has no usable events.
  static absl::StatusOr<std::unique_ptr<ReplaySource>> Open(const std::string& trace_path,
                                                            const SourceOptions& options);

  void Describe(v1::Hello* hello) const override { *hello = hello_; }
  absl::StatusOr<size_t> Fill(size_t max_completions, v1::SampleBatch* batch) override;
  bool exhausted() const override { return exhausted_; }

  // The first pass's report of lines it could not use.
  const SkipReport& skipped() const { return skipped_; }

 private:
  ReplaySource() = default;
  v1::Hello hello_;
  SkipReport skipped_;
  std::unique_ptr<TraceReader> reader_;
  std::unique_ptr<TraceBatcher> batcher_;
  bool exhausted_ = false;
  // Progress of pass 2, logged every 10% for traces of kProgressMinLines+.
  static constexpr uint64_t kProgressMinLines = 200'000;
  std::string path_;
  uint64_t total_lines_ = 0;
  uint64_t reported_tenths_ = 0;
};

}  // namespace spintune

#endif  // SPINTUNE_AGENT_REPLAY_SOURCE_H_
