#include "agent/trace/trace_correlator.h"

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
  if (++pending_count_ > options_.max_pending) {
    // Evict the oldest start that is still pending.
    while (!order_.empty()) {
      auto [seq, k] = order_.front();
      order_.pop_front();
      auto it = pending_.find(k);
      if (it == pending_.end() || it->second.empty() || it->second.front().seq != seq) continue;
      it->second.pop_front();
      if (it->second.empty()) pending_.erase(it);
      --pending_count_;
      ++stats_.evicted;
      break;
    }
  }
  if (order_.size() > 4 * options_.max_pending) {
    // Compact: drop order entries whose starts are gone.
    std::deque<std::pair<uint64_t, std::string>> live;
    for (auto& e : order_) {
      auto it = pending_.find(e.second);
      if (it == pending_.end()) continue;
      for (const auto& p : it->second) {
        if (p.seq == e.first) {
          live.push_back(std::move(e));
          break;
        }
      }
    }
    order_ = std::move(live);
  }
}

std::optional<TraceCorrelator::Pending> TraceCorrelator::Take(const std::string& key) {
  auto it = pending_.find(key);
  if (it == pending_.end() || it->second.empty()) return std::nullopt;
  Pending p = it->second.front();
  it->second.pop_front();
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
      c.path = TracePath::kIrq;
      c.wait_ns = occ->entry_ns - p.ts_ns;  // hardware completion = the IRQ
      if (declared == options_.irq_device.end()) learned_irq_device_[occ->name] = device;
      // Only a waiter that was asleep when the IRQ came has a wake latency.
      auto asleep = blocked_since_.find(p.pid);
      const bool waiting = asleep != blocked_since_.end() && asleep->second <= occ->entry_ns;
      if (!occ->used && p.pid > 0 && waiting) {
        if (occ->exited && occ->slot >= 0) {
          for (auto& w : wakes_) {
            if (w.dispatch_slot == static_cast<size_t>(occ->slot) && w.pid < 0) w.pid = p.pid;
          }
        } else {
          occ->waiter_pid = p.pid;
        }
      }
    }
  } else if (r.pid == p.pid && !r.InHardIrq() && !r.InSoftIrq()) {
    c.path = TracePath::kSpin;  // completed in the issuer's own context: polled
  }
  completions_.push_back(std::move(c));
  ++stats_.completions;
}

bool TraceCorrelator::OnBlockIssue(const TraceRecord& r) {
  // "254,0 RS 4096 () 350502584 + 8 be,0,4 [dd]" (bytes since ~5.x; older: 0)
  const auto t = Tokens(r.payload);
  int major, minor;
  if (t.size() < 6 || !ParseDev(t[0], &major, &minor)) return false;
  size_t i = 2;
  uint64_t bytes = 0;
  if (t[i].empty() || t[i][0] != '(') {
    if (!ParseNumber(t[i], &bytes)) return false;
    ++i;
  }
  if (i >= t.size() || t[i][0] != '(') return false;
  ++i;
  uint64_t sector = 0, sectors = 0;
  if (i + 2 >= t.size() || !ParseNumber(t[i], &sector) || t[i + 1] != "+" ||
      !ParseNumber(t[i + 2], &sectors)) {
    return false;
  }
  const uint32_t opcode = OpcodeFromRwbs(t[1]);
  if (bytes == 0) bytes = sectors * 512;
  const bool no_position = sectors == 0 || opcode == 2 || opcode == 34 || opcode == 35;
  const std::string dev = absl::StrCat(major, ",", minor);
  Start(no_position ? absl::StrCat("bq|", dev, "|", opcode) : absl::StrCat("b|", dev, "|", sector),
        r, opcode, bytes, sectors);
  return true;
}

bool TraceCorrelator::OnBlockComplete(const TraceRecord& r) {
  // "254,0 RS () 350502584 + 8 be,0,4 [0]"
  const auto t = Tokens(r.payload);
  int major, minor;
  if (t.size() < 6 || !ParseDev(t[0], &major, &minor)) return false;
  size_t i = 2;
  if (t[i][0] != '(') return false;
  ++i;
  uint64_t sector = 0, sectors = 0;
  if (i + 2 >= t.size() || t[i + 1] != "+" || !ParseNumber(t[i + 2], &sectors)) return false;
  const bool no_position = !ParseNumber(t[i], &sector) || sector == ~uint64_t{0};
  int64_t err = 0;
  const absl::string_view last = t.back();
  if (last.size() >= 2 && last.front() == '[' && last.back() == ']') {
    ParseSigned(last.substr(1, last.size() - 2), &err);
  }
  const uint32_t opcode = OpcodeFromRwbs(t[1]);
  const std::string dev = absl::StrCat(major, ",", minor);
  std::string key = no_position || sectors == 0 || opcode == 2 || opcode == 34 || opcode == 35
                        ? absl::StrCat("bq|", dev, "|", opcode)
                        : absl::StrCat("b|", dev, "|", sector);
  auto p = Take(key);
  if (!p) {
    ++stats_.unpaired_ends;
    return true;
  }
  if (p->remaining_sectors > sectors && sectors > 0 && key[1] == '|') {
    // A partial completion: the rest completes later at the next position.
    Pending rest = *p;
    rest.remaining_sectors -= sectors;
    TraceRecord issue = r;
    issue.ts_ns = p->ts_ns;
    issue.cpu = p->cpu;
    issue.pid = p->pid;
    Start(absl::StrCat("b|", dev, "|", sector + sectors), issue, rest.opcode, rest.bytes,
          rest.remaining_sectors);
    return true;
  }
  Complete(options_.block_device_name(major, minor), *p, r, err != 0);
  return true;
}

