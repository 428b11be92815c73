#include "agent/live_trace.h"

#include <dirent.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <fstream>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "agent/trace/trace_line.h"
#include "common/cpu_clock.h"
#include "common/file_util.h"
#include "common/logging.h"

namespace spintune {
namespace {

std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  while (struct dirent* e = ::readdir(d)) {
    if (e->d_name[0] != '.') out.push_back(e->d_name);
  }
  ::closedir(d);
  return out;
}

std::string ReadLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return std::string(absl::StripAsciiWhitespace(line));
}

std::string LinkBase(const std::string& path) {
  char target[PATH_MAX];
  const ssize_t n = ::readlink(path.c_str(), target, sizeof(target) - 1);
  if (n <= 0) return "";
  target[n] = '\0';
  const char* slash = std::strrchr(target, '/');
  return slash != nullptr ? slash + 1 : target;
}


// The sysfs directory of a device's hardware ("" when unknown).
std::string HardwareDir(const std::string& device) {
  for (const std::string& dir : {"/sys/block/" + device + "/device",
                                 "/sys/class/mmc_host/" + device + "/device",
                                 "/sys/bus/spi/devices/" + device}) {
    if (PathExists(dir)) return dir;
  }
  return "";
}

// "[LOST 123 EVENTS]" -> 123.
uint64_t LostCount(absl::string_view line) {
  const size_t at = line.find("[LOST ");
  if (at == absl::string_view::npos) return 0;
  absl::string_view rest = line.substr(at + 6);
  rest = rest.substr(0, rest.find(' '));
  uint64_t n = 0;
  return ParseNumber(rest, &n) ? n : 0;
}

}  // namespace

std::set<std::string> DiscoverDevices() {
  std::set<std::string> out;
  for (const auto& name : ListDir("/sys/block")) {
    // Disks without hardware behind them (loop, zram, dm, md) have no
    // "device" link; their requests are another disk's.
    if (PathExists("/sys/block/" + name + "/device")) out.insert(name);
  }
  for (const auto& name : ListDir("/sys/class/mmc_host")) out.insert(name);
  for (const auto& name : ListDir("/sys/bus/spi/devices")) out.insert(name);
  return out;
}

std::string DeviceDriver(const std::string& device) {
  const std::string hw = HardwareDir(device);
  if (hw.empty()) return "";
  std::string driver = LinkBase(hw + "/driver");
  if (driver.empty()) driver = LinkBase(hw + "/../driver");  // mmc hosts
  return driver;
}

std::string DeviceModel(const std::string& device) {
  const std::string hw = HardwareDir(device);
  if (hw.empty()) return "";
  for (const char* f : {"/model", "/name", "/modalias"}) {
    std::string v = ReadLine(hw + f);
    if (!v.empty()) return v;
  }
  return "";
}

std::string DiskOf(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return "";
  const std::string sys =
      absl::StrCat("/sys/dev/block/", major(st.st_dev), ":", minor(st.st_dev));
  if (!PathExists(sys)) return "";
  if (PathExists(sys + "/partition")) return LinkBase(sys + "/..");  // a partition's disk
  char target[PATH_MAX];
  if (::realpath(sys.c_str(), target) == nullptr) return "";
  const char* slash = std::strrchr(target, '/');
  return slash != nullptr ? slash + 1 : target;
}

uint32_t DiskDevT(const std::string& disk) {
  const std::string dev = ReadLine("/sys/block/" + disk + "/dev");  // "254:0"
  const size_t colon = dev.find(':');
  uint64_t major_num = 0, minor_num = 0;
  if (colon == std::string::npos || !ParseNumber(dev.substr(0, colon), &major_num) ||
      !ParseNumber(dev.substr(colon + 1), &minor_num)) {
    return 0;
  }
  return static_cast<uint32_t>((major_num << 20) | minor_num);
}

absl::StatusOr<WakeWindows> ParseWindows(absl::string_view text, absl::string_view flag) {
  WakeWindows w;
  if (text == "all") return w;
  const size_t slash = text.find('/');
  if (slash == absl::string_view::npos ||
      !absl::ParseDuration(std::string(text.substr(0, slash)), &w.on) ||
      !absl::ParseDuration(std::string(text.substr(slash + 1)), &w.every) ||
      w.on < absl::Milliseconds(100) || w.on >= w.every) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, " '", text, "': \"all\" or ON/EVERY (\"1s/10s\"), ON at least 100ms and below EVERY"));
  }
  return w;
}

