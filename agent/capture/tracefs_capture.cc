#include "agent/capture/tracefs_capture.h"

#include "absl/strings/str_replace.h"
#include "common/status_macros.h"

namespace spintune {

absl::StatusOr<std::unique_ptr<Capture>> TracefsCapture::Open(const CaptureConfig& config,
                                                              bool raw) {
  SPINTUNE_ASSIGN_OR_RETURN(auto live, LiveTrace::Start(config.devices, config.correlator, raw,
                                                        config.wakes, config.windows,
                                                        CaptureDrain(config.windows)));
  return std::unique_ptr<Capture>(new TracefsCapture(std::move(live), raw));
}

absl::Status TracefsCapture::Take(CaptureOutput* out, absl::Duration timeout) {
  live_->Take(&out->completions, &out->dispatches, timeout);
  return live_->reader_status();
}

CaptureStats TracefsCapture::stats() const {
  const LiveTraceStats s = live_->stats();
  CaptureStats c;
  c.completions = s.completions;
  c.dispatches = s.dispatches;
  c.dispatches_unseen = s.dispatches_unseen;
  c.lost_events = s.lost_events;
  c.unpaired_ends =
      s.correlator.unpaired_ends + s.correlator.flush_sequence_ends - s.window_edge_ends;
  c.last_event_ns = s.correlator.last_ts_ns;
  c.dropped = s.queue_overflow + s.correlator.evicted;
  for (const auto& e : live_->instance().missing_events()) {
    c.missing_tracepoints.push_back(absl::StrReplaceAll(e, {{"/", ":"}}));
  }
  return c;
}

}  // namespace spintune
