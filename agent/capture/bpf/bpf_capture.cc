#include "agent/capture/bpf/bpf_capture.h"

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <dirent.h>
#include <sys/mman.h>
#include <time.h>
#include <linux/types.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdarg>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "agent/capture/bpf/capture_abi.h"
#include "agent/capture/bpf/capture.skel.h"
#include "agent/capture/bpf/histogram_slot.h"
#include "agent/live_trace.h"
#include "common/cpu_clock.h"
#include "common/logging.h"
#include "models/latency_histogram.h"

namespace spintune {
namespace {

// The last lines libbpf printed, for the error message of a failed load.
std::mutex log_mu;
std::string last_libbpf_lines;

int LibbpfPrint(enum libbpf_print_level level, const char* format, va_list args) {
  char line[1024];
  vsnprintf(line, sizeof(line), format, args);
  std::string text = std::string(absl::StripTrailingAsciiWhitespace(line));
  if (level == LIBBPF_DEBUG) return 0;
  Logger().debug("libbpf: {}", text);
  std::lock_guard<std::mutex> lock(log_mu);
  last_libbpf_lines += text + "\n";
  if (last_libbpf_lines.size() > 4096) last_libbpf_lines.erase(0, last_libbpf_lines.size() - 4096);
  return 0;
}

std::string TakeLibbpfLines() {
  std::lock_guard<std::mutex> lock(log_mu);
  std::string s;
  s.swap(last_libbpf_lines);
  return std::string(absl::StripTrailingAsciiWhitespace(s));
}

// (kind, id) of a device name the program can measure.
absl::StatusOr<stc_device_key> DeviceKey(const std::string& name) {
  stc_device_key k{};
  uint32_t a = 0, b = 0;
  if (const uint32_t dev = DiskDevT(name); dev != 0) {
    k.kind = STC_DEV_BLOCK;
    k.id = dev;
    return k;
  }
  absl::string_view n = name;
  if (absl::ConsumePrefix(&n, "mmc") && absl::SimpleAtoi(n, &a)) {
    k.kind = STC_DEV_MMC;
    k.id = a;
    return k;
  }
  n = name;
  const size_t dot = n.find('.');
  if (absl::ConsumePrefix(&n, "spi") && dot != absl::string_view::npos &&
      absl::SimpleAtoi(n.substr(0, dot - 3), &a) && absl::SimpleAtoi(n.substr(dot - 2), &b)) {
    k.kind = STC_DEV_SPI;
    k.id = (a << 16) | b;
    return k;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("bpf capture: cannot measure '", name, "' (not a disk, MMC host or SPI device)"));
}

// Every CPU's histogram of a slot starts on a cache line: no two CPUs
// write one line.
static_assert(sizeof(stc_hist) % 64 == 0, "stc_hist is a whole number of cache lines");

// Clamps a reported sum into what the reported buckets allow (a map read
// races with the program: a sample may be in the sum but not yet in its
// bucket); the rest is reported with the next delta.
uint64_t ClampSum(const BucketCounts& b, uint64_t sum_ns) {
  // Saturating at 2^64 - 1 (no 128-bit integers on 32-bit boards): a
  // bound that large cannot be below or above a 64-bit sum anyway.
  constexpr uint64_t kMax = ~uint64_t{0};
  auto add_product = [](uint64_t acc, uint64_t value, uint64_t n) {
    if (n != 0 && value > (kMax - acc) / n) return kMax;
    return acc + value * n;
  };
  uint64_t low = 0, high = 0;
  for (const auto& [index, n] : b.buckets) {
    low = add_product(low, LatencyHistogram::BucketLowerNs(index), n);
    high = add_product(high, LatencyHistogram::BucketUpperNs(index), n);
  }
  if (sum_ns < low) return low;
  if (sum_ns > high && high != kMax) return high;
  return sum_ns;
}

// The runs of `prog` the kernel skipped because it was running on that CPU
// already (an interrupt in the middle of it); 0 when it cannot tell.
uint64_t RecursionMisses(const bpf_program* prog) {
  if (bpf_program__fd(prog) < 0) return 0;
  bpf_prog_info info;
  std::memset(&info, 0, sizeof(info));
  uint32_t len = sizeof(info);
  if (bpf_obj_get_info_by_fd(bpf_program__fd(prog), &info, &len) != 0) return 0;
  return info.recursion_misses;
}

// One program of the capture: its link in the skeleton, its tracepoint,
// and the kind of device it is for (0: every kind).
struct Program {
  bpf_program* prog;
  bpf_link** link;
  const char* system;
  const char* event;
  uint32_t device_kind;
};

// Every program, in the order AttachInOrder attaches them: one where no
// program sees state half made. The IRQ and softirq exits come before
// their entries (an entry whose exit was not attached yet would leave its
// CPU "in interrupt"), those before every program that reads the CPU's
// context, sched_switch before the completions that record waiters for
// it, and every end before its start (no start recorded whose end is
// missed). The skeleton's own attach goes in declaration order.
constexpr size_t kProgramCount = sizeof(spintune_capture::links) / sizeof(bpf_link*);
std::array<Program, kProgramCount> Programs(spintune_capture* s) {
#define STC_PROGRAM(name, system, event, kind) Program{s->progs.name, &s->links.name, system, event, kind}
  return {
      STC_PROGRAM(stc_irq_exit, "irq", "irq_handler_exit", 0),
      STC_PROGRAM(stc_softirq_exit, "irq", "softirq_exit", 0),
      STC_PROGRAM(stc_irq_entry, "irq", "irq_handler_entry", 0),
      STC_PROGRAM(stc_softirq_entry, "irq", "softirq_entry", 0),
      STC_PROGRAM(stc_switch, "sched", "sched_switch", 0),
      STC_PROGRAM(stc_rq_complete, "block", "block_rq_complete", 0),
      STC_PROGRAM(stc_rq_complete_nested, "block", "block_rq_complete", 0),
      STC_PROGRAM(stc_rq_requeue, "block", "block_rq_requeue", 0),
      STC_PROGRAM(stc_mmc_done, "mmc", "mmc_request_done", STC_DEV_MMC),
      STC_PROGRAM(stc_spi_xfer_stop, "spi", "spi_transfer_stop", STC_DEV_SPI),
      STC_PROGRAM(stc_spi_msg_done, "spi", "spi_message_done", STC_DEV_SPI),
      STC_PROGRAM(stc_rq_issue, "block", "block_rq_issue", 0),
      STC_PROGRAM(stc_mmc_start, "mmc", "mmc_request_start", STC_DEV_MMC),
      STC_PROGRAM(stc_spi_xfer_start, "spi", "spi_transfer_start", STC_DEV_SPI),
      STC_PROGRAM(stc_spi_msg_start, "spi", "spi_message_start", STC_DEV_SPI),
  };
#undef STC_PROGRAM
}

// Attaches the loaded programs that are to attach (autoload and
// autoattach, not attached yet) in the order of Programs(). 0 or a
// negative errno; on failure what attached stays attached (the caller
// detaches).
int AttachInOrder(spintune_capture* s) {
  for (const Program& p : Programs(s)) {
    if (*p.link != nullptr || !bpf_program__autoload(p.prog) || !bpf_program__autoattach(p.prog)) {
      continue;
    }
    *p.link = bpf_program__attach(p.prog);
    if (*p.link == nullptr) return -errno;
  }
  return 0;
}

class BpfCapture : public Capture {
 public:
  ~BpfCapture() override {
    if (ring_ != nullptr) ring_buffer__free(ring_);
    if (hists_ != nullptr) ::munmap(const_cast<stc_hist*>(hists_), hists_bytes_);
    if (skel_ != nullptr) spintune_capture__destroy(skel_);  // detaches everything
  }

