// Capture: one interface over the three ways the agent measures this
// machine's kernel for `--source tracefs[:DEVS]` (docs/traces.md):
//
//  - bpf:  a CO-RE BPF program pairs starts with completions in the kernel
//          and keeps per-CPU histograms per key; user space reads deltas
//          (agent/capture/bpf/). Optionally every Nth completion comes out
//          as an individual sample through a ring buffer.
//  - raw:  the binary per-CPU trace_pipe_raw pages of a tracing instance,
//          decoded with libtraceevent, fed to the replay correlator
//          (agent/capture/raw/, agent/capture/tracefs_capture.h).
//  - text: the instance's trace_pipe text through the same parser and
//          correlator as replay (agent/live_trace.h,
//          agent/capture/tracefs_capture.h).
//
// `auto` takes bpf where the kernel allows it (bpf() works, BTF at
// /sys/kernel/btf/vmlinux, the program loads), else raw, else text, and logs
// which and why. A tracepoint this kernel lacks is reported by name and
// skipped.
//
// Thread-safety: a Capture is used by one thread (it may run its own).
#ifndef SPINTUNE_AGENT_CAPTURE_CAPTURE_H_
#define SPINTUNE_AGENT_CAPTURE_CAPTURE_H_

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/live_trace.h"
#include "agent/trace/trace_correlator.h"

namespace spintune {

enum class CaptureMode { kAuto, kBpf, kRaw, kText };

// "auto", "bpf", "raw", "text"; InvalidArgument otherwise.
absl::StatusOr<CaptureMode> ParseCaptureMode(absl::string_view name);
const char* CaptureModeName(CaptureMode mode);

// Sparse histogram in the layout of models/latency_histogram.h.
struct BucketCounts {
  std::vector<std::pair<int, uint64_t>> buckets;  // (index, count), increasing index
  uint64_t count = 0;
  uint64_t sum_ns = 0;
};

// The non-zero counts of the dense `buckets` as sparse ones (sum_ns left
// 0), zeroing them; stops once `total` are taken (all of them when it is
// not known).
template <typename Count>
BucketCounts TakeBucketCounts(std::vector<Count>* buckets, uint64_t total = ~uint64_t{0}) {
  BucketCounts b;
  for (size_t i = 0; i < buckets->size() && b.count < total; ++i) {
    Count& n = (*buckets)[i];
    if (n == 0) continue;
    b.buckets.emplace_back(static_cast<int>(i), n);
    b.count += n;
    n = 0;
  }
  return b;
}

// One key's completions over an interval, aggregated in the kernel.
struct KeyHistogramDelta {
  std::string device;
  uint32_t opcode = 0;
  uint32_t size_class = 0;
  uint32_t cpu_class = 0;
  BucketCounts wait;
  uint64_t irq_path = 0;
  uint64_t spin_path = 0;
  uint64_t errors = 0;
};

// One (device, CPU class)'s IRQ dispatch times over an interval.
struct DispatchHistogramDelta {
  std::string device;
  uint32_t cpu_class = 0;
  BucketCounts handler;
  BucketCounts wake;
};

// What a capture hands over: individual samples (text, raw, bpf's ring
// buffer) and histogram deltas (bpf); every completion is in exactly one.
struct CaptureOutput {
  std::deque<CompletionEvent> completions;
  std::deque<DispatchEvent> dispatches;
  std::vector<KeyHistogramDelta> histograms;
  std::vector<DispatchHistogramDelta> dispatch_histograms;

