#include "agent/capture/raw/raw_event_reader.h"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

extern "C" {
#include <traceevent/event-parse.h>
#include <traceevent/kbuffer.h>
// From <tracefs/tracefs.h>, which does not compile as C++ (an enum default
// argument): loads the format files of `sys_names` under `tracing_dir`.
struct tep_handle* tracefs_local_events_system(const char* tracing_dir,
                                               const char* const* sys_names);
}

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/cpu_clock.h"

namespace spintune {
namespace {

// common_flags bits (kernel/trace/trace.h, stable since 2.6).
constexpr unsigned kFlagHardirq = 0x08;
constexpr unsigned kFlagSoftirq = 0x10;
constexpr unsigned kFlagNmi = 0x40;

// Field names of RawEventReader::FieldId, in its order.
constexpr const char* kFieldNames[] = {
    "dev", "rwbs", "bytes", "sector", "nr_sector", "error", "irq", "name", "ret", "pid",
    "prev_pid", "prev_state", "next_pid", "mrq", "cmd_opcode", "blocks", "blksz", "blk_addr",
    "data_flags", "tag", "cmd_err", "stop_err", "sbc_err", "data_err", "bus_num", "chip_select",
    "xfer", "len", "msg", "actual", "frame",
};

// Events are held until every CPU was read past them.
constexpr uint64_t kWatermarkSlackNs = 1'000'000;

}  // namespace

absl::StatusOr<std::unique_ptr<RawEventReader>> RawEventReader::Open(
    const std::string& tracing_root, const std::string& instance_path,
    const std::vector<std::string>& events) {
  std::unique_ptr<RawEventReader> r(new RawEventReader());
  std::set<std::string> systems;
  for (const auto& e : events) systems.insert(e.substr(0, e.find('/')));
  std::vector<const char*> names;
  for (const auto& s : systems) names.push_back(s.c_str());
  names.push_back(nullptr);
  r->tep_ = tracefs_local_events_system(tracing_root.c_str(), names.data());
  if (r->tep_ == nullptr) {
    return absl::UnavailableError(absl::StrCat("raw capture: cannot read the event formats under ",
                                               tracing_root, "/events"));
  }
  const bool little = tep_is_local_bigendian(r->tep_) == 0;
  r->kbuf_ = kbuffer_alloc(sizeof(long) == 8 ? KBUFFER_LSIZE_8 : KBUFFER_LSIZE_4,
                           little ? KBUFFER_ENDIAN_LITTLE : KBUFFER_ENDIAN_BIG);
  if (r->kbuf_ == nullptr) return absl::ResourceExhaustedError("raw capture: kbuffer");
  static const std::pair<const char*, Kind> kKinds[] = {
      {"block_rq_issue", Kind::kBlockIssue},        {"block_rq_complete", Kind::kBlockComplete},
      {"block_rq_requeue", Kind::kBlockRequeue},    {"irq_handler_entry", Kind::kIrqEntry},
      {"irq_handler_exit", Kind::kIrqExit},         {"sched_waking", Kind::kWaking},
      {"sched_wakeup", Kind::kWaking},              {"sched_switch", Kind::kSwitch},
      {"mmc_request_start", Kind::kMmcStart},       {"mmc_request_done", Kind::kMmcDone},
      {"spi_transfer_start", Kind::kSpiXferStart},  {"spi_transfer_stop", Kind::kSpiXferStop},
      {"spi_message_start", Kind::kSpiMsgStart},    {"spi_message_done", Kind::kSpiMsgDone},
  };
  static_assert(sizeof(kFieldNames) / sizeof(kFieldNames[0]) == kFieldCount);
  bool common = false;
  for (const auto& e : events) {
    const size_t slash = e.find('/');
    const std::string system = e.substr(0, slash), name = e.substr(slash + 1);
    tep_event* ev = tep_find_event_by_name(r->tep_, system.c_str(), name.c_str());
    if (ev == nullptr) continue;  // the instance reports missing events itself
    EventInfo info;
    info.name = name;
    for (const auto& [n, k] : kKinds) {
      if (name == n) info.kind = k;
    }
    for (int common_fields = 0; common_fields < 2; ++common_fields) {
      tep_format_field** list = common_fields ? tep_event_common_fields(ev) : tep_event_fields(ev);
      if (list == nullptr) continue;
      for (int i = 0; list[i] != nullptr; ++i) {
        Field f;
        f.offset = list[i]->offset;
        f.size = list[i]->size;
        f.dynamic = (list[i]->flags & TEP_FIELD_IS_DYNAMIC) != 0;
        const std::string field_name = list[i]->name;
        for (int id = 0; id < kFieldCount; ++id) {
          if (field_name == kFieldNames[id]) info.by_id[id] = f;
        }
        if (common_fields && !common) {
          if (field_name == "common_type") r->common_type_offset_ = f.offset;
          if (field_name == "common_flags") r->common_flags_ = f;
          if (field_name == "common_pid") r->common_pid_ = f;
        }
        if (!common_fields) info.fields.emplace_back(field_name, f);
      }
      free(list);
    }
    common = true;
    r->events_by_id_.emplace(ev->id, std::move(info));
  }
  const int cpus = static_cast<int>(::sysconf(_SC_NPROCESSORS_CONF));
  for (int cpu = 0; cpu < cpus; ++cpu) {
    const std::string path = absl::StrCat(instance_path, "/per_cpu/cpu", cpu, "/trace_pipe_raw");
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENOENT) continue;  // a CPU that is not possible
      return absl::UnavailableError(absl::StrCat(path, ": ", std::strerror(errno)));
    }
    r->fds_.push_back(fd);
  }
  if (r->fds_.empty()) return absl::UnavailableError("raw capture: no per-CPU trace_pipe_raw");
  r->page_.resize(static_cast<size_t>(std::max<long>(::getpagesize(), 4096)));
  return r;
}