  const char* mode() const override { return "bpf"; }
  bool aggregates() const override { return true; }
  absl::Status Take(CaptureOutput* out, absl::Duration timeout) override;
  void EndInterval() override { next_read_ = absl::InfinitePast(); }
  absl::Time quiet_until() const override {
    if (ring_ != nullptr) return absl::InfinitePast();  // samples come at any time
    return NextWork();
  }
  CaptureStats stats() const override;

  static absl::StatusOr<std::unique_ptr<Capture>> Open(const CaptureConfig& options,
                                                       const BpfCaptureTestOptions& test);

 private:
  BpfCapture() = default;
  // The next histogram read or window turn (Take does them).
  absl::Time NextWork() const { return std::min({next_read_, next_toggle_, turns_.next()}); }
  static int OnSample(void* ctx, void* data, size_t size);
  void ReadHistograms(CaptureOutput* out);
  // Attaches stc_rq_complete_nested (now, or with the next capture window)
  // once a measured completion may interrupt stc_rq_complete or the kernel
  // skipped it; logs why.
  void FollowNestedCompletionsIfNeeded();
  // --wake-windows: pauses or resumes the recording of waiters, and
  // detaches or attaches stc_switch, when `now` reaches next_toggle_.
  void ToggleWakes(absl::Time now);
  // --capture-windows: pauses the starts, detaches every program after the
  // drain, or attaches them again, as turns_ says at `now`.
  void ToggleCapture(absl::Time now);
  // Attaches every program (stc_switch only in a wake window) and resumes
  // the starts; false (logged) when the kernel refused one.
  bool AttachForWindow();

