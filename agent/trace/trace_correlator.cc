#include "agent/trace/trace_correlator.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"

namespace spintune {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t'; }

// Splits on spaces, keeping bracketed/parenthesized groups whole.
std::vector<absl::string_view> Tokens(absl::string_view s) {
  std::vector<absl::string_view> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && IsSpace(s[i])) ++i;
    if (i >= s.size()) break;
    size_t j = i;
    if (s[i] == '(' || s[i] == '[') {
      const char close = s[i] == '(' ? ')' : ']';
      j = s.find(close, i);
      j = j == absl::string_view::npos ? s.size() : j + 1;
    } else {
      while (j < s.size() && !IsSpace(s[j])) ++j;
    }
    out.push_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

bool ParseDev(absl::string_view t, int* major, int* minor) {
  const size_t comma = t.find(',');
  uint64_t a = 0, b = 0;
  if (comma == absl::string_view::npos || !ParseNumber(t.substr(0, comma), &a) ||
      !ParseNumber(t.substr(comma + 1), &b)) {
    return false;
  }
  *major = static_cast<int>(a);
  *minor = static_cast<int>(b);
  return true;
}

// "comm:pid [prio] ..." (trace-cmd's plugin) -> pid.
bool PluginPid(absl::string_view s, int* pid) {
  const size_t bracket = s.find(" [");
  absl::string_view head = bracket == absl::string_view::npos ? s : s.substr(0, bracket);
  const size_t colon = head.rfind(':');
  uint64_t v = 0;
  if (colon == absl::string_view::npos || !ParseNumber(head.substr(colon + 1), &v)) return false;
  *pid = static_cast<int>(v);
  return true;
}

// "irq/36-virtio1-req.0" -> 36.
int ThreadedIrq(absl::string_view task) {
  if (task.substr(0, 4) != "irq/") return -1;
  const size_t dash = task.find('-', 4);
  uint64_t v = 0;
  if (dash == absl::string_view::npos || !ParseNumber(task.substr(4, dash - 4), &v)) return -1;
  return static_cast<int>(v);
}

bool PowerOfTwoBlock(uint64_t v) { return v >= 1 && v <= 65536 && (v & (v - 1)) == 0; }

}  // namespace

uint32_t OpcodeFromRwbs(absl::string_view rwbs) {
  // A leading F is REQ_PREFLUSH when another operation letter follows.
  if (rwbs.size() >= 2 && rwbs[0] == 'F' &&
      (rwbs[1] == 'W' || rwbs[1] == 'R' || rwbs[1] == 'D' || rwbs[1] == 'N' || rwbs[1] == 'F' ||
       rwbs[1] == 'Z')) {
    rwbs.remove_prefix(1);
  }
  if (rwbs.empty()) return 34;
  switch (rwbs[0]) {
    case 'R':
      return 0;  // REQ_OP_READ
    case 'W':
      return rwbs.size() > 1 && rwbs[1] == 'Z' ? 9 : 1;  // WRITE_ZEROES : WRITE
    case 'F':
      return 2;  // REQ_OP_FLUSH
    case 'D':
      return rwbs.size() > 1 && rwbs[1] == 'E' ? 5 : 3;  // SECURE_ERASE : DISCARD
    case 'Z':
      if (rwbs.substr(0, 3) == "ZRA") return 15;
      if (rwbs.substr(0, 2) == "ZA") return 7;
      if (rwbs.substr(0, 2) == "ZO") return 10;
      if (rwbs.substr(0, 2) == "ZC") return 11;
      if (rwbs.substr(0, 2) == "ZF") return 12;
      return 13;  // ZR
    default:
      return 34;  // N: REQ_OP_DRV_IN and other driver-private requests
  }
}

