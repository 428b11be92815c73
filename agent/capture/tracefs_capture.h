// TracefsCapture: the raw and text captures behind the Capture interface.
// Both run a LiveTrace on a tracing instance of their own and the replay
// correlator; they differ in what the reader reads: trace_pipe text (text,
// today's path) or the binary per-CPU trace_pipe_raw pages (raw).
//
// Thread-safety: as Capture (LiveTrace runs the reader thread).
#ifndef SPINTUNE_AGENT_CAPTURE_TRACEFS_CAPTURE_H_
#define SPINTUNE_AGENT_CAPTURE_TRACEFS_CAPTURE_H_

#include <memory>

#include "agent/capture/capture.h"
#include "agent/live_trace.h"

namespace spintune {

class TracefsCapture : public Capture {
 public:
  // FailedPrecondition without root or tracefs; NotFound for a --pairs
  // event this kernel lacks.
  static absl::StatusOr<std::unique_ptr<Capture>> Open(const CaptureConfig& config, bool raw);

  const char* mode() const override { return raw_ ? "raw" : "text"; }
  absl::Status Take(CaptureOutput* out, absl::Duration timeout) override;
  CaptureStats stats() const override;
  std::vector<CaptureWindowSpan> window_spans() const override { return live_->window_spans(); }

 private:
  TracefsCapture(std::unique_ptr<LiveTrace> live, bool raw) : live_(std::move(live)), raw_(raw) {}
  std::unique_ptr<LiveTrace> live_;
  bool raw_;
};

}  // namespace spintune

#endif  // SPINTUNE_AGENT_CAPTURE_TRACEFS_CAPTURE_H_