  // What was reported so far of one histogram slot: deltas are taken
  // against it.
  struct Slot {
    Slot(const stc_slot_key& k, int cpus) : key(k), seen(static_cast<size_t>(cpus)) {}
    stc_slot_key key;
    HistogramSlot seen;  // its histograms as last read
    uint64_t sum_ns = 0, irq_path = 0, spin_path = 0, errors = 0;  // reported, over the CPUs
  };

  spintune_capture* skel_ = nullptr;
  ring_buffer* ring_ = nullptr;
  int ncpus_ = 1;
  uint32_t slot_count_ = STC_SLOTS_PER_DEVICE;  // histogram slots (hists: this x ncpus_)
  const stc_hist* hists_ = nullptr;             // the hists map, mapped read-only
  size_t hists_bytes_ = 0;
  bool warned_full_ = false;                    // said once that a key found no slot
  bool follows_nested_ = false;                 // stc_rq_complete_nested is wanted
  bool nested_attach_failed_ = false;           // attaching it failed (logged once)
  std::vector<std::string> device_names_;
  std::vector<std::string> missing_;
  absl::Duration interval_;
  absl::Time next_read_;
  CaptureOutput* sink_ = nullptr;  // Take's output while the ring is polled
  // Wake windows: on (waiters recorded, stc_switch attached), draining
  // (no new waiters; stc_switch attached until the last recorded one is
  // past the wake window, so no wake is cut short), off (detached).
  enum class WakePhase { kOn, kDraining, kOff };
  WakeWindows wakes_;
  WakePhase wake_phase_ = WakePhase::kOn;
  absl::Duration wake_window_;
  absl::Time window_began_;
  absl::Time next_toggle_ = absl::InfiniteFuture();
  // Capture windows: on (attached, starts recorded), draining (no new
  // starts; attached until the drain's end), off (detached).
  CaptureWindowTurns turns_{WakeWindows{}, absl::ZeroDuration(), absl::InfinitePast()};
  std::map<uint32_t, Slot> slots_;     // by slot index
  uint64_t ring_samples_ = 0;
};

void BpfCapture::ReadHistograms(CaptureOutput* out) {
  // The slots handed out since the last read (a few per device).
  const int owner_fd = bpf_map__fd(skel_->maps.slot_owner);
  uint32_t owned = 0, next = 0;
  for (const uint32_t* cursor = nullptr; bpf_map_get_next_key(owner_fd, cursor, &next) == 0;
       cursor = &owned) {
    owned = next;
    stc_slot_key key{};
    if (owned >= slot_count_ || slots_.count(owned) != 0 ||
        bpf_map_lookup_elem(owner_fd, &owned, &key) != 0) {
      continue;
    }
    slots_.try_emplace(owned, key, ncpus_);
  }
  if (!warned_full_) {
    // A key found no slot (the programs count only that as STC_MAP_FULL).
    const uint32_t full = STC_MAP_FULL;
    std::vector<uint64_t> counts(static_cast<size_t>(ncpus_));
    if (bpf_map_lookup_elem(bpf_map__fd(skel_->maps.counters), &full, counts.data()) == 0 &&
        std::any_of(counts.begin(), counts.end(), [](uint64_t n) { return n > 0; })) {
      warned_full_ = true;
      Logger().warn("bpf capture: all {} histogram slots are taken ({} per device); completions "
                    "of further keys are counted as dropped (use --capture raw for them)",
                    slot_count_, STC_SLOTS_PER_DEVICE);
    }
  }
  std::map<std::pair<uint32_t, uint32_t>, DispatchHistogramDelta> dispatch;
  std::vector<uint64_t> deltas(STC_BUCKET_COUNT, 0);  // one slot's, zeroed as taken
  for (auto& [index, slot] : slots_) {
    const stc_slot_key& k = slot.key;
    if (k.device >= device_names_.size()) continue;
    bool moved = false;
    const HistogramSlot::Totals now = slot.seen.Read(
        hists_ + stc_hist_index(index, 0, static_cast<uint32_t>(ncpus_)), &deltas, &moved);
    if (!moved) continue;
    BucketCounts counts = TakeBucketCounts(&deltas);
    if (counts.count == 0) continue;
    counts.sum_ns = ClampSum(counts, now.sum_ns - slot.sum_ns);
    slot.sum_ns += counts.sum_ns;
    if (k.family == STC_FAMILY_WAIT) {
      auto take = [](uint64_t total, uint64_t* seen, uint64_t cap) -> uint64_t {
        const uint64_t v = std::min<uint64_t>(total > *seen ? total - *seen : 0, cap);
        *seen += v;
        return v;
      };
      KeyHistogramDelta d;
      d.device = device_names_[k.device];
      d.opcode = k.opcode;
      d.size_class = k.size_class;
      d.cpu_class = k.cpu_class;
      d.irq_path = take(now.irq_path, &slot.irq_path, counts.count);
      d.spin_path = take(now.spin_path, &slot.spin_path, counts.count - d.irq_path);
      d.errors = take(now.errors, &slot.errors, counts.count);
      d.wait = std::move(counts);
      out->histograms.push_back(std::move(d));
    } else {
      DispatchHistogramDelta& d = dispatch[{k.device, k.cpu_class}];
      d.device = device_names_[k.device];
      d.cpu_class = k.cpu_class;
      (k.family == STC_FAMILY_WAKE ? d.wake : d.handler) = std::move(counts);
    }
  }
  for (auto& [key, d] : dispatch) out->dispatch_histograms.push_back(std::move(d));
}

void BpfCapture::FollowNestedCompletionsIfNeeded() {
  if (follows_nested_) return;
  const uint32_t all = skel_->bss->completion_contexts_all;
  const uint32_t measured = skel_->bss->completion_contexts_measured;
  const uint64_t skipped = RecursionMisses(skel_->progs.stc_rq_complete);
  if (!NestedCompletionsPossible(all, measured) && skipped == 0) return;
  auto names = [](uint32_t bits) {
    std::vector<const char*> n;
    if (bits & STC_CTX_TASK) n.push_back("task");
    if (bits & STC_CTX_SOFTIRQ) n.push_back("softirq");
    if (bits & STC_CTX_HARDIRQ) n.push_back("hard IRQ");
    return absl::StrJoin(n, ", ");
  };
  bpf_program* nested = skel_->progs.stc_rq_complete_nested;
  bpf_program__set_autoattach(nested, true);  // and with every capture window
  follows_nested_ = true;
  if (!nested_attach_failed_) {
    Logger().info("bpf capture: block completions ran in {} (measured devices' in {}), {} skipped "
                  "while the completion program ran: attaching stc_rq_complete_nested, which "
                  "takes a completion that interrupts another (at the cost of a program run per "
                  "completion)",
                  names(all), names(measured), skipped);
  }
  if (skel_->links.stc_rq_complete == nullptr) return;  // between capture windows
  skel_->links.stc_rq_complete_nested = bpf_program__attach(nested);
  if (skel_->links.stc_rq_complete_nested == nullptr) {
    // Said once; the retries at each read only at debug level.
    const std::string why = absl::StrCat(std::strerror(errno), ": ", TakeLibbpfLines());
    if (!nested_attach_failed_) {
      Logger().warn("bpf capture: attaching stc_rq_complete_nested failed ({}); trying again at "
                    "each read",
                    why);
    } else {
      Logger().debug("bpf capture: attaching stc_rq_complete_nested failed again ({})", why);
    }
    bpf_program__set_autoattach(nested, false);
    follows_nested_ = false;
    nested_attach_failed_ = true;
  }
}

int BpfCapture::OnSample(void* ctx, void* data, size_t size) {
  auto* self = static_cast<BpfCapture*>(ctx);
  if (size < sizeof(stc_sample) || self->sink_ == nullptr) return 0;
  stc_sample s;
  std::memcpy(&s, data, sizeof(s));
  if (s.device >= self->device_names_.size()) return 0;
  CompletionEvent c;
  c.device = self->device_names_[s.device];
  c.opcode = s.opcode;
  c.bytes = s.bytes;
  c.wait_ns = s.wait_ns;
  c.path = s.path == STC_PATH_IRQ ? TracePath::kIrq
           : s.path == STC_PATH_SPIN ? TracePath::kSpin
                                     : TracePath::kUnknown;
  c.error = s.error != 0;
  c.cpu = s.cpu;
  c.end_ns = s.end_ns;
  self->sink_->completions.push_back(std::move(c));
  ++self->ring_samples_;
  return 0;
}

void BpfCapture::ToggleWakes(absl::Time now) {
  if (now < next_toggle_) return;
  switch (wake_phase_) {
    case WakePhase::kOn:
      skel_->bss->wakes_paused = 1;
      wake_phase_ = WakePhase::kDraining;
      next_toggle_ = now + wake_window_;
      break;
    case WakePhase::kDraining:
      bpf_link__destroy(skel_->links.stc_switch);
      skel_->links.stc_switch = nullptr;
      wake_phase_ = WakePhase::kOff;
      next_toggle_ = std::max(now, window_began_ + wakes_.every);
      break;
    case WakePhase::kOff:
      // Attached before waiters are recorded again: every one recorded
      // sees its switch in. (Outside a capture window the window's attach
      // does it.)
      if (!turns_.off()) skel_->links.stc_switch = bpf_program__attach(skel_->progs.stc_switch);
      if (!turns_.off() && skel_->links.stc_switch == nullptr) {
        Logger().warn("bpf capture: attaching stc_switch for a wake window failed ({}); wake "
                      "latencies wait for the next window",
                      std::strerror(errno));
        window_began_ = now;
        next_toggle_ = now + wakes_.every;
        break;
      }
      skel_->bss->wakes_paused = 0;
      wake_phase_ = WakePhase::kOn;
      window_began_ = now;
      next_toggle_ = now + wakes_.on;
      break;
  }
}

bool BpfCapture::AttachForWindow() {
  // An IRQ or softirq the programs saw enter but not leave before they
  // were detached would hold its CPU "in interrupt" for good.
  // (An array indexed by CPU, one irq_state each.)
  std::vector<uint8_t> zeros(bpf_map__value_size(skel_->maps.irq_last), 0);
  const int irq_fd = bpf_map__fd(skel_->maps.irq_last);
  for (uint32_t cpu = 0; cpu < static_cast<uint32_t>(ncpus_); ++cpu) {
    bpf_map_update_elem(irq_fd, &cpu, zeros.data(), BPF_ANY);
  }
  // Every program before the first start: none sees half a request.
  if (int err = AttachInOrder(skel_); err != 0) {
    Logger().warn("bpf capture: attaching for a capture window failed ({}: {}); trying again at "
                  "the next window",
                  std::strerror(-err), TakeLibbpfLines());
    spintune_capture__detach(skel_);
    return false;
  }
  if (wake_phase_ == WakePhase::kOff) {
    bpf_link__destroy(skel_->links.stc_switch);
    skel_->links.stc_switch = nullptr;
  }
  // Ends of requests started while detached are not unpaired
  // (CLOCK_MONOTONIC: bpf_ktime_get_ns()'s clock).
  skel_->bss->unpaired_from_ns = MonotonicNs() + absl::ToInt64Nanoseconds(turns_.drain());
  skel_->bss->starts_paused = 0;
  return true;
}

void BpfCapture::ToggleCapture(absl::Time now) {
  switch (turns_.Next(now)) {
    case CaptureWindowTurns::Turn::kNone:
      return;
    case CaptureWindowTurns::Turn::kPauseStarts:
      skel_->bss->starts_paused = 1;
      skel_->bss->unpaired_from_ns = ~uint64_t{0};
      return;
    case CaptureWindowTurns::Turn::kStop:
      spintune_capture__detach(skel_);
      return;
    case CaptureWindowTurns::Turn::kResume:
      if (!AttachForWindow()) turns_.ResumeFailed(now);
      return;
  }
}

absl::Status BpfCapture::Take(CaptureOutput* out, absl::Duration timeout) {
  const absl::Time now = absl::Now();
  ToggleWakes(now);
  ToggleCapture(now);
  const absl::Time until = std::min(now + timeout, NextWork());
  if (ring_ != nullptr) {
    sink_ = out;
    // Rounded up: a poll of 0 ms would spin until `until`.
    const int ms = static_cast<int>(
        std::max<int64_t>(0, absl::ToInt64Milliseconds(absl::Ceil(until - now, absl::Milliseconds(1)))));
    // The program wakes the poll only once the ring is a quarter full (a
    // wakeup per sample would cost microseconds in the I/O path): the poll
    // mostly times out, and what came meanwhile is read after it.
    int n = ring_buffer__poll(ring_, ms);
    if (n >= 0 || n == -EINTR) n = ring_buffer__consume(ring_);
    sink_ = nullptr;
    if (n < 0 && n != -EINTR) {
      return absl::UnavailableError(absl::StrCat("bpf ring buffer: ", std::strerror(-n)));
    }
  } else if (until > now) {
    std::this_thread::sleep_for(absl::ToChronoNanoseconds(until - now));
  }
  if (absl::Now() >= next_read_) {
    ReadHistograms(out);
    FollowNestedCompletionsIfNeeded();
    next_read_ = absl::Now() + interval_;
  }
  return absl::OkStatus();
}

CaptureStats BpfCapture::stats() const {
  std::vector<uint64_t> values(static_cast<size_t>(ncpus_));
  uint64_t c[STC_COUNTER_COUNT] = {0};
  for (uint32_t i = 0; i < STC_COUNTER_COUNT; ++i) {
    if (bpf_map_lookup_elem(bpf_map__fd(skel_->maps.counters), &i, values.data()) != 0) continue;
    for (uint64_t v : values) c[i] += v;
  }
  // A program the kernel did not run because it was already running on
  // that CPU (an interrupt in the middle of it) missed an event.
  uint64_t misses = 0;
  bpf_program* prog;
  bpf_object__for_each_program(prog, skel_->obj) {
    const uint64_t n = RecursionMisses(prog);
    if (prog == skel_->progs.stc_rq_complete) {
      // stc_rq_complete_nested took those it saw the flag for (once it is
      // attached); the rest came just before the flag was set or just
      // after it was cleared. (Before it is attached the kernel's count
      // may include other devices' completions.)
      misses += n > c[STC_NESTED] ? n - c[STC_NESTED] : 0;
    } else {
      misses += n;
    }
  }
  CaptureStats s;
  s.completions = c[STC_COMPLETIONS];
  s.dispatches = c[STC_DISPATCHES];
  s.lost_events = c[STC_RING_LOST] + misses;
  s.unpaired_ends = c[STC_UNPAIRED_ENDS];
  s.dropped = c[STC_MAP_FULL];
  s.unended_starts = c[STC_UNENDED];
  s.follows_nested_completions = follows_nested_;
  s.missing_tracepoints = missing_;
  s.last_event_ns = MonotonicNs();  // the counters are current
  return s;
}

absl::StatusOr<std::unique_ptr<Capture>> BpfCapture::Open(const CaptureConfig& options,
                                                          const BpfCaptureTestOptions& test) {
  const uint32_t direct_slots = test.direct_slots != 0 ? test.direct_slots : STC_DIRECT_SLOTS;
  if (!options.correlator.pairs.empty()) {
    return absl::FailedPreconditionError(
        "bpf capture cannot follow --pairs events (vendor tracepoints); use --capture raw");
  }
  std::vector<stc_device_key> keys;
  std::unique_ptr<BpfCapture> c(new BpfCapture());
  for (const auto& d : options.devices) {
    auto k = DeviceKey(d);
    if (!k.ok()) return k.status();
    keys.push_back(*k);
    c->device_names_.push_back(d);
  }
  if (keys.empty() || keys.size() > STC_MAX_DEVICES) {
    return absl::InvalidArgumentError(
        absl::StrCat("bpf capture measures 1..", STC_MAX_DEVICES, " devices"));
  }
  libbpf_set_print(LibbpfPrint);
  TakeLibbpfLines();
  c->skel_ = spintune_capture__open();
  if (c->skel_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("bpf capture: cannot open the program: ", TakeLibbpfLines()));
  }
  spintune_capture* s = c->skel_;
  s->rodata->irq_window_ns = options.correlator.irq_window_ns;
  s->rodata->wake_window_ns = options.correlator.wake_window_ns;
  s->rodata->sample_every = options.sample_every;
  s->rodata->have_declared_irqs = !options.correlator.irq_device.empty();
  s->rodata->device_count = static_cast<uint32_t>(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    s->rodata->device_keys[i].kind = keys[i].kind;
    s->rodata->device_keys[i].id = keys[i].id;
  }
  c->ncpus_ = libbpf_num_possible_cpus();
  if (c->ncpus_ <= 0) return absl::FailedPreconditionError("bpf capture: cannot count the CPUs");
  bpf_map__set_max_entries(s->maps.cpu_class, static_cast<uint32_t>(c->ncpus_));
  bpf_map__set_max_entries(s->maps.irq_last, static_cast<uint32_t>(c->ncpus_));
  s->rodata->direct_mask = direct_slots - 1;
  bpf_map__set_max_entries(s->maps.direct, direct_slots);
  // Histogram slots: enough for every key of one device's CPU classes,
  // opcodes and size classes, per device (each ~18 KiB per CPU, preallocated).
  c->slot_count_ = STC_SLOTS_PER_DEVICE * static_cast<uint32_t>(keys.size());
  s->rodata->slot_count = c->slot_count_;
  s->rodata->hist_cpus = static_cast<uint32_t>(c->ncpus_);
  bpf_map__set_max_entries(s->maps.hists, c->slot_count_ * static_cast<uint32_t>(c->ncpus_));
  bpf_map__set_max_entries(s->maps.slot_of, c->slot_count_);
  bpf_map__set_max_entries(s->maps.slot_owner, c->slot_count_);
  if (options.sample_every == 0) bpf_map__set_max_entries(s->maps.samples, 4096);
  s->rodata->ring_wakeup_bytes = bpf_map__max_entries(s->maps.samples) / 4;