absl::StatusOr<std::vector<EventPair>> ParseEventPairs(const std::string& text) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_array()) {
    return absl::InvalidArgumentError("pairs file must be a JSON array of objects");
  }
  std::vector<EventPair> out;
  for (size_t i = 0; i < j.size(); ++i) {
    const std::string where = absl::StrCat("pairs[", i, "]");
    const auto& o = j[i];
    if (!o.is_object()) return absl::InvalidArgumentError(where + ": must be an object");
    EventPair p;
    for (const char* key : {"name", "start_event", "end_event"}) {
      if (!o.contains(key) || !o[key].is_string() || o[key].get<std::string>().empty()) {
        return absl::InvalidArgumentError(absl::StrCat(where, ".", key, ": missing"));
      }
    }
    p.name = o["name"].get<std::string>();
    if (p.name.size() > 31) return absl::InvalidArgumentError(where + ".name: longer than 31 bytes");
    p.start_event = o["start_event"].get<std::string>();
    p.end_event = o["end_event"].get<std::string>();
    if (!o.contains("match_fields") || !o["match_fields"].is_array() || o["match_fields"].empty()) {
      return absl::InvalidArgumentError(where + ".match_fields: must be a non-empty array");
    }
    for (const auto& f : o["match_fields"]) {
      if (!f.is_string()) return absl::InvalidArgumentError(where + ".match_fields: strings only");
      p.match_fields.push_back(f.get<std::string>());
    }
    if (o.contains("opcode_field")) {
      if (!o["opcode_field"].is_string()) return absl::InvalidArgumentError(where + ".opcode_field");
      p.opcode_field = o["opcode_field"].get<std::string>();
    }
    if (o.contains("size_field")) {
      if (!o["size_field"].is_string()) return absl::InvalidArgumentError(where + ".size_field");
      p.size_field = o["size_field"].get<std::string>();
    }
    if (o.contains("size_unit_bytes")) {
      if (!o["size_unit_bytes"].is_number_unsigned() || o["size_unit_bytes"].get<uint64_t>() == 0 ||
          o["size_unit_bytes"].get<uint64_t>() > (1u << 20)) {
        return absl::InvalidArgumentError(where + ".size_unit_bytes: must be 1..1048576");
      }
      p.size_unit_bytes = o["size_unit_bytes"].get<uint64_t>();
    }
    out.push_back(std::move(p));
  }
  return out;
}

TraceCorrelator::TraceCorrelator(CorrelatorOptions options) : options_(std::move(options)) {
  if (!options_.block_device_name) {
    options_.block_device_name = [](int major, int minor) {
      return absl::StrCat(major, ":", minor);
    };
  }
}

void TraceCorrelator::Start(const std::string& key, const TraceRecord& r, uint32_t opcode,
                            uint64_t bytes, uint64_t sectors) {
  pending_[key].push_back({r.ts_ns, r.cpu, r.pid, opcode, bytes, sectors, next_seq_});
  order_.emplace_back(next_seq_++, key);
  ++pending_count_;
  // The oldest starts have mostly ended by now: their entries go at once,
  // so order_ stays about as long as what is in flight. (Trimmed only on
  // eviction, it grew to 4 * max_pending entries between compactions: about
  // 10 MB of ever new memory, a tenth of the raw agent's CPU in malloc.)
  auto live = [this](const std::pair<uint64_t, std::string>& e) {
    auto it = pending_.find(e.second);
    if (it == pending_.end()) return false;
    for (const auto& p : it->second) {
      if (p.seq == e.first) return true;
    }
    return false;
  };
  while (!order_.empty() && !live(order_.front())) order_.pop_front();
  if (pending_count_ > options_.max_pending && !order_.empty()) {
    // Evict the oldest start that is still pending: order_'s front now.
    auto it = pending_.find(order_.front().second);
    auto& starts = it->second;
    starts.erase(std::find_if(starts.begin(), starts.end(), [&](const Pending& p) {
      return p.seq == order_.front().first;
    }));
    if (starts.empty()) pending_.erase(it);
    order_.pop_front();
    --pending_count_;
    ++stats_.evicted;
  }
  if (order_.size() > 4 * options_.max_pending) {
    // Compact: drop order entries whose starts are gone (behind a start
    // that stays pending for long).
    std::deque<std::pair<uint64_t, std::string>> kept;
    for (auto& e : order_) {
      if (live(e)) kept.push_back(std::move(e));
    }
    order_ = std::move(kept);
  }
}

std::optional<TraceCorrelator::Pending> TraceCorrelator::Take(const std::string& key) {
  auto it = pending_.find(key);
  if (it == pending_.end() || it->second.empty()) return std::nullopt;
  Pending p = it->second.front();
  it->second.erase(it->second.begin());
  if (it->second.empty()) pending_.erase(it);
  --pending_count_;
  return p;
}