CaptureWindowTurns::CaptureWindowTurns(WakeWindows windows, absl::Duration drain, absl::Time now)
    : windows_(windows), drain_(drain) {
  if (windows_.always()) return;
  const absl::Time start = WindowStart(now, windows_.every);
  if (now < start + windows_.on) {
    next_ = start + windows_.on;
  } else {
    phase_ = Phase::kOff;
    next_ = start + windows_.every;
  }
}

CaptureWindowTurns::Turn CaptureWindowTurns::Next(absl::Time now) {
  if (now < next_) return Turn::kNone;
  const absl::Time start = WindowStart(now, windows_.every);
  switch (phase_) {
    case Phase::kOn:
      phase_ = Phase::kDraining;
      next_ = now + drain_;
      return Turn::kPauseStarts;
    case Phase::kDraining:
      phase_ = Phase::kOff;
      next_ = now < start + windows_.on ? now : start + windows_.every;
      return Turn::kStop;
    case Phase::kOff:
      next_ = start + windows_.every;
      if (now >= start + windows_.on) return Turn::kNone;  // (this window is over)
      phase_ = Phase::kOn;
      next_ = start + windows_.on;
      return Turn::kResume;
  }
  return Turn::kNone;
}

void CaptureWindowTurns::ResumeFailed(absl::Time now) {
  phase_ = Phase::kOff;
  next_ = WindowStart(now, windows_.every) + windows_.every;
}

bool DispatchSeenWhole(const DispatchEvent& d, const std::deque<SchedSpan>& spans,
                       uint64_t wake_window_ns) {
  for (const auto& s : spans) {
    if (d.entry_ns >= s.on_ns + wake_window_ns && d.first_issue_ns >= s.on_ns &&
        (s.off_ns == UINT64_MAX || d.entry_ns + wake_window_ns <= s.off_ns)) {
      return true;
    }
  }
  return false;
}

absl::StatusOr<TracefsOptions> CaptureOptions(const std::set<std::string>& devices,
                                              const std::vector<EventPair>& pairs) {
  TracefsOptions t;
  t.required = {"irq/irq_handler_entry", "irq/irq_handler_exit", "sched/sched_switch",
                "sched/sched_waking"};
  std::vector<std::string> dev_filter;
  for (const auto& d : devices) {
    if (const uint32_t dev = DiskDevT(d); dev != 0) dev_filter.push_back(absl::StrCat("dev == ", dev));
  }
  if (!dev_filter.empty()) {
    for (const char* e : {"block/block_rq_issue", "block/block_rq_complete"}) t.required.push_back(e);
    t.events.push_back("block/block_rq_requeue");
    const std::string filter = absl::StrJoin(dev_filter, " || ");
    for (const char* e : {"block/block_rq_issue", "block/block_rq_complete", "block/block_rq_requeue"}) {
      t.filters.emplace_back(e, filter);
    }
  }
  bool mmc = false, spi = false;
  for (const auto& d : devices) {
    mmc |= absl::StartsWith(d, "mmc") && !absl::StartsWith(d, "mmcblk");
    spi |= absl::StartsWith(d, "spi");
  }
  if (mmc) {
    for (const char* e : {"mmc/mmc_request_start", "mmc/mmc_request_done"}) t.required.push_back(e);
  }
  if (spi) {
    for (const char* e : {"spi/spi_transfer_start", "spi/spi_transfer_stop", "spi/spi_message_start",
                          "spi/spi_message_done"}) {
      t.events.push_back(e);
    }
  }
  if (!pairs.empty()) {
    auto root = TracefsInstance::MountPoint();
    if (!root.ok()) return root.status();
    for (const auto& pair : pairs) {
      for (const auto& name : {pair.start_event, pair.end_event}) {
        std::string found;
        for (const auto& system : ListDir(*root + "/events")) {
          if (PathExists(absl::StrCat(*root, "/events/", system, "/", name, "/enable"))) {
            found = system + "/" + name;
            break;
          }
        }
        if (found.empty()) {
          return absl::NotFoundError(absl::StrCat("--pairs '", pair.name,
                                                  "': this kernel has no tracepoint ", name));
        }
        t.required.push_back(found);
      }
    }
  }
  return t;
}

