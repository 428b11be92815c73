// TracefsSource: live capture on this machine (`--source tracefs[:DEV,...]`).
// A LiveTrace measures the named devices (default: every disk with hardware
// behind it, MMC host and SPI device, see DiscoverDevices); Fill hands its
// samples to the agent as they arrive. The hello describes this host: CPU
// model, clock and kernel release, the devices' drivers and models, and the
// platform costs given (from --platform or the host probe).
//
// Thread-safety: one thread calls Fill; the capture runs on LiveTrace's.
#ifndef SPINTUNE_AGENT_TRACEFS_SOURCE_H_
#define SPINTUNE_AGENT_TRACEFS_SOURCE_H_

#include <deque>
#include <memory>
#include <set>
#include <string>

#include "agent/live_trace.h"
#include "agent/sample_source.h"
#include "agent/trace/trace_batcher.h"
#include "policy/policy_table.h"

namespace spintune {

class TracefsSource : public SampleSource {
 public:
  // `devices` empty: all discovered. `irq_overhead_cpu_ns` (0: unknown) goes
  // to the hello beside `cpu`'s costs. InvalidArgument for a device this
  // machine does not have; FailedPrecondition without root or tracefs.
  static absl::StatusOr<std::unique_ptr<TracefsSource>> Open(std::set<std::string> devices,
                                                             const CpuClassInfo& cpu,
                                                             uint64_t irq_overhead_cpu_ns,
                                                             const std::string& board,
                                                             CorrelatorOptions options);

  void Describe(v1::Hello* hello) const override { *hello = hello_; }
  // Waits up to 100 ms for a full batch.
  absl::StatusOr<size_t> Fill(size_t max_completions, v1::SampleBatch* batch) override;
  bool exhausted() const override { return false; }
  bool live() const override { return true; }

  LiveTraceStats stats() const { return live_->stats(); }

 private:
  TracefsSource() = default;
  v1::Hello hello_;
  std::unique_ptr<LiveTrace> live_;
  std::unique_ptr<TraceBatcher> batcher_;
  std::deque<CompletionEvent> completions_;
  std::deque<DispatchEvent> dispatches_;
};

}  // namespace spintune

#endif  // SPINTUNE_AGENT_TRACEFS_SOURCE_H_