void TraceCorrelator::Emit(size_t slot) {
  if (slot < held_.size() && held_[slot]) {
    dispatches_.push_back(std::move(*held_[slot]));
    held_[slot].reset();
    ++stats_.dispatches;
    --live_held_;
  }
  // Reclaim the table when everything held has been emitted (no wake entry
  // refers to a slot any more then).
  if (live_held_ == 0 && wakes_.empty()) held_.clear();
}

void TraceCorrelator::ExpireWakes(uint64_t now_ns) {
  while (!wakes_.empty() && now_ns > wakes_.front().irq_entry_ns + options_.wake_window_ns) {
    if (wakes_.front().woken) --woken_count_;
    Emit(wakes_.front().dispatch_slot);
    wakes_.pop_front();
  }
}

void TraceCorrelator::Complete(const std::string& device, const Pending& p,
                               const TraceRecord& r, bool error) {
  CompletionEvent c;
  c.device = device;
  c.opcode = p.opcode;
  c.bytes = p.bytes;
  c.error = error;
  c.cpu = p.cpu;
  c.wait_ns = r.ts_ns > p.ts_ns ? r.ts_ns - p.ts_ns : 0;
  c.issue_ns = p.ts_ns;
  c.end_ns = r.ts_ns;
  // Which IRQ occurrence (if any) delivered this completion?
  IrqOccurrence* occ = nullptr;
  const int threaded = ThreadedIrq(r.task);
  if (threaded >= 0) {
    auto cpu = last_cpu_by_irq_.find(threaded);
    if (cpu != last_cpu_by_irq_.end()) occ = &last_irq_by_cpu_[cpu->second];
  } else {
    auto it = last_irq_by_cpu_.find(r.cpu);
    const bool irq_context = r.InHardIrq() || r.InSoftIrq() || r.flags.empty();
    if (it != last_irq_by_cpu_.end() && irq_context &&
        r.ts_ns <= it->second.entry_ns + options_.irq_window_ns) {
      occ = &it->second;
    }
  }
  if (occ != nullptr && occ->entry_ns >= p.ts_ns) {
    auto declared = options_.irq_device.find(occ->name);
    const bool ours = declared == options_.irq_device.end() || declared->second == device;
    if (ours) {
      occ->first_issue_ns = std::min(occ->first_issue_ns, p.ts_ns);
      if (occ->exited && occ->slot >= 0) {  // its dispatch sample, when still held
        for (const auto& w : wakes_) {
          if (w.dispatch_slot == static_cast<size_t>(occ->slot) && held_[w.dispatch_slot]) {
            auto& first = held_[w.dispatch_slot]->first_issue_ns;
            first = std::min(first, p.ts_ns);
          }
        }
      }
      c.path = TracePath::kIrq;
      c.wait_ns = occ->entry_ns - p.ts_ns;  // hardware completion = the IRQ
      if (declared == options_.irq_device.end()) learned_irq_device_[occ->name] = device;
      // Only a waiter that was asleep when the IRQ came has a wake latency.
      auto asleep = blocked_since_.find(p.pid);
      const bool waiting =
          p.pid > 0 && asleep != blocked_since_.end() && asleep->second <= occ->entry_ns;
      if (!occ->exited) {
        occ->device = device;
        if (waiting && occ->waiter_pid < 0) occ->waiter_pid = p.pid;
      } else if (occ->slot < 0) {
        // The handler returned before the completion ran (softirq, thread):
        // its dispatch sample starts now.
        if (waiting) occ->waiter_pid = p.pid;
        AddDispatch(occ, device);
      } else if (waiting) {
        for (auto& w : wakes_) {
          if (w.dispatch_slot == static_cast<size_t>(occ->slot) && w.pid < 0) w.pid = p.pid;
        }
      }
    }
  } else if (r.pid == p.pid && !r.InHardIrq() && !r.InSoftIrq()) {
    c.path = TracePath::kSpin;  // completed in the issuer's own context: polled
  }
  completions_.push_back(std::move(c));
  ++stats_.completions;
}

