// LiveTrace: live capture from the running kernel. Owns a TracefsInstance
// with the events the correlator needs, and a reader thread that streams
// the instance's events through a TraceCorrelator into bounded queues of
// completion and dispatch events for the devices it was asked to measure:
// either trace_pipe text through ParseTraceLine (the text capture), or the
// binary per-CPU trace_pipe_raw pages through RawEventReader (the raw
// capture). Shared by the captures (agent/capture/) and the host probe.
//
// Thread-safety: all public methods may be called from any thread. The
// queues, stats and reader status are guarded by mu_ (an absl::Mutex; Take()
// waits on it with an absl::Condition); what is marked "reader thread only"
// is the reader thread's alone.
#ifndef SPINTUNE_AGENT_LIVE_TRACE_H_
#define SPINTUNE_AGENT_LIVE_TRACE_H_

#include <atomic>
#include <deque>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "agent/capture/raw/raw_event_reader.h"
#include "agent/trace/trace_correlator.h"
#include "agent/tracefs_instance.h"

namespace spintune {

// Wake latencies measured in windows. The sched events a wake latency needs
// (sched_switch, sched_waking) are about two thirds of the events a request
// makes here (docs/benchmarks.md, "Wake latencies in windows"); with
// windows they are on for `on` of every `every`, while completions and IRQs
// are traced all the time. `every` zero: always on.
struct WakeWindows {
  absl::Duration on = absl::ZeroDuration();
  absl::Duration every = absl::ZeroDuration();
  bool always() const { return every <= absl::ZeroDuration(); }
};
// "all", or "ON/EVERY" with absl durations ("1s/10s"); InvalidArgument
// naming `flag` otherwise (ON must be at least 100ms and below EVERY).
absl::StatusOr<WakeWindows> ParseWindows(absl::string_view text, absl::string_view flag);
inline absl::StatusOr<WakeWindows> ParseWakeWindows(absl::string_view text) {
  return ParseWindows(text, "--wake-windows");
}
// The start of the capture window `now` is in: capture windows start at
// multiples of `every` since the Unix epoch.
inline absl::Time WindowStart(absl::Time now, absl::Duration every) {
  return absl::UnixEpoch() + absl::Floor(now - absl::UnixEpoch(), every);
}

// When a capture with windows (CaptureConfig::windows) turns, whatever
// turns it (bpf attaches and detaches programs, raw and text enable and
// disable events): on in a window (from its start, or from construction);
// draining from the window's end (no new starts) for `drain`; off until
// the next window. A drain that runs into a window turns it on at once; a
// turn noticed after its window ended waits for the next. With always()
// windows it never turns. Not thread-safe: one caller.
class CaptureWindowTurns {
 public:
  enum class Turn { kNone, kPauseStarts, kStop, kResume };
  // On when `now` is in a window, else off (the caller stops what runs).
  CaptureWindowTurns(WakeWindows windows, absl::Duration drain, absl::Time now);
  // The turn due at `now` (kNone before next()), the phase moved past it.
  Turn Next(absl::Time now);
  // A kResume the caller could not carry out: off until the next window.
  void ResumeFailed(absl::Time now);
  bool off() const { return phase_ == Phase::kOff; }
  absl::Time next() const { return next_; }
  absl::Duration drain() const { return drain_; }