bool TraceCorrelator::OnBlockRequeue(const TraceRecord& r) {
  const auto t = Tokens(r.payload);
  int major, minor;
  uint64_t sector = 0;
  if (t.size() < 4 || !ParseDev(t[0], &major, &minor)) return false;
  if (ParseNumber(t[3], &sector) && Take(absl::StrCat("b|", major, ",", minor, "|", sector))) {
    ++stats_.requeued;
  }
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
  if (!ParseNumber(FindField(r.payload, "irq"), &irq)) return false;
  const absl::string_view name = FindField(r.payload, "name");
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
  if (!ParseNumber(FindField(r.payload, "irq"), &irq)) return false;
  auto it = last_irq_by_cpu_.find(r.cpu);
  if (it == last_irq_by_cpu_.end() || it->second.irq != static_cast<int>(irq) || it->second.exited) {
    return true;
  }
  IrqOccurrence& o = it->second;
  o.exited = true;
  o.exit_ns = r.ts_ns;
  std::string device;
  auto declared = options_.irq_device.find(o.name);
  if (declared != options_.irq_device.end()) {
    device = declared->second;
  } else {
    auto learned = learned_irq_device_.find(o.name);
    if (learned != learned_irq_device_.end()) device = learned->second;
  }
  if (device.empty() && o.waiter_pid < 0) return true;  // not a device we measure
  DispatchEvent d;
  d.cpu = r.cpu;
  d.irq = o.irq;
  d.irq_name = o.name;
  d.device = device;
  d.handler_ns = r.ts_ns > o.entry_ns ? r.ts_ns - o.entry_ns : 0;
  held_.push_back(std::move(d));
  ++live_held_;
  o.slot = static_cast<int>(held_.size() - 1);
  wakes_.push_back({o.waiter_pid, o.entry_ns, false, held_.size() - 1});
  return true;
}

void TraceCorrelator::OnWaking(const TraceRecord& r) {
  int pid = -1;
  uint64_t v = 0;
  if (ParseNumber(FindField(r.payload, "pid"), &v)) {
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
}

bool TraceCorrelator::ResolveWake(int pid, uint64_t ts_ns) {
  for (auto it = wakes_.begin(); it != wakes_.end(); ++it) {
    if (it->pid == pid && it->woken) {
      if (held_[it->dispatch_slot]) held_[it->dispatch_slot]->wake_ns = ts_ns - it->irq_entry_ns;
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
  if (ParseNumber(FindField(r.payload, "next_pid"), &v)) {
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
    if (!prev_state.empty() && prev_state[0] != 'R') {
      blocked_since_[prev] = r.ts_ns;
    } else {
      blocked_since_.erase(prev);
    }
  }
  blocked_since_.erase(next);
  if (blocked_since_.size() > options_.max_pending) blocked_since_.clear();
  if (woken_count_ > 0) ResolveWake(next, r.ts_ns);
}

bool TraceCorrelator::Process(const TraceRecord& r) {
  ++stats_.records;
  ExpireWakes(r.ts_ns);
  // The woken waiter is running when it switches in, or, when the trace has
  // no switch into it (an idle CPU picking it up), at its first own event.
  if (woken_count_ > 0 && r.pid > 0 && !r.InHardIrq() && !r.InSoftIrq() &&
      r.event != "sched_switch") {
    ResolveWake(r.pid, r.ts_ns);
  }
  const absl::string_view e = r.event;
  bool ok = true;
  if (e == "block_rq_issue") {
    ok = OnBlockIssue(r);
  } else if (e == "block_rq_complete") {
    ok = OnBlockComplete(r);
  } else if (e == "block_rq_requeue") {
    ok = OnBlockRequeue(r);
  } else if (e == "irq_handler_entry") {
    ok = OnIrqEntry(r);
  } else if (e == "irq_handler_exit") {
    ok = OnIrqExit(r);
  } else if (e == "sched_waking" || e == "sched_wakeup") {
    OnWaking(r);
  } else if (e == "sched_switch") {
    OnSwitch(r);
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