absl::StatusOr<std::unique_ptr<LiveTrace>> LiveTrace::Start(const std::set<std::string>& devices,
                                                           CorrelatorOptions options, bool raw,
                                                           WakeWindows wakes, WakeWindows windows,
                                                           absl::Duration drain) {
  auto t = CaptureOptions(devices, options.pairs);
  if (!t.ok()) return t.status();
  t->open_trace_pipe = !raw;
  std::unique_ptr<LiveTrace> live(new LiveTrace());
  live->devices_ = devices;
  auto instance = TracefsInstance::Open(*t);
  if (!instance.ok()) return instance.status();
  live->instance_ = std::move(*instance);
  Logger().info("tracing instance {}: events {}", live->instance_->path(),
                absl::StrJoin(live->instance_->enabled_events(), ","));
  if (raw) {
    auto reader = RawEventReader::Open(live->instance_->root(), live->instance_->path(),
                                       live->instance_->enabled_events());
    if (!reader.ok()) return reader.status();
    live->raw_ = std::move(*reader);
  }
  if (!options.block_device_name) {
    auto cache = std::make_shared<std::map<std::pair<int, int>, std::string>>();
    options.block_device_name = [cache](int major_num, int minor_num) {
      auto [it, inserted] = cache->try_emplace({major_num, minor_num});
      if (inserted) it->second = BlockDeviceName(major_num, minor_num);
      return it->second;
    };
  }
  live->wakes_ = wakes;
  live->wake_window_ns_ = options.wake_window_ns;
  std::set<std::string> starts = {"block_rq_issue", "mmc_request_start", "spi_transfer_start",
                                  "spi_message_start"};
  for (const auto& p : options.pairs) starts.insert(p.start_event);
  for (const auto& e : live->instance_->enabled_events()) {
    if (absl::StartsWith(e, "sched/")) {
      live->sched_events_.push_back(e);
    } else if (starts.count(e.substr(e.find('/') + 1)) != 0) {
      live->start_events_.push_back(e);
    } else {
      live->end_events_.push_back(e);
    }
  }
  live->spans_.push_back({MonotonicNs(), UINT64_MAX});  // the events are on from the start
  live->next_toggle_ns_ = live->spans_.back().on_ns + absl::ToInt64Nanoseconds(wakes.on);
  if (!wakes.always()) {
    Logger().info("wake latencies in windows: sched events on for {} of every {}",
                  absl::FormatDuration(wakes.on), absl::FormatDuration(wakes.every));
  }
  live->turns_ = CaptureWindowTurns(windows, drain, absl::Now());
  if (!windows.always()) {
    if (!live->turns_.off()) {  // in a window: on since the instance was set up
      absl::MutexLock lock(&live->mu_);
      live->window_spans_.push_back({0, live->spans_.back().on_ns});
    }
    if (live->turns_.off()) {  // between windows: off until the next
      std::vector<std::string> all = live->start_events_;
      all.insert(all.end(), live->end_events_.begin(), live->end_events_.end());
      if (absl::Status st = live->instance_->SetEnabled(all, false); !st.ok()) return st;
      live->ApplySched();
    }
    Logger().info("capture windows: events on for {} of every {} (from each multiple of it on "
                  "the wall clock), completions followed for {} after",
                  absl::FormatDuration(windows.on), absl::FormatDuration(windows.every),
                  absl::FormatDuration(drain));
  }
  live->correlator_ = std::make_unique<TraceCorrelator>(std::move(options));
  live->reader_ = std::thread([p = live.get(), raw] { raw ? p->ReadRawLoop() : p->ReadLoop(); });
  return live;
}

LiveTrace::~LiveTrace() {
  stop_ = true;
  stopping_.Notify();  // ends the reader's pause
  if (reader_.joinable()) reader_.join();
  raw_.reset();       // closes its trace_pipe_raw files: the instance is busy while they are open
  instance_.reset();  // removes the tracing instance
}

void LiveTrace::ReadLoop() {
  std::vector<char> buffer(1 << 18);
  while (!stop_) {
    ToggleWakes();
    ToggleCapture();
    // trace_pipe hands out about a page per read: drain it, then pause.
    // It also wakes its reader on every event, and the reader's own
    // wake-ups are sched events: reading eagerly would feed on itself.
    // (Waking for a capture window's edge on time.)
    absl::Duration wait =
        std::max(absl::ZeroDuration(), std::min(absl::Milliseconds(100), turns_.next() - absl::Now()));
    size_t total = 0;
    while (!stop_) {
      if (total > 0) {  // (a long drain under load must not hold the windows' edges back)
        ToggleWakes();
        ToggleCapture();
      }
      auto n = instance_->Read(buffer.data(), buffer.size(), wait);
      if (!n.ok()) return Fail(n.status());
      if (*n == 0) break;
      Consume(absl::string_view(buffer.data(), *n));
      total += *n;
      wait = absl::ZeroDuration();
    }
    if (total == 0) continue;
    Pause();
  }
}

