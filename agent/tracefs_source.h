// TracefsSource: live capture on this machine (`--source tracefs[:DEV,...]`).
// A Capture (agent/capture/capture.h: bpf, raw or text, `--capture`)
// measures the named devices (default: every disk with hardware behind it,
// MMC host and SPI device, see DiscoverDevices); Fill hands what it measures
// to the agent as histogram deltas, once a second: the bpf capture's
// in-kernel histograms, and the raw and text captures' samples folded into
// the same histograms here (CompletionHistograms). With `sample_every` N,
// every Nth completion goes as an individual sample instead (in columns;
// 1: all, with the dispatch samples too, as --record needs). The hello describes
// this host: CPU model, clock and kernel release, the devices' drivers and
// models, and the platform costs given (from --platform or the host probe).
//
// Thread-safety: one thread calls Fill; a capture may run its own thread.
#ifndef SPINTUNE_AGENT_TRACEFS_SOURCE_H_
#define SPINTUNE_AGENT_TRACEFS_SOURCE_H_

#include <map>
#include <memory>
#include <set>
#include <string>

#include "agent/capture/capture.h"
#include "agent/capture/completion_histograms.h"
#include "agent/sample_source.h"
#include "agent/trace/trace_batcher.h"
#include "policy/policy_table.h"

namespace spintune {

class TracefsSource : public SampleSource {
 public:
  // `devices` empty: all discovered. `irq_overhead_cpu_ns` (0: unknown) goes
  // to the hello beside `cpu`'s costs. Histograms go out once every
  // `histogram_interval` (CaptureConfig::histogram_interval). InvalidArgument for a device this
  // machine does not have; FailedPrecondition without root or tracefs.
  static absl::StatusOr<std::unique_ptr<TracefsSource>> Open(std::set<std::string> devices,
                                                             const CpuClassInfo& cpu,
                                                             uint64_t irq_overhead_cpu_ns,
                                                             const std::string& board,
                                                             CorrelatorOptions options,
                                                             CaptureMode mode = CaptureMode::kAuto,
                                                             uint32_t sample_every = 0,
                                                             WakeWindows wakes = {},
                                                             WakeWindows windows = {},
                                                             absl::Duration histogram_interval =
                                                                 absl::Seconds(1));

  // Logs what the capture counted (lost events, drops) on the way out.
  ~TracefsSource() override;

  void Describe(v1::Hello* hello) const override { *hello = hello_; }
  // Waits up to 100 ms for a full batch or the interval's histograms.
  absl::StatusOr<size_t> Fill(size_t max_completions, v1::SampleBatch* batch) override;
  bool exhausted() const override { return false; }
  bool live() const override { return true; }
  void EndInterval() override;
  absl::Time quiet_until() const override;

  CaptureStats stats() const { return capture_->stats(); }
  const char* capture_mode() const { return capture_->mode(); }

 private:
  TracefsSource() = default;
  // raw and text: moves the completions taken since the last call, but every
  // Nth, and all dispatch samples into histograms_; hands those over once
  // an interval.
  void Fold();

  v1::Hello hello_;
  std::unique_ptr<Capture> capture_;
  std::unique_ptr<TraceBatcher> batcher_;
  std::map<std::string, uint32_t> device_index_;
  CaptureOutput pending_;
  uint64_t dropped_ = 0;
  // raw and text (unless every completion goes as a sample): pending_'s
  // first `samples_kept_` completions stay samples; the rest were folded.
  bool fold_ = false;
  uint32_t sample_every_ = 0;
  uint32_t since_sample_ = 0;
  size_t samples_kept_ = 0;
  CompletionHistograms histograms_;
  absl::Duration histogram_interval_;
  absl::Time next_flush_;
};

}  // namespace spintune

#endif  // SPINTUNE_AGENT_TRACEFS_SOURCE_H_