namespace {

// One block_rq_* payload, from the kernel's print format or from the
// "[FAILED TO PARSE] dev=... sector=..." field list of trace-cmd and perf.
struct BlockFields {
  int major = 0, minor = 0;
  absl::string_view rwbs;
  uint64_t bytes = 0;
  uint64_t sector = 0;
  bool has_sector = false;  // false: flush/passthrough position (-1)
  uint64_t sectors = 0;
  int64_t error = 0;
};

bool ParseBlockFields(absl::string_view payload, bool issue, BlockFields* b) {
  constexpr absl::string_view kFailed = "[FAILED TO PARSE]";
  if (payload.substr(0, kFailed.size()) == kFailed) {
    uint64_t dev = 0;
    if (!ParseNumber(FindField(payload, "dev"), &dev) ||
        !ParseNumber(FindField(payload, "nr_sector"), &b->sectors)) {
      return false;
    }
    b->major = static_cast<int>(dev >> 20);  // the kernel's dev_t
    b->minor = static_cast<int>(dev & 0xfffff);
    b->rwbs = FindField(payload, "rwbs");
    b->has_sector = ParseNumber(FindField(payload, "sector"), &b->sector) &&
                    b->sector != ~uint64_t{0};
    if (issue) ParseNumber(FindField(payload, "bytes"), &b->bytes);
    ParseSigned(FindField(payload, "error"), &b->error);
    return !b->rwbs.empty();
  }
  // issue:    "254,0 RS 4096 () 350502584 + 8 be,0,4 [dd]" (no bytes before ~5.x)
  // complete: "254,0 RS () 350502584 + 8 be,0,4 [0]"
  const auto t = Tokens(payload);
  if (t.size() < 6 || !ParseDev(t[0], &b->major, &b->minor)) return false;
  b->rwbs = t[1];
  size_t i = 2;
  if (issue && t[i][0] != '(') {
    if (!ParseNumber(t[i], &b->bytes)) return false;
    ++i;
  }
  if (i >= t.size() || t[i][0] != '(') return false;
  ++i;
  if (i + 2 >= t.size() || t[i + 1] != "+" || !ParseNumber(t[i + 2], &b->sectors)) return false;
  b->has_sector = ParseNumber(t[i], &b->sector) && b->sector != ~uint64_t{0};
  if (!issue) {
    const absl::string_view last = t.back();
    if (last.size() >= 2 && last.front() == '[' && last.back() == ']') {
      ParseSigned(last.substr(1, last.size() - 2), &b->error);
    }
  }
  return true;
}

// The same fields from a binary record: what ParseBlockFields reads out of
// the text the raw reader used to print ("%u,%u %s %llu () %llu + %llu").
bool BlockFieldsOf(const TraceRecord& r, bool issue, BlockFields* b) {
  if (r.typed == nullptr) return ParseBlockFields(r.payload, issue, b);
  const TypedEvent& t = *r.typed;
  b->major = t.major;
  b->minor = t.minor;
  b->rwbs = t.rwbs;
  if (issue) b->bytes = t.bytes;
  b->sector = t.sector;
  b->has_sector = t.sector != ~uint64_t{0};
  b->sectors = t.nr_sector;
  if (!issue) b->error = t.error;
  return true;
}

// Requests without a position (flush, passthrough) pair FIFO per (dev, op).
// Binary and 13 bytes: a kind byte, the device as the kernel packs it
// (MKDEV: major << 20 | minor, majors have 12 bits), the sector or opcode.
// Within the string's inline capacity (15 on libstdc++), so neither the key
// nor its copies in pending_ and order_ allocate (a text key with the
// sector did, once sectors passed 7 digits). The kind byte (1 or 2) is one
// no text key of the other kinds ("m|", "mq|", "st|", "u|"...) starts with.
std::string BlockKey(const BlockFields& b, uint32_t opcode, bool positional) {
  char key[13];
  key[0] = positional ? 1 : 2;
  const uint32_t dev = (static_cast<uint32_t>(b.major) << 20) |
                       (static_cast<uint32_t>(b.minor) & 0xfffff);
  const uint64_t where = positional ? b.sector : opcode;
  std::memcpy(key + 1, &dev, sizeof(dev));
  std::memcpy(key + 5, &where, sizeof(where));
  return std::string(key, sizeof(key));
}

bool Positional(const BlockFields& b, uint32_t opcode) {
  return b.has_sector && b.sectors > 0 && opcode != 2 && opcode != 34 && opcode != 35;
}

}  // namespace