  std::set<uint32_t> kinds;
  for (const auto& k : keys) kinds.insert(k.kind);
  std::set<std::string> events;
  for (const Program& p : Programs(s)) events.insert(p.event);
  const std::set<std::string> absent = MissingBtfTracepoints(events);
  for (const Program& p : Programs(s)) {
    const bool present = absent.count(p.event) == 0;
    const std::string name = absl::StrCat(p.system, ":", p.event);
    if (!present && std::find(c->missing_.begin(), c->missing_.end(), name) == c->missing_.end()) {
      c->missing_.push_back(name);
    }
    bpf_program__set_autoload(p.prog, present && (p.device_kind == 0 || kinds.count(p.device_kind)));
  }
  if (int err = spintune_capture__load(s); err != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "bpf capture: loading the program failed (", std::strerror(-err), "): ", TakeLibbpfLines()));
  }
  // The histograms are read in place (HistogramSlot), not copied out.
  c->hists_bytes_ = static_cast<size_t>(bpf_map__max_entries(s->maps.hists)) * sizeof(stc_hist);
  void* mapped = ::mmap(nullptr, c->hists_bytes_, PROT_READ, MAP_SHARED, bpf_map__fd(s->maps.hists), 0);
  if (mapped == MAP_FAILED) {
    return absl::FailedPreconditionError(
        absl::StrCat("bpf capture: mapping the histograms: ", std::strerror(errno)));
  }
  c->hists_ = static_cast<const stc_hist*>(mapped);
  std::map<std::string, uint32_t> index_of;
  for (size_t i = 0; i < c->device_names_.size(); ++i) index_of[c->device_names_[i]] = static_cast<uint32_t>(i);
  for (const auto& [irq_name, device] : options.correlator.irq_device) {
    auto it = index_of.find(device);
    if (it == index_of.end()) continue;
    char name[STC_IRQ_NAME_LEN] = {0};
    std::strncpy(name, irq_name.c_str(), sizeof(name) - 1);
    const uint32_t dev1 = it->second + 1;
    bpf_map_update_elem(bpf_map__fd(s->maps.irq_declared), name, &dev1, BPF_ANY);
  }
  // (Attached when completions can nest: FollowNestedCompletionsIfNeeded.)
  bpf_program__set_autoattach(s->progs.stc_rq_complete_nested, false);
  s->bss->completion_contexts_measured = test.measured_contexts;
  if (int err = AttachInOrder(s); err != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "bpf capture: attaching failed (", std::strerror(-err), "): ", TakeLibbpfLines()));
  }
  if (options.sample_every > 0) {
    c->ring_ = ring_buffer__new(bpf_map__fd(s->maps.samples), &BpfCapture::OnSample, c.get(), nullptr);
    if (c->ring_ == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("bpf capture: ring buffer: ", std::strerror(errno)));
    }
  }
  c->interval_ = options.histogram_interval;
  c->next_read_ = absl::Now() + c->interval_;
  c->wakes_ = options.wakes;
  c->wake_window_ = absl::Nanoseconds(options.correlator.wake_window_ns);
  c->turns_ = CaptureWindowTurns(options.windows, CaptureDrain(options.windows), absl::Now());
  if (!options.windows.always()) {
    if (c->turns_.off()) {  // between windows: detached until the next
      s->bss->starts_paused = 1;  // (AttachForWindow lets them in once all is attached)
      spintune_capture__detach(s);
    }
    Logger().info("capture windows: the programs attached for {} of every {} (from each "
                  "multiple of it on the wall clock), completions followed for {} after",
                  absl::FormatDuration(options.windows.on), absl::FormatDuration(options.windows.every),
                  absl::FormatDuration(c->turns_.drain()));
  }
  c->window_began_ = absl::Now();  // the first window: from the start
  if (!c->wakes_.always() && c->skel_->links.stc_switch != nullptr) {
    c->next_toggle_ = c->window_began_ + c->wakes_.on;
    Logger().info("wake latencies in windows: stc_switch attached for {} of every {}",
                  absl::FormatDuration(c->wakes_.on), absl::FormatDuration(c->wakes_.every));
  }
  return std::unique_ptr<Capture>(std::move(c));
}

}  // namespace