RawEventReader::~RawEventReader() {
  for (int fd : fds_) ::close(fd);
  if (kbuf_ != nullptr) kbuffer_free(kbuf_);
  if (tep_ != nullptr) tep_free(tep_);
}

const std::string& RawEventReader::TaskOf(int pid) {
  auto it = comm_.find(pid);
  if (it != comm_.end()) return it->second;
  if (comm_.size() > 4096) comm_.clear();
  std::ifstream in(absl::StrCat("/proc/", pid, "/comm"));
  std::string name;
  std::getline(in, name);
  return comm_.emplace(pid, name).first->second;
}

absl::StatusOr<size_t> RawEventReader::Poll(const std::function<void(const TraceRecord&)>& each) {
  const uint64_t watermark = MonotonicNs() - kWatermarkSlackNs;
  size_t bytes = 0;
  run_ends_.assign(1, held_.size());  // the events held from the last poll: one run
  for (size_t cpu = 0; cpu < fds_.size(); ++cpu) {
    while (true) {
      const ssize_t n = ::read(fds_[cpu], page_.data(), page_.size());
      if (n < 0) {
        if (errno == EAGAIN || errno == EINTR) break;
        return absl::UnavailableError(absl::StrCat("read trace_pipe_raw: ", std::strerror(errno)));
      }
      if (n == 0) break;
      bytes += static_cast<size_t>(n);
      if (kbuffer_load_subbuffer(kbuf_, page_.data()) < 0) continue;
      const int missed = kbuffer_missed_events(kbuf_);
      if (missed != 0) lost_events_ += missed > 0 ? static_cast<uint64_t>(missed) : 1;
      unsigned long long ts = 0;
      for (void* data = kbuffer_read_event(kbuf_, &ts); data != nullptr;
           data = kbuffer_next_event(kbuf_, &ts)) {
        const int size = kbuffer_event_size(kbuf_);
        if (size <= 0) continue;
        const size_t at = arena_.size();
        arena_.insert(arena_.end(), static_cast<unsigned char*>(data),
                      static_cast<unsigned char*>(data) + size);
        held_.push_back({ts, static_cast<int>(cpu), at, static_cast<size_t>(size)});
      }
    }
    run_ends_.push_back(held_.size());  // this CPU's run
  }
  // Every CPU was read after `watermark`: what is older can no longer be
  // overtaken by an event still in a buffer.
  SortHeld();
  size_t done = 0;
  while (done < held_.size() && held_[done].ts_ns <= watermark) {
    Decode(held_[done], each);
    ++done;
  }
  if (done > 0) {
    // The events still held move to the front of held_ and into the spare
    // arena, which becomes the arena: both keep their capacity, so a steady
    // load stops allocating (a fresh vector per poll regrew to a round's
    // events every time).
    spare_arena_.clear();
    size_t kept = 0;
    for (size_t i = done; i < held_.size(); ++i) {
      Held h = held_[i];
      const size_t at = spare_arena_.size();
      spare_arena_.insert(spare_arena_.end(),
                          arena_.begin() + static_cast<std::ptrdiff_t>(h.offset),
                          arena_.begin() + static_cast<std::ptrdiff_t>(h.offset + h.size));
      h.offset = at;
      held_[kept++] = h;
    }
    held_.resize(kept);
    arena_.swap(spare_arena_);
  }
  return bytes;
}