bool TraceCorrelator::OnBlockIssue(const TraceRecord& r) {
  BlockFields b;
  if (!BlockFieldsOf(r, true, &b)) return false;
  const uint32_t opcode = OpcodeFromRwbs(b.rwbs);
  if (b.bytes == 0) b.bytes = b.sectors * 512;
  Start(BlockKey(b, opcode, Positional(b, opcode)), r, opcode, b.bytes, b.sectors);
  return true;
}

bool TraceCorrelator::OnBlockComplete(const TraceRecord& r) {
  BlockFields b;
  if (!BlockFieldsOf(r, false, &b)) return false;
  const uint32_t opcode = OpcodeFromRwbs(b.rwbs);
  const bool positional = Positional(b, opcode);
  auto p = Take(BlockKey(b, opcode, positional));
  if (!p) {
    if (opcode == 1 && b.sectors == 0) {
      ++stats_.flush_sequence_ends;
    } else {
      ++stats_.unpaired_ends;
    }
    return true;
  }
  if (positional && p->remaining_sectors > b.sectors) {
    // A partial completion: the rest completes later at the next position.
    Pending rest = *p;
    rest.remaining_sectors -= b.sectors;
    TraceRecord issue = r;
    issue.ts_ns = p->ts_ns;
    issue.cpu = p->cpu;
    issue.pid = p->pid;
    BlockFields next = b;
    next.sector += b.sectors;
    Start(BlockKey(next, opcode, true), issue, rest.opcode, rest.bytes, rest.remaining_sectors);
    return true;
  }
  Complete(options_.block_device_name(b.major, b.minor), *p, r, b.error != 0);
  return true;
}

bool TraceCorrelator::OnBlockRequeue(const TraceRecord& r) {
  BlockFields b;
  if (!BlockFieldsOf(r, false, &b)) return false;
  const uint32_t opcode = OpcodeFromRwbs(b.rwbs);
  if (Take(BlockKey(b, opcode, Positional(b, opcode)))) ++stats_.requeued;
  return true;
}

bool TraceCorrelator::OnMmc(const TraceRecord& r, bool start) {
  // "mmc0: start struct mmc_request[0000000005d331e4]: cmd_opcode=25 ..."
  const absl::string_view p = r.payload;
  const size_t colon = p.find(':');
  const size_t open = p.find('[');
  const size_t close = p.find(']', open == absl::string_view::npos ? 0 : open);
  if (colon == absl::string_view::npos || open == absl::string_view::npos ||
      close == absl::string_view::npos) {
    return false;
  }
  const std::string host(p.substr(0, colon));
  uint64_t cmd = 0;
  if (!ParseNumber(FindField(p, "cmd_opcode"), &cmd)) return false;
  int64_t tag = -1;
  ParseSigned(FindField(p, "tag"), &tag);
  const bool cqe = cmd == 0 && tag >= 0;
  const std::string key = cqe ? absl::StrCat("mq|", host, "|", tag)
                              : absl::StrCat("m|", host, "|", p.substr(open + 1, close - open - 1));
  if (start) {
    uint64_t blocks = 0, block_size = 0, blk_addr = 0, data_flags = 0;
    ParseNumber(FindField(p, "blocks"), &blocks);
    ParseNumber(FindField(p, "block_size"), &block_size);
    ParseNumber(FindField(p, "blk_addr"), &blk_addr);
    if (block_size == 0) ParseNumber(FindField(p, "blksz"), &block_size);  // pre-merge RFC
    // v4.15 printed blk_addr as block_size and the other way round.
    if (!PowerOfTwoBlock(block_size) && PowerOfTwoBlock(blk_addr)) block_size = blk_addr;
    ParseNumber(FindField(p, "data_flags"), &data_flags);
    uint32_t opcode = static_cast<uint32_t>(cmd);
    if (cqe) opcode = (data_flags & 0x100) ? 47 : 46;  // EXECUTE_WRITE/READ_TASK
    // A request pointer is reused only after its done event: a second start
    // while one is pending is the core re-issuing the request after an error
    // (cmd->retries), which emits no done for the failed try. The wait runs
    // from the first try.
    if (!cqe && pending_.count(key) != 0) {
      ++stats_.retried;
      return true;
    }
    Start(key, r, opcode, blocks * block_size);
    return true;
  }
  auto pending = Take(key);
  if (!pending) {
    ++stats_.unpaired_ends;
    return true;
  }
  bool error = false;
  for (const char* f : {"cmd_err", "data_err", "sbc_err", "stop_err"}) {
    int64_t e = 0;
    if (ParseSigned(FindField(p, f), &e) && e != 0) error = true;
  }
  Complete(host, *pending, r, error);
  return true;
}