bool BpfCaptureBuilt() { return true; }

std::set<std::string> MissingBtfTracepoints(const std::set<std::string>& events) {
  std::set<std::string> missing = events;
  btf* vmlinux = btf__load_vmlinux_btf();
  if (vmlinux == nullptr) return missing;
  auto look = [&missing](const btf* b) {
    for (auto it = missing.begin(); it != missing.end();) {
      const std::string type = "btf_trace_" + *it;
      it = btf__find_by_name_kind(b, type.c_str(), BTF_KIND_TYPEDEF) > 0 ? missing.erase(it)
                                                                         : std::next(it);
    }
  };
  look(vmlinux);
  // Tracepoints of modules (mmc_core, spi) are in the modules' BTF.
  if (DIR* d = missing.empty() ? nullptr : ::opendir("/sys/kernel/btf")) {
    while (struct dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name == "." || name == ".." || name == "vmlinux") continue;
      btf* mod = btf__parse_split(("/sys/kernel/btf/" + name).c_str(), vmlinux);
      if (mod == nullptr) continue;
      look(mod);
      btf__free(mod);
      if (missing.empty()) break;
    }
    ::closedir(d);
  }
  btf__free(vmlinux);
  return missing;
}

absl::StatusOr<std::unique_ptr<Capture>> OpenBpfCapture(const CaptureConfig& options) {
  return BpfCapture::Open(options, BpfCaptureTestOptions{});
}

absl::StatusOr<std::unique_ptr<Capture>> OpenBpfCaptureForTest(const CaptureConfig& options,
                                                               const BpfCaptureTestOptions& test) {
  return BpfCapture::Open(options, test);
}

}  // namespace spintune