void RawEventReader::SortHeld() {
  auto by_time = [](const Held& a, const Held& b) { return a.ts_ns < b.ts_ns; };
  size_t begin = 0;
  for (size_t end : run_ends_) {
    if (!std::is_sorted(held_.begin() + static_cast<std::ptrdiff_t>(begin),
                        held_.begin() + static_cast<std::ptrdiff_t>(end), by_time)) {
      // Not seen here, but the ring buffer does not promise it: sort. The
      // arena offset is the reading order.
      std::sort(held_.begin(), held_.end(), [](const Held& a, const Held& b) {
        return a.ts_ns != b.ts_ns ? a.ts_ns < b.ts_ns : a.offset < b.offset;
      });
      return;
    }
    begin = end;
  }
  // Merge run after run into the sorted prefix (std::merge takes the
  // prefix's first of equal times: stable). No sort and no allocation once
  // merged_ has grown: stable_sort's buffer on every poll, and then a sort of
  // these sorted runs, were a twentieth of the raw agent's CPU.
  size_t sorted = 0;
  for (size_t end : run_ends_) {
    if (end <= sorted) continue;
    if (sorted > 0 && by_time(held_[sorted], held_[sorted - 1])) {
      merged_.clear();
      const auto first = held_.begin();
      std::merge(first, first + static_cast<std::ptrdiff_t>(sorted),
                 first + static_cast<std::ptrdiff_t>(sorted), first + static_cast<std::ptrdiff_t>(end),
                 std::back_inserter(merged_), by_time);
      std::copy(merged_.begin(), merged_.end(), first);
    }
    sorted = end;
  }
}