bool TraceCorrelator::OnSpi(const TraceRecord& r, bool start, bool message) {
  // "spi0.0 00000000ea1cf8b6 len=16 tx=[...] rx=[...]", done: "len=16/16"
  const auto t = Tokens(r.payload);
  if (t.size() < 2) return false;
  const std::string device(t[0]);
  const std::string key = absl::StrCat(message ? "sm|" : "st|", device, "|", t[1]);
  if (start) {
    uint64_t len = 0;
    absl::string_view lv = FindField(r.payload, "len");
    const size_t slash = lv.find('/');
    if (slash != absl::string_view::npos) lv = lv.substr(0, slash);
    ParseNumber(lv, &len);
    Start(key, r, message ? 1 : 0, len);
    return true;
  }
  auto pending = Take(key);
  if (!pending) {
    ++stats_.unpaired_ends;
    return true;
  }
  if (message) {
    // The done event has the actual length: "len=actual/frame".
    absl::string_view lv = FindField(r.payload, "len");
    uint64_t actual = 0;
    if (ParseNumber(lv.substr(0, lv.find('/')), &actual)) pending->bytes = actual;
  }
  Complete(device, *pending, r, false);
  return true;
}

bool TraceCorrelator::OnPair(const TraceRecord& r, const EventPair& pair, bool start) {
  std::string key = absl::StrCat("u|", pair.name);
  for (const auto& f : pair.match_fields) {
    const absl::string_view v = FindField(r.payload, f);
    if (v.empty()) return false;
    absl::StrAppend(&key, "|", v);
  }
  if (start) {
    uint64_t opcode = 0, size = 0;
    if (!pair.opcode_field.empty() && !ParseNumber(FindField(r.payload, pair.opcode_field), &opcode)) {
      return false;
    }
    if (!pair.size_field.empty() && !ParseNumber(FindField(r.payload, pair.size_field), &size)) {
      return false;
    }
    Start(key, r, static_cast<uint32_t>(opcode), size * pair.size_unit_bytes);
    return true;
  }
  auto pending = Take(key);
  if (!pending) {
    ++stats_.unpaired_ends;
    return true;
  }
  Complete(pair.name, *pending, r, false);
  return true;
}

bool TraceCorrelator::OnIrqEntry(const TraceRecord& r) {
  uint64_t irq = 0;
  absl::string_view name;
  if (r.typed != nullptr) {
    if (r.typed->irq < 0) return false;  // as "irq=-1" would not parse
    irq = static_cast<uint64_t>(r.typed->irq);
    // FindField's value ends at a space or comma ("PCIe PME" -> "PCIe"):
    // the text sources name such IRQs so, and the names must agree.
    name = r.typed->irq_name.substr(0, r.typed->irq_name.find_first_of(" ,"));
  } else {
    if (!ParseNumber(FindField(r.payload, "irq"), &irq)) return false;
    name = FindField(r.payload, "name");
  }
  IrqOccurrence o;
  o.irq = static_cast<int>(irq);
  o.name = std::string(name);
  o.entry_ns = r.ts_ns;
  o.cpu = r.cpu;
  last_irq_by_cpu_[r.cpu] = std::move(o);
  last_cpu_by_irq_[static_cast<int>(irq)] = r.cpu;
  return true;
}

bool TraceCorrelator::OnIrqExit(const TraceRecord& r) {
  uint64_t irq = 0;
  if (r.typed != nullptr) {
    if (r.typed->irq < 0) return false;
    irq = static_cast<uint64_t>(r.typed->irq);
  } else if (!ParseNumber(FindField(r.payload, "irq"), &irq)) {
    return false;
  }
  auto it = last_irq_by_cpu_.find(r.cpu);
  if (it == last_irq_by_cpu_.end() || it->second.irq != static_cast<int>(irq) || it->second.exited) {
    return true;
  }
  IrqOccurrence& o = it->second;
  o.exited = true;
  o.exit_ns = r.ts_ns;
  std::string device = o.device;
  if (device.empty()) {
    auto declared = options_.irq_device.find(o.name);
    auto learned = learned_irq_device_.find(o.name);
    if (declared != options_.irq_device.end()) {
      device = declared->second;
    } else if (learned != learned_irq_device_.end()) {
      device = learned->second;
    }
  }
  // An IRQ of no device we know yet waits for a completion to claim it.
  if (!device.empty()) AddDispatch(&o, device);
  return true;
}

