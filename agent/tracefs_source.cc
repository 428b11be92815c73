#include "agent/tracefs_source.h"

#include <sys/utsname.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/capture/histogram_batch.h"
#include "agent/host_probe.h"
#include "agent/live_trace.h"
#include "common/file_util.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "policy/policy_proto.h"

namespace spintune {

absl::StatusOr<std::unique_ptr<TracefsSource>> TracefsSource::Open(std::set<std::string> devices,
                                                                   const CpuClassInfo& cpu,
                                                                   uint64_t irq_overhead_cpu_ns,
                                                                   const std::string& board,
                                                                   CorrelatorOptions options,
                                                                   CaptureMode mode,
                                                                   uint32_t sample_every,
                                                                   WakeWindows wakes,
                                                                   WakeWindows windows,
                                                                   absl::Duration histogram_interval) {
  const std::set<std::string> present = DiscoverDevices();
  std::set<std::string> pair_names;
  for (const auto& p : options.pairs) pair_names.insert(p.name);
  if (devices.empty()) {
    devices = present;
    devices.insert(pair_names.begin(), pair_names.end());
  }
  for (const auto& d : devices) {
    // A disk without hardware behind it (loop, zram) is measured when named:
    // not discovered, but its requests are real block requests.
    if (present.count(d) == 0 && pair_names.count(d) == 0 &&
        !PathExists("/sys/block/" + d + "/dev")) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tracefs: no device '", d, "' on this machine (found: ", absl::StrJoin(present, ","),
          ")"));
    }
  }
  if (devices.empty()) return absl::InvalidArgumentError("tracefs: no devices to measure");
  std::unique_ptr<TracefsSource> s(new TracefsSource());
  auto* target = s->hello_.mutable_target();
  target->set_board(board);
  target->set_cpu_model(HostCpuModel());
  utsname u;
  if (uname(&u) == 0) target->set_kernel_release(u.release);
  auto* cpu_class = target->add_cpu_classes();
  CpuClassToProto(cpu, cpu_class);
  cpu_class->mutable_costs()->set_irq_overhead_cpu_ns(irq_overhead_cpu_ns);
  std::vector<std::string> names(devices.begin(), devices.end());
  for (const auto& d : names) {
    DeviceToProto({d, DeviceDriver(d), DeviceModel(d), {}}, s->hello_.add_devices());
  }
  s->batcher_ = std::make_unique<TraceBatcher>(names);
  for (const auto& d : names) s->device_index_.emplace(d, static_cast<uint32_t>(s->device_index_.size()));
  CaptureConfig config;
  config.devices = std::move(devices);
  config.correlator = std::move(options);
  config.sample_every = sample_every;
  config.wakes = wakes;
  config.windows = windows;
  config.histogram_interval = histogram_interval;
  s->histogram_interval_ = config.histogram_interval;
  SPINTUNE_ASSIGN_OR_RETURN(s->capture_, OpenCapture(mode, std::move(config)));
  // bpf aggregates in the kernel; its completions are the samples asked for.
  s->fold_ = !s->capture_->aggregates() && sample_every != 1;
  s->sample_every_ = sample_every;
  s->next_flush_ = absl::Now() + s->histogram_interval_;
  Logger().info("capture {}: measuring {}", s->capture_->mode(), absl::StrJoin(names, ","));
  const CaptureStats st = s->capture_->stats();
  if (!st.missing_tracepoints.empty()) {
    Logger().info("capture {}: this kernel has no tracepoint {} (skipped)", s->capture_->mode(),
                  absl::StrJoin(st.missing_tracepoints, ", "));
  }
  return s;
}

TracefsSource::~TracefsSource() {
  if (capture_ == nullptr) return;
  const CaptureStats st = capture_->stats();
  Logger().info(
      "capture {}: {} completions, {} dispatches ({} outside the wake windows), {} unpaired ends, "
      "{} lost, {} dropped",
      capture_->mode(), st.completions, st.dispatches, st.dispatches_unseen, st.unpaired_ends,
      st.lost_events, st.dropped + dropped_);
}

absl::StatusOr<size_t> TracefsSource::Fill(size_t max_completions, v1::SampleBatch* batch) {
  // Gather for up to 100 ms or until the batch is full: fewer, fuller
  // batches (each is one SQLite commit on the tuner). Histogram deltas come
  // once per interval and go out at once. A capture that works to a
  // schedule does what is due at once and has nothing more before its
  // quiet_until(): no waiting for it here, under the caller's lock.
  const absl::Time deadline = absl::Now() + absl::Milliseconds(100);
  while (pending_.completions.size() < max_completions && pending_.histograms.empty()) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) break;
    const bool scheduled = capture_->quiet_until() != absl::InfinitePast();
    SPINTUNE_RETURN_IF_ERROR(capture_->Take(&pending_, scheduled ? absl::ZeroDuration() : left));
    if (fold_) Fold();
    if (scheduled) break;
  }
  size_t n = batcher_->Drain(&pending_.completions, &pending_.dispatches, max_completions, batch);
  samples_kept_ = pending_.completions.size();
  n += AppendHistograms(pending_.histograms, pending_.dispatch_histograms, device_index_, batch,
                        &dropped_);
  pending_.histograms.clear();
  pending_.dispatch_histograms.clear();
  return n;
}

absl::Time TracefsSource::quiet_until() const {
  const bool empty = pending_.completions.empty() && pending_.dispatches.empty() &&
                     pending_.histograms.empty() && pending_.dispatch_histograms.empty();
  return empty ? capture_->quiet_until() : absl::InfinitePast();
}

void TracefsSource::EndInterval() {
  capture_->EndInterval();
  next_flush_ = absl::InfinitePast();
}

void TracefsSource::Fold() {
  std::deque<CompletionEvent>& c = pending_.completions;
  size_t kept = samples_kept_;
  for (size_t i = samples_kept_; i < c.size(); ++i) {
    if (sample_every_ != 0 && ++since_sample_ == sample_every_) {
      since_sample_ = 0;
      if (kept != i) c[kept] = std::move(c[i]);
      ++kept;
    } else {
      histograms_.Add(c[i]);
    }
  }
  c.resize(kept);
  samples_kept_ = kept;
  for (const DispatchEvent& d : pending_.dispatches) histograms_.Add(d);
  pending_.dispatches.clear();
  const absl::Time now = absl::Now();
  if (now < next_flush_) return;
  histograms_.Flush(&pending_.histograms, &pending_.dispatch_histograms);
  next_flush_ = now + histogram_interval_;
}

}  // namespace spintune