void LiveTrace::Pause() {
  // One wait, not a loop of short sleeps: every wake-up of the reader costs
  // a context switch (and, in a VM, an exit or two).
  const absl::Duration to_window = turns_.next() - absl::Now();
  stopping_.WaitForNotificationWithTimeout(
      std::max(absl::ZeroDuration(), std::min(absl::Milliseconds(kGatherMs), to_window)));
}

void LiveTrace::ToggleWakes() {
  if (wakes_.always() || sched_events_.empty()) return;
  const uint64_t now = MonotonicNs();
  if (now < next_toggle_ns_) return;
  wake_on_ = !wake_on_;
  next_toggle_ns_ = now + absl::ToInt64Nanoseconds(wake_on_ ? wakes_.on : wakes_.every - wakes_.on);
  ApplySched();
}

void LiveTrace::ApplySched() {
  if (sched_events_.empty()) return;
  const bool want = wake_on_ && !turns_.off();
  const bool on = spans_.back().off_ns == UINT64_MAX;
  if (want == on) return;
  if (on) spans_.back().off_ns = MonotonicNs();  // before the events stop
  if (absl::Status st = instance_->SetEnabled(sched_events_, want); !st.ok()) {
    // Left as they are: dispatch samples stop (off) or wait for the next
    // window (on); completions go on.
    Logger().warn("wake windows: {}", st.ToString());
  } else if (want) {
    spans_.push_back({MonotonicNs(), UINT64_MAX});  // after they started
    if (spans_.size() > 8) spans_.pop_front();  // older than any sample still held
  }
}

void LiveTrace::ToggleCapture() {
  absl::Status st;
  uint64_t from_ns = 0;
  const CaptureWindowTurns::Turn turn = turns_.Next(absl::Now());
  switch (turn) {
    case CaptureWindowTurns::Turn::kNone:
      return;
    case CaptureWindowTurns::Turn::kPauseStarts:
      starts_off_ns_ = from_ns = MonotonicNs();  // before: no end after it has its start
      st = instance_->SetEnabled(start_events_, false);
      break;
    case CaptureWindowTurns::Turn::kStop:
      from_ns = MonotonicNs();
      st = instance_->SetEnabled(end_events_, false);
      ApplySched();
      break;
    case CaptureWindowTurns::Turn::kResume:
      // The ends first: no request started in the window goes unseen.
      st = instance_->SetEnabled(end_events_, true);
      ApplySched();
      from_ns = MonotonicNs();
      if (st.ok()) st = instance_->SetEnabled(start_events_, true);
      starts_off_ns_ = UINT64_MAX;
      edge_until_ns_ = MonotonicNs() + absl::ToInt64Nanoseconds(turns_.drain());
      break;
  }
  if (!st.ok()) Logger().warn("capture windows: {}", st.ToString());
  RecordTurn(turn, from_ns, MonotonicNs());
}

void LiveTrace::RecordTurn(CaptureWindowTurns::Turn turn, uint64_t from_ns, uint64_t to_ns) {
  absl::MutexLock lock(&mu_);
  if (turn == CaptureWindowTurns::Turn::kResume || window_spans_.empty()) {
    window_spans_.push_back({from_ns, to_ns});
    if (window_spans_.size() > kMaxWindowSpans) window_spans_.pop_front();
    if (turn == CaptureWindowTurns::Turn::kResume) return;
  }
  CaptureWindowSpan& span = window_spans_.back();
  if (turn == CaptureWindowTurns::Turn::kPauseStarts) {
    span.starts_off_from_ns = from_ns;
    span.starts_off_to_ns = to_ns;
  } else if (turn == CaptureWindowTurns::Turn::kStop) {
    span.ends_off_from_ns = from_ns;
    span.ends_off_to_ns = to_ns;
  }
}

std::vector<CaptureWindowSpan> LiveTrace::window_spans() const {
  absl::MutexLock lock(&mu_);
  return {window_spans_.begin(), window_spans_.end()};
}