  // Completions in samples and histograms.
  uint64_t CompletionCount() const;
};

struct CaptureStats {
  uint64_t completions = 0;       // of measured devices, samples and histograms
  uint64_t dispatches = 0;
  // raw and text: dispatch samples left out, not seen whole in a wake window
  uint64_t dispatches_unseen = 0;
  uint64_t lost_events = 0;       // the kernel dropped events or samples
  // Ends without their start: requests issued before the capture began, and
  // the block layer's data-less preflush writes that never reach the driver
  // (the kernel's /sys/block/*/stat counts them as writes).
  uint64_t unpaired_ends = 0;
  uint64_t dropped = 0;           // queue or map overflow
  // bpf: requests issued again while their last start was still pending:
  // completions the program never saw (the kernel did not run it for them).
  uint64_t unended_starts = 0;
  // bpf: a second completion program is attached, because a measured
  // device's completion may interrupt the first (NestedCompletionsPossible,
  // or the kernel skipped it).
  bool follows_nested_completions = false;
  uint64_t last_event_ns = 0;     // CLOCK_MONOTONIC of the last event counted above
  std::vector<std::string> missing_tracepoints;  // "system:event" this kernel lacks
};

class Capture {
 public:
  virtual ~Capture() = default;
  // "bpf", "raw" or "text".
  virtual const char* mode() const = 0;
  // True when the capture hands over histograms itself, once an interval
  // (bpf: the kernel aggregates); false when it hands over every completion
  // and dispatch (raw, text), which its caller folds.
  virtual bool aggregates() const { return false; }
  // Appends what was captured since the last call to `out`, waiting up to
  // `timeout` for something to hand over. Errors: the capture broke.
  virtual absl::Status Take(CaptureOutput* out, absl::Duration timeout) = 0;
  // A capture that works to a schedule (bpf without samples: a histogram
  // read each interval, the turns of its wake and capture windows, all done
  // in Take) hands over nothing before this time: its caller may wait until
  // then, and a Take before then need not wait. InfinitePast (the default)
  // for a capture that may hand over something at any moment. Same thread
  // as Take.
  virtual absl::Time quiet_until() const { return absl::InfinitePast(); }
  // The next Take hands over the histograms of the interval in progress
  // (a clean stop sends everything counted). Same thread as Take.
  virtual void EndInterval() {}
  virtual CaptureStats stats() const = 0;
  // With capture windows (CaptureConfig::windows): when the last windows'
  // events were on, as turned (LiveTrace::window_spans; raw and text).
  virtual std::vector<CaptureWindowSpan> window_spans() const { return {}; }
};

// What the kernel offers, for `auto`. Injectable so tests can force "no BTF"
// or "no bpf".
struct CaptureSupport {
  bool bpf_built = false;     // this agent was built with the BPF program
  bool bpf_syscall = false;   // bpf() works for us (not locked down, privileged)
  bool btf = false;           // /sys/kernel/btf/vmlinux is readable
  bool tracefs = false;       // a tracing instance can be made (root, tracefs)
  bool raw_pipe = false;      // per_cpu/cpu0/trace_pipe_raw exists
  std::string detail;         // why something is missing
};
using SupportProbe = std::function<CaptureSupport()>;
// The real probe of this machine.
CaptureSupport ProbeCaptureSupport();

struct CaptureConfig {
  // Block disks ("vda"), MMC hosts ("mmc0"), SPI devices ("spi0.0") and
  // --pairs names to measure.
  std::set<std::string> devices;
  CorrelatorOptions correlator;
  // bpf: every Nth completion per CPU goes through the ring buffer as an
  // individual sample instead of into the histograms (0: none, 1: all).
  uint32_t sample_every = 0;
  // bpf: how often the histograms are read.
  absl::Duration histogram_interval = absl::Seconds(1);
  // When wake latencies are measured: raw and text trace the sched events
  // then, bpf records waiters and attaches its sched_switch program then.
  WakeWindows wakes;
  // When the capture runs at all (--capture-windows): bpf's programs are
  // attached, raw's and text's events enabled, for `on` of every `every`,
  // the windows starting at multiples of `every` since the Unix epoch
  // (every agent's windows coincide, and a benchmark can line up with
  // them); only requests started in a window are measured, their
  // completions followed for CaptureDrain() after it. All the time when
  // always().
  WakeWindows windows;
};

// How long after a capture window the completions of its requests are
// still followed before everything stops: 200 ms, at most half the time
// between windows. Longer requests are lost (bpf counts their starts as
// unended later, raw and text as evicted).
inline absl::Duration CaptureDrain(const WakeWindows& windows) {
  return std::min(absl::Milliseconds(200), (windows.every - windows.on) / 2);
}

// Opens a capture. kAuto tries bpf, raw, text in that order (logging which
// one and why the others were passed over); a named mode fails with
// FailedPrecondition when the kernel does not allow it.
absl::StatusOr<std::unique_ptr<Capture>> OpenCapture(CaptureMode mode, CaptureConfig options,
                                                     const SupportProbe& probe = ProbeCaptureSupport);

}  // namespace spintune

#endif  // SPINTUNE_AGENT_CAPTURE_CAPTURE_H_