 private:
  enum class Phase { kOn, kDraining, kOff };
  WakeWindows windows_;
  absl::Duration drain_;
  Phase phase_ = Phase::kOn;
  absl::Time next_ = absl::InfiniteFuture();
};

// When one capture window's events were on, by CLOCK_MONOTONIC (the
// trace's clock), as the capture turned them (late when its thread ran
// late): each turn is bracketed by clock reads before (`_from`) and after
// (`_to`) its tracefs write or program attach. A request issued in
// [starts_on_to_ns, starts_off_from_ns) and ended before ends_off_from_ns
// is certainly the window's; none issued before starts_on_from_ns or after
// starts_off_to_ns, nor ended after ends_off_to_ns, can have been traced.
// UINT64_MAX: the turn has not come yet.
struct CaptureWindowSpan {
  uint64_t starts_on_from_ns = 0;
  uint64_t starts_on_to_ns = 0;
  uint64_t starts_off_from_ns = UINT64_MAX;
  uint64_t starts_off_to_ns = UINT64_MAX;
  uint64_t ends_off_from_ns = UINT64_MAX;
  uint64_t ends_off_to_ns = UINT64_MAX;
};

// A span of trace time in which the sched events were on: from `on_ns`
// (read after they were enabled) to `off_ns` (read before they were
// disabled; UINT64_MAX while they are on).
struct SchedSpan {
  uint64_t on_ns = 0;
  uint64_t off_ns = UINT64_MAX;
};
// Whether a dispatch sample was seen whole in one of `spans`: its IRQ came
// at least `wake_window_ns` after the span began and before it ended (so
// its issuer's sleep and its wake, up to the correlator's wake window, were
// traced), and its requests were issued within the span. The choice depends
// on the IRQ's time alone but for requests older than the window, so the
// kept samples are not biased towards short or long wakes.
bool DispatchSeenWhole(const DispatchEvent& d, const std::deque<SchedSpan>& spans,
                       uint64_t wake_window_ns);

struct LiveTraceStats {
  uint64_t bytes = 0;
  uint64_t lines = 0;
  uint64_t events = 0;
  uint64_t completions = 0;       // of the measured devices
  uint64_t dispatches = 0;        // attributed to a measured device
  uint64_t other_devices = 0;     // completions of devices not measured
  uint64_t lost_events = 0;       // the kernel's "[LOST n EVENTS]"
  uint64_t unparsed_lines = 0;
  uint64_t queue_overflow = 0;    // dropped because nobody drained the queue
  uint64_t dispatches_unseen = 0; // not seen whole in a wake window (WakeWindows)
  // Capture windows: ends whose start came while the start events were off
  // (before a window, in its first drain; or in the drain after it). The
  // correlator counts them in correlator.unpaired_ends.
  uint64_t window_edge_ends = 0;
  CorrelatorStats correlator;     // pairing counts (unpaired ends, evictions...)
};

class LiveTrace {
 public:
  // `devices`: block disk names ("vda"), MMC hosts ("mmc0"), SPI devices
  // ("spi0.0") and --pairs names to measure. FailedPrecondition without
  // root/tracefs (TracefsInstance::Open).
  // `raw`: read the binary per-CPU buffers instead of trace_pipe text.
  // `wakes`: when the sched events are on (dispatch samples come only from
  // those windows). `windows`: when any event is on (CaptureConfig::windows:
  // windows at multiples of `every` on the wall clock; the start events go
  // off at a window's end, the rest `drain` later, and all come on again,
  // the start events last, at the next window).
  static absl::StatusOr<std::unique_ptr<LiveTrace>> Start(const std::set<std::string>& devices,
                                                          CorrelatorOptions options,
                                                          bool raw = false,
                                                          WakeWindows wakes = {},
                                                          WakeWindows windows = {},
                                                          absl::Duration drain = absl::ZeroDuration());
  // Stops the reader and removes the tracing instance.
  ~LiveTrace();

  // Moves everything captured so far into the caller's queues, waiting up to
  // `timeout` for the first completion. Returns the completions moved.
  size_t Take(std::deque<CompletionEvent>* completions, std::deque<DispatchEvent>* dispatches,
              absl::Duration timeout);
  LiveTraceStats stats() const;
  // The last kMaxWindowSpans capture windows, oldest first (none without
  // capture windows).
  std::vector<CaptureWindowSpan> window_spans() const ABSL_LOCKS_EXCLUDED(mu_);
  static constexpr size_t kMaxWindowSpans = 64;
  // An error the reader thread stopped on (OK while it runs).
  absl::Status reader_status() const;
  const TracefsInstance& instance() const { return *instance_; }

  // Most completion events held before new ones are dropped.
  static constexpr size_t kMaxQueued = 1 << 18;
  // After draining trace_pipe the reader sleeps this long before reading
  // again (the per-CPU buffers hold seconds of events at 10k requests/s).
  static constexpr int kGatherMs = 50;