bool LiveTrace::Correlate(const TraceRecord& r, LiveTraceStats* delta) {
  const uint64_t unpaired = correlator_->stats().unpaired_ends;
  const bool parsed = correlator_->Process(r);
  if (correlator_->stats().unpaired_ends != unpaired &&
      (r.ts_ns < edge_until_ns_ || r.ts_ns >= starts_off_ns_)) {
    ++delta->window_edge_ends;  // started before the window, or after its start events
  }
  return parsed;
}

void LiveTrace::Fail(absl::Status status) {
  absl::MutexLock lock(&mu_);
  status_ = std::move(status);
}

void LiveTrace::ReadRawLoop() {
  // The binary buffers do not wake a reader per event: poll every kGatherMs.
  while (!stop_) {
    ToggleWakes();
    ToggleCapture();
    LiveTraceStats delta;
    const uint64_t lost_before = raw_->lost_events();
    const uint64_t events_before = raw_->events();
    auto n = raw_->Poll([&](const TraceRecord& r) {
      if (!Correlate(r, &delta)) ++delta.unparsed_lines;
    });
    if (!n.ok()) return Fail(n.status());
    delta.bytes = *n;
    delta.events = raw_->events() - events_before;
    delta.lines = delta.events;
    delta.lost_events = raw_->lost_events() - lost_before;
    Publish(delta);
    Pause();
  }
}

void LiveTrace::Consume(absl::string_view text) {
  LiveTraceStats delta;
  delta.bytes = text.size();
  auto process = [&](absl::string_view line) {
    ++delta.lines;
    TraceRecord record;
    switch (ParseTraceLine(line, &record)) {
      case LineKind::kEvent:
        ++delta.events;
        if (!Correlate(record, &delta)) ++delta.unparsed_lines;
        break;
      case LineKind::kLost:
        delta.lost_events += LostCount(line);
        break;
      case LineKind::kMalformed:
      case LineKind::kNotEvent:
        ++delta.unparsed_lines;
        break;
      default:
        break;
    }
  };
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    if (nl == absl::string_view::npos) {
      partial_.append(text.data(), text.size());
      break;
    }
    if (!partial_.empty()) {
      partial_.append(text.data(), nl);
      process(partial_);
      partial_.clear();
    } else {
      process(text.substr(0, nl));
    }
    text.remove_prefix(nl + 1);
  }
  Publish(delta);
}

void LiveTrace::Publish(LiveTraceStats delta) {
  auto& cs = correlator_->completions();
  auto& ds = correlator_->dispatches();
  absl::MutexLock lock(&mu_);
  for (auto& c : cs) {
    if (devices_.count(c.device) == 0) {
      ++delta.other_devices;
    } else if (completions_.size() >= kMaxQueued) {
      ++delta.queue_overflow;
    } else {
      ++delta.completions;
      completions_.push_back(std::move(c));
    }
  }
  for (auto& d : ds) {
    if (!wakes_.always() && !DispatchSeenWhole(d, spans_, wake_window_ns_)) {
      ++delta.dispatches_unseen;
      continue;
    }
    if (devices_.count(d.device) != 0 && dispatches_.size() < kMaxQueued) {
      ++delta.dispatches;
      dispatches_.push_back(std::move(d));
    }
  }
  cs.clear();
  ds.clear();
  stats_.bytes += delta.bytes;
  stats_.lines += delta.lines;
  stats_.events += delta.events;
  stats_.completions += delta.completions;
  stats_.dispatches += delta.dispatches;
  stats_.other_devices += delta.other_devices;
  stats_.lost_events += delta.lost_events;
  stats_.unparsed_lines += delta.unparsed_lines;
  stats_.queue_overflow += delta.queue_overflow;
  stats_.dispatches_unseen += delta.dispatches_unseen;
  stats_.window_edge_ends += delta.window_edge_ends;
  stats_.correlator = correlator_->stats();
}

bool LiveTrace::Ready() const { return !completions_.empty() || !status_.ok(); }

size_t LiveTrace::Take(std::deque<CompletionEvent>* completions,
                       std::deque<DispatchEvent>* dispatches, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(this, &LiveTrace::Ready), timeout);
  const size_t n = completions_.size();
  for (auto& c : completions_) completions->push_back(std::move(c));
  for (auto& d : dispatches_) dispatches->push_back(std::move(d));
  completions_.clear();
  dispatches_.clear();
  return n;
}

LiveTraceStats LiveTrace::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

absl::Status LiveTrace::reader_status() const {
  absl::MutexLock lock(&mu_);
  return status_;
}

}  // namespace spintune