void RawEventReader::Decode(const Held& h, const std::function<void(const TraceRecord&)>& each) {
  const unsigned char* data = arena_.data() + h.offset;
  auto get = [&](const Field& f) -> uint64_t {
    if (f.offset < 0 || f.size <= 0 || f.size > 8 ||
        static_cast<size_t>(f.offset + f.size) > h.size) {
      return 0;
    }
    uint64_t v = 0;
    std::memcpy(&v, data + f.offset, static_cast<size_t>(f.size));  // little-endian host
    return v;
  };
  auto get_signed = [&](const Field& f) -> int64_t {
    const uint64_t v = get(f);
    if (f.size <= 0 || f.size >= 8) return static_cast<int64_t>(v);
    const uint64_t sign = uint64_t{1} << (f.size * 8 - 1);
    return static_cast<int64_t>((v ^ sign) - sign);
  };
  auto str = [&](const Field& f) -> absl::string_view {
    if (f.offset < 0 || static_cast<size_t>(f.offset + f.size) > h.size) return {};
    size_t begin = static_cast<size_t>(f.offset), len = static_cast<size_t>(f.size);
    if (f.dynamic) {
      const uint64_t loc = get(f);
      begin = loc & 0xffff;
      len = loc >> 16;
      if (begin + len > h.size) return {};
    }
    const char* p = reinterpret_cast<const char*>(data) + begin;
    return absl::string_view(p, strnlen(p, len));
  };
  uint16_t type = 0;
  std::memcpy(&type, data + common_type_offset_, sizeof(type));
  auto it = events_by_id_.find(type);
  if (it == events_by_id_.end()) return;
  const EventInfo& e = it->second;
  auto field = [&e](FieldId id) -> const Field& { return e.by_id[id]; };
  ++events_;
  const unsigned flags = static_cast<unsigned>(get(common_flags_));
  char flag_text[6] = ".....";
  if ((flags & kFlagNmi) != 0) {
    flag_text[2] = (flags & kFlagHardirq) ? 'Z' : 'z';
  } else if ((flags & kFlagHardirq) != 0) {
    flag_text[2] = (flags & kFlagSoftirq) ? 'H' : 'h';
  } else if ((flags & kFlagSoftirq) != 0) {
    flag_text[2] = 's';
  }
  TraceRecord r;
  r.pid = static_cast<int>(get_signed(common_pid_));
  r.cpu = h.cpu;
  r.flags = absl::string_view(flag_text, 5);
  r.ts_ns = h.ts_ns;
  r.event = e.name;
  std::string& p = payload_;
  p.clear();
  // The hot events hand the correlator their fields (trace_line.h's
  // TypedEvent), the others their text in the kernel's print layout.
  TypedEvent& t = typed_;
  auto block = [&](TypedEvent::Kind kind) {
    t.kind = kind;
    const uint64_t d = get(field(kDev));
    t.major = static_cast<int>(d >> 20);
    t.minor = static_cast<int>(d & 0xfffff);
    t.rwbs = str(field(kRwbs));
    t.sector = get(field(kSector));
    t.nr_sector = get(field(kNrSector));
    r.typed = &t;
  };
  switch (e.kind) {
    case Kind::kBlockIssue:
      block(TypedEvent::Kind::kBlockIssue);
      t.bytes = get(field(kBytes));
      break;
    case Kind::kBlockComplete:
    case Kind::kBlockRequeue:
      block(e.kind == Kind::kBlockComplete ? TypedEvent::Kind::kBlockComplete
                                           : TypedEvent::Kind::kBlockRequeue);
      t.error = get_signed(field(kError));
      break;
    case Kind::kIrqEntry:
      t.kind = TypedEvent::Kind::kIrqEntry;
      t.irq = get_signed(field(kIrq));
      t.irq_name = str(field(kName));
      r.typed = &t;
      break;
    case Kind::kIrqExit:
      t.kind = TypedEvent::Kind::kIrqExit;
      t.irq = get_signed(field(kIrq));
      r.typed = &t;
      break;
    case Kind::kWaking:
      t.kind = TypedEvent::Kind::kWaking;
      t.pid = get_signed(field(kPid));
      r.typed = &t;
      break;
    case Kind::kSwitch: {
      // prev_state: one TASK_REPORT bit (S, D, T, t, X, Z, P, I), 0 running.
      const uint64_t state = get(field(kPrevState)) & 0xff;
      static const char kLetters[] = "SDTtXZPI";
      t.kind = TypedEvent::Kind::kSwitch;
      t.prev_state = state == 0 ? 'R' : kLetters[__builtin_ctzll(state)];
      t.prev_pid = get_signed(field(kPrevPid));
      t.next_pid = get_signed(field(kNextPid));
      r.typed = &t;
      break;
    }
    case Kind::kMmcStart:
      absl::StrAppend(&p, str(field(kName)), ": start struct mmc_request[",
                      absl::Hex(get(field(kMrq))), "]: cmd_opcode=", get(field(kCmdOpcode)),
                      " blocks=", get(field(kBlocks)), " block_size=", get(field(kBlksz)),
                      " blk_addr=", get(field(kBlkAddr)), " data_flags=0x",
                      absl::Hex(get(field(kDataFlags))), " tag=", get_signed(field(kTag)));
      break;
    case Kind::kMmcDone:
      absl::StrAppend(&p, str(field(kName)), ": end struct mmc_request[",
                      absl::Hex(get(field(kMrq))), "]: cmd_opcode=", get(field(kCmdOpcode)),
                      " cmd_err=", get_signed(field(kCmdErr)), " stop_err=",
                      get_signed(field(kStopErr)), " sbc_err=", get_signed(field(kSbcErr)),
                      " data_err=", get_signed(field(kDataErr)), " tag=",
                      get_signed(field(kTag)));
      break;
    case Kind::kSpiXferStart:
    case Kind::kSpiXferStop:
      absl::StrAppend(&p, "spi", get_signed(field(kBusNum)), ".",
                      get_signed(field(kChipSelect)), " ", absl::Hex(get(field(kXfer))),
                      " len=", get_signed(field(kLen)));
      break;
    case Kind::kSpiMsgStart:
    case Kind::kSpiMsgDone:
      absl::StrAppend(&p, "spi", get_signed(field(kBusNum)), ".",
                      get_signed(field(kChipSelect)), " ", absl::Hex(get(field(kMsg))));
      if (e.kind == Kind::kSpiMsgDone) {
        absl::StrAppend(&p, " len=", get(field(kActual)), "/", get(field(kFrame)));
      }
      break;
    case Kind::kOther:
      // User-defined pairs: every field as key=value.
      for (const auto& [name, f] : e.fields) {
        if (!p.empty()) p.push_back(' ');
        if (f.dynamic || f.size > 8) {
          absl::StrAppend(&p, name, "=", str(f));
        } else {
          absl::StrAppend(&p, name, "=", get(f));
        }
      }
      break;
  }
  // The correlator recognises threaded IRQ handlers (irq/N-name) by their
  // task name, which the binary records do not carry.
  if (e.kind == Kind::kBlockComplete || e.kind == Kind::kMmcDone ||
      e.kind == Kind::kSpiXferStop || e.kind == Kind::kSpiMsgDone || e.kind == Kind::kOther) {
    if (r.pid > 0) r.task = TaskOf(r.pid);
  }
  r.payload = p;
  each(r);
}

}  // namespace spintune