void TraceCorrelator::AddDispatch(IrqOccurrence* o, const std::string& device) {
  DispatchEvent d;
  d.cpu = o->cpu;
  d.irq = o->irq;
  d.irq_name = o->name;
  d.device = device;
  d.handler_ns = o->exit_ns > o->entry_ns ? o->exit_ns - o->entry_ns : 0;
  d.entry_ns = o->entry_ns;
  d.first_issue_ns = o->first_issue_ns;
  held_.push_back(std::move(d));
  ++live_held_;
  o->slot = static_cast<int>(held_.size() - 1);
  wakes_.push_back({o->waiter_pid, o->entry_ns, o->waiter_woken, held_.size() - 1});
  if (o->waiter_woken) ++woken_count_;
}

void TraceCorrelator::OnWaking(const TraceRecord& r) {
  int pid = -1;
  uint64_t v = 0;
  if (r.typed != nullptr) {
    if (r.typed->pid < 0) return;  // as "pid=-1" would not parse
    pid = static_cast<int>(r.typed->pid);
  } else if (ParseNumber(FindField(r.payload, "pid"), &v)) {
    pid = static_cast<int>(v);
  } else if (!PluginPid(r.payload, &pid)) {
    return;
  }
  for (auto& w : wakes_) {
    if (w.pid == pid && r.ts_ns >= w.irq_entry_ns && !w.woken) {
      w.woken = true;
      ++woken_count_;
    }
  }
  // A handler that completes in hard IRQ context wakes the waiter before
  // its irq_handler_exit.
  auto it = last_irq_by_cpu_.find(r.cpu);
  if (it != last_irq_by_cpu_.end() && !it->second.exited && it->second.waiter_pid == pid) {
    it->second.waiter_woken = true;
  }
}

bool TraceCorrelator::ResolveWake(int pid, uint64_t ts_ns) {
  for (auto it = wakes_.begin(); it != wakes_.end(); ++it) {
    if (it->pid == pid && it->woken) {
      if (held_[it->dispatch_slot] && ts_ns >= it->irq_entry_ns) {
        held_[it->dispatch_slot]->wake_ns = ts_ns - it->irq_entry_ns;
      }
      const size_t slot = it->dispatch_slot;
      wakes_.erase(it);
      --woken_count_;
      Emit(slot);
      return true;
    }
  }
  return false;
}

void TraceCorrelator::OnSwitch(const TraceRecord& r) {
  int next = -1, prev = -1;
  absl::string_view prev_state;
  uint64_t v = 0;
  if (r.typed != nullptr) {
    // As the text "prev_pid=%d prev_state=%c ==> next_pid=%d": a negative
    // pid does not parse (next: the event is ignored; prev: none).
    if (r.typed->next_pid < 0) return;
    next = static_cast<int>(r.typed->next_pid);
    if (r.typed->prev_pid >= 0) prev = static_cast<int>(r.typed->prev_pid);
    prev_state = absl::string_view(&r.typed->prev_state, 1);
  } else if (ParseNumber(FindField(r.payload, "next_pid"), &v)) {
    next = static_cast<int>(v);
    if (ParseNumber(FindField(r.payload, "prev_pid"), &v)) prev = static_cast<int>(v);
    prev_state = FindField(r.payload, "prev_state");
  } else {
    // trace-cmd's plugin: "prev:PID [PRIO] STATE ==> next:PID [PRIO]"
    const size_t arrow = r.payload.find("==> ");
    if (arrow == absl::string_view::npos || !PluginPid(r.payload.substr(arrow + 4), &next)) return;
    PluginPid(r.payload, &prev);
    absl::string_view head = r.payload.substr(0, arrow);
    while (!head.empty() && head.back() == ' ') head.remove_suffix(1);
    const size_t sp = head.rfind(' ');
    prev_state = sp == absl::string_view::npos ? head : head.substr(sp + 1);
  }
  if (prev > 0) {
    // Waiting for a device is D (io_schedule, wait_for_completion) or S (an
    // interruptible wait). I is an idle kernel thread: a kworker that issued
    // a flush on someone's behalf and went idle is not that request's waiter.
    if (!prev_state.empty() && (prev_state[0] == 'D' || prev_state[0] == 'S')) {
      blocked_since_[prev] = r.ts_ns;
    } else {
      blocked_since_.erase(prev);
    }
  }
  blocked_since_.erase(next);
  if (blocked_since_.size() > options_.max_pending) blocked_since_.clear();
  if (woken_count_ > 0) ResolveWake(next, r.ts_ns);
}