 private:
  LiveTrace() = default;
  void ReadLoop();
  void ReadRawLoop();
  // Parses and correlates trace_pipe text.
  void Consume(absl::string_view text);
  // Waits kGatherMs (less when a window turns sooner), or until the
  // destructor stops the reader.
  void Pause();
  // Turns the sched events on or off when a wake window begins or ends.
  void ToggleWakes();
  // Turns the events off and on at the capture windows' edges.
  void ToggleCapture();
  // Adds a turn made from `from_ns` to `to_ns` to window_spans_.
  void RecordTurn(CaptureWindowTurns::Turn turn, uint64_t from_ns, uint64_t to_ns)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Turns the sched events on or off as the wake and capture windows say.
  void ApplySched();
  // Feeds one record to the correlator, counting window edge ends.
  bool Correlate(const TraceRecord& r, LiveTraceStats* delta);
  // Queues what the correlator produced and adds `delta` to the stats.
  void Publish(LiveTraceStats delta) ABSL_LOCKS_EXCLUDED(mu_);
  void Fail(absl::Status status) ABSL_LOCKS_EXCLUDED(mu_);
  // Take() has something to return: a completion or the reader's error.
  bool Ready() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::set<std::string> devices_;
  std::unique_ptr<TracefsInstance> instance_;
  std::unique_ptr<TraceCorrelator> correlator_;  // reader thread only
  std::unique_ptr<RawEventReader> raw_;          // reader thread only (raw)
  std::string partial_;                          // reader thread only
  WakeWindows wakes_;
  uint64_t wake_window_ns_ = 0;
  std::vector<std::string> sched_events_;  // the enabled sched/* events
  std::deque<SchedSpan> spans_;            // reader thread only
  uint64_t next_toggle_ns_ = 0;            // reader thread only
  bool wake_on_ = true;                    // reader thread only: in a wake window
  // Capture windows (reader thread only): on (every event), draining (no
  // start events), off (none).
  CaptureWindowTurns turns_{WakeWindows{}, absl::ZeroDuration(), absl::InfinitePast()};
  std::vector<std::string> start_events_;  // the requests' start events
  std::vector<std::string> end_events_;    // the others but sched
  uint64_t edge_until_ns_ = 0;             // a window's first ends until then
  uint64_t starts_off_ns_ = UINT64_MAX;    // the start events went off then
  std::atomic<bool> stop_{false};
  absl::Notification stopping_;  // notified with stop_
  std::thread reader_;

  mutable absl::Mutex mu_;
  std::deque<CompletionEvent> completions_ ABSL_GUARDED_BY(mu_);
  std::deque<DispatchEvent> dispatches_ ABSL_GUARDED_BY(mu_);
  LiveTraceStats stats_ ABSL_GUARDED_BY(mu_);
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  std::deque<CaptureWindowSpan> window_spans_ ABSL_GUARDED_BY(mu_);
};

// The events (and block filters) a capture of `devices` needs, including
// the tracepoints of user-defined pairs. NotFound for a pair event this
// kernel lacks.
absl::StatusOr<TracefsOptions> CaptureOptions(const std::set<std::string>& devices,
                                              const std::vector<EventPair>& pairs);

// The block disks (with a device behind them: not loop, zram, dm), MMC hosts
// and SPI devices of this machine.
std::set<std::string> DiscoverDevices();
// Kernel driver and model of a discovered device, from sysfs ("" unknown).
std::string DeviceDriver(const std::string& device);
std::string DeviceModel(const std::string& device);
// The disk holding `path`'s file system ("vda" for "/" here); "" unknown.
std::string DiskOf(const std::string& path);
// The kernel's dev_t of block disk `disk` (major << 20 | minor, as the block
// tracepoints record it); 0 when it is not a block disk here.
uint32_t DiskDevT(const std::string& disk);

}  // namespace spintune

#endif  // SPINTUNE_AGENT_LIVE_TRACE_H_