namespace {

// The hot events' kind by name (text sources); nullopt for the others.
std::optional<TypedEvent::Kind> HotKind(absl::string_view e) {
  using Kind = TypedEvent::Kind;
  if (e == "block_rq_issue") return Kind::kBlockIssue;
  if (e == "block_rq_complete") return Kind::kBlockComplete;
  if (e == "block_rq_requeue") return Kind::kBlockRequeue;
  if (e == "irq_handler_entry") return Kind::kIrqEntry;
  if (e == "irq_handler_exit") return Kind::kIrqExit;
  if (e == "sched_waking" || e == "sched_wakeup") return Kind::kWaking;
  if (e == "sched_switch") return Kind::kSwitch;
  return std::nullopt;
}

}  // namespace

bool TraceCorrelator::Process(const TraceRecord& r) {
  ++stats_.records;
  stats_.last_ts_ns = r.ts_ns;
  ExpireWakes(r.ts_ns);
  // A task with an event of its own is running (or was interrupted while
  // running): it is not asleep, whatever its last switch out said. The
  // trace can lack the switch into it: on this VM's kernel most switches
  // out of the idle task are missing from the trace (docs/traces.md), and
  // a stale "asleep" would take a running issuer as the waiter of its
  // next completion and measure a wake to its next sleep. (A sched_switch
  // is its prev's own event; OnSwitch then records how prev left.)
  if (r.pid > 0 && !blocked_since_.empty()) blocked_since_.erase(r.pid);
  // The woken waiter is running when it switches in, or, when the trace has
  // no switch into it (an idle CPU picking it up), at its first own event.
  if (woken_count_ > 0 && r.pid > 0 && !r.InHardIrq() && !r.InSoftIrq() &&
      r.event != "sched_switch") {
    ResolveWake(r.pid, r.ts_ns);
  }
  const absl::string_view e = r.event;
  bool ok = true;
  // Binary sources say which hot event a record is; text is named.
  if (const auto hot = r.typed != nullptr ? std::optional(r.typed->kind) : HotKind(e)) {
    switch (*hot) {
      case TypedEvent::Kind::kBlockIssue:
        ok = OnBlockIssue(r);
        break;
      case TypedEvent::Kind::kBlockComplete:
        ok = OnBlockComplete(r);
        break;
      case TypedEvent::Kind::kBlockRequeue:
        ok = OnBlockRequeue(r);
        break;
      case TypedEvent::Kind::kIrqEntry:
        ok = OnIrqEntry(r);
        break;
      case TypedEvent::Kind::kIrqExit:
        ok = OnIrqExit(r);
        break;
      case TypedEvent::Kind::kWaking:
        ++stats_.sched_events;
        OnWaking(r);
        break;
      case TypedEvent::Kind::kSwitch:
        ++stats_.sched_events;
        OnSwitch(r);
        break;
    }
  } else if (e == "mmc_request_start" || e == "mmc_request_done") {
    ok = OnMmc(r, e == "mmc_request_start");
  } else if (e == "spi_transfer_start" || e == "spi_transfer_stop") {
    ok = OnSpi(r, e == "spi_transfer_start", false);
  } else if (e == "spi_message_start" || e == "spi_message_done") {
    ok = OnSpi(r, e == "spi_message_start", true);
  } else {
    bool used = false;
    for (const auto& pair : options_.pairs) {
      if (e == pair.start_event || e == pair.end_event) {
        ok = OnPair(r, pair, e == pair.start_event);
        used = true;
        break;
      }
    }
    if (!used) ++stats_.other_events;
  }
  if (!ok) ++stats_.malformed_payloads;
  return ok;
}

void TraceCorrelator::Finish() {
  woken_count_ = 0;
  while (!wakes_.empty()) {
    Emit(wakes_.front().dispatch_slot);
    wakes_.pop_front();
  }
}

}  // namespace spintune
