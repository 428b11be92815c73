// TraceCorrelator: turns trace records (trace_line.h) into completion
// samples (per request: device, opcode, bytes, wait, how it waited) and
// IRQ dispatch samples (handler time, wake latency of the waiter), the same
// samples the simulated boards produce. Shared by replay and live capture.
//
// Pairing (docs/traces.md):
//  - block_rq_issue -> block_rq_complete per (dev, sector), FIFO; flushes and
//    passthrough per (dev, op); partial completions move the key forward;
//    block_rq_requeue forgets the request; opcode = REQ_OP_* from rwbs;
//  - mmc_request_start -> mmc_request_done per (host, request pointer); a
//    second start before the done is a retry and keeps the first;
//    CQE requests (cmd_opcode 0, tag >= 0) per (host, tag) with opcode 46/47
//    (EXECUTE_READ/WRITE_TASK); bytes = blocks x block size (the v4.15
//    swapped block_size/blk_addr print is undone); errors from *_err;
//  - spi_transfer_start -> stop per (bus.cs, transfer pointer), opcode 0;
//    spi_message_start -> done per (bus.cs, message pointer), opcode 1;
//  - user-defined pairs (EventPair) on the fields they name;
//  - irq_handler_entry -> exit per (CPU, irq): the handler time.
// A completion that runs in the interrupt context of a device IRQ (hard or
// soft IRQ on the CPU that just took it, or its threaded handler irq/N-*)
// went through the IRQ path: its completion time ends at that
// irq_handler_entry, the IRQ is attributed to the device, and the waiter's
// wake latency is that entry -> sched_waking/sched_wakeup -> sched_switch
// into the waiter. A completion in the issuer's own process context was
// polled ("spin"); anything else is "unknown".
//
// Memory is bounded (max_pending); old unpaired entries are evicted and
// counted. Thread-compatible: one correlator per thread.
#ifndef SPINTUNE_AGENT_TRACE_TRACE_CORRELATOR_H_
#define SPINTUNE_AGENT_TRACE_TRACE_CORRELATOR_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "agent/trace/trace_line.h"

namespace spintune {

enum class TracePath { kUnknown = 0, kSpin = 1, kIrq = 2 };

struct CompletionEvent {
  std::string device;
  uint32_t opcode = 0;
  uint64_t bytes = 0;
  uint64_t wait_ns = 0;
  TracePath path = TracePath::kUnknown;
  bool error = false;
  int cpu = -1;  // the CPU that issued
  uint64_t issue_ns = 0;  // trace timestamp of the event that started it
  uint64_t end_ns = 0;  // trace timestamp of the event that ended it
};

struct DispatchEvent {
  int cpu = -1;
  int irq = -1;
  std::string irq_name;
  std::string device;
  uint64_t handler_ns = 0;
  std::optional<uint64_t> wake_ns;
  uint64_t entry_ns = 0;  // the IRQ's entry (trace clock)
  // The earliest issue of the requests it completed (UINT64_MAX: none). Its
  // waiter was seen to sleep only if the sched events were on since then.
  uint64_t first_issue_ns = UINT64_MAX;
};

// A vendor's own start/end tracepoints (--pairs FILE, a JSON list).
struct EventPair {
  std::string name;         // the device name of its samples
  std::string start_event;
  std::string end_event;
  std::vector<std::string> match_fields;  // fields that pair a start with its end
  std::string opcode_field; // empty: opcode 0
  std::string size_field;   // empty: 0 bytes
  uint64_t size_unit_bytes = 1;
};

// Parses the --pairs JSON; InvalidArgument naming the field.
absl::StatusOr<std::vector<EventPair>> ParseEventPairs(const std::string& json_text);

struct CorrelatorOptions {
  std::vector<EventPair> pairs;
  // IRQ name -> device (--irq DEVICE=NAME); others are learned from completions.
  std::map<std::string, std::string> irq_device;
  // Block device names from "major,minor" (default "major:minor").
  std::function<std::string(int major, int minor)> block_device_name;
  size_t max_pending = 1 << 16;
  uint64_t irq_window_ns = 2'000'000;   // completion at most this after the IRQ
  uint64_t wake_window_ns = 20'000'000; // waiter running at most this after the IRQ
};

struct CorrelatorStats {
  uint64_t records = 0;
  uint64_t completions = 0;
  uint64_t dispatches = 0;
  uint64_t unpaired_ends = 0;   // an end without its start (capture began mid-request)
  // Data-less preflush writes ("WS () 0 + 0") the block layer completes
  // through its flush sequence: the kernel counts them as requests, the
  // driver only ever sees the flush request ("FF") issued in their place.
  uint64_t flush_sequence_ends = 0;
  uint64_t evicted = 0;         // starts never ended, dropped to bound memory
  uint64_t requeued = 0;
  uint64_t retried = 0;         // MMC requests re-issued before their done
  uint64_t malformed_payloads = 0;
  uint64_t other_events = 0;    // events the correlator does not use
  uint64_t sched_events = 0;    // sched_waking and sched_switch records
  uint64_t last_ts_ns = 0;      // timestamp of the last record processed
};

class TraceCorrelator {
 public:
  explicit TraceCorrelator(CorrelatorOptions options);

  // Feeds one record; false when its payload did not parse (counted).
  bool Process(const TraceRecord& record);
  // Emits what is still waiting (dispatch samples without a wake).
  void Finish();

  std::deque<CompletionEvent>& completions() { return completions_; }
  std::deque<DispatchEvent>& dispatches() { return dispatches_; }
  const CorrelatorStats& stats() const { return stats_; }

 private:
  struct Pending {
    uint64_t ts_ns;
    int cpu;
    int pid;
    uint32_t opcode;
    uint64_t bytes;
    uint64_t remaining_sectors;  // block partial completions
    uint64_t seq;                // arrival order, for eviction
  };
  struct IrqOccurrence {
    int irq = -1;
    std::string name;
    uint64_t entry_ns = 0;
    uint64_t exit_ns = 0;
    bool exited = false;
    int cpu = -1;
    std::string device;          // the device of a completion it delivered
    int slot = -1;               // its dispatch sample in held_, once exited
    int waiter_pid = -1;         // the waiter of a completion it delivered
    bool waiter_woken = false;   // woken inside the hard handler, before the exit
    uint64_t first_issue_ns = UINT64_MAX;  // of the completions it delivered
  };
  struct WakeWait {
    int pid;
    uint64_t irq_entry_ns;
    bool woken = false;
    size_t dispatch_slot;        // index into held_
  };

  bool OnBlockIssue(const TraceRecord& r);
  bool OnBlockComplete(const TraceRecord& r);
  bool OnBlockRequeue(const TraceRecord& r);
  bool OnMmc(const TraceRecord& r, bool start);
  bool OnSpi(const TraceRecord& r, bool start, bool message);
  bool OnPair(const TraceRecord& r, const EventPair& pair, bool start);
  bool OnIrqEntry(const TraceRecord& r);
  bool OnIrqExit(const TraceRecord& r);
  // Holds the dispatch sample of an exited IRQ until its waiter runs.
  void AddDispatch(IrqOccurrence* occurrence, const std::string& device);
  void OnWaking(const TraceRecord& r);
  void OnSwitch(const TraceRecord& r);
  // The woken waiter `pid` runs at `ts_ns`: completes its dispatch sample.
  bool ResolveWake(int pid, uint64_t ts_ns);

  void Start(const std::string& key, const TraceRecord& r, uint32_t opcode, uint64_t bytes,
             uint64_t sectors = 0);
  std::optional<Pending> Take(const std::string& key);
  // Classifies and emits one completion that ended at `r`.
  void Complete(const std::string& device, const Pending& p, const TraceRecord& r, bool error);
  void ExpireWakes(uint64_t now_ns);
  void Emit(size_t slot);

  CorrelatorOptions options_;
  CorrelatorStats stats_;
  // Per key its starts, oldest first; nearly always one (a flush queue's key
  // can hold a few). Flat and inline: a request's start and end allocate
  // nothing here but a key longer than the string's inline capacity.
  absl::flat_hash_map<std::string, absl::InlinedVector<Pending, 1>> pending_;
  std::deque<std::pair<uint64_t, std::string>> order_;  // (seq, key) for eviction
  uint64_t next_seq_ = 0;
  size_t pending_count_ = 0;
  std::map<int, IrqOccurrence> last_irq_by_cpu_;
  std::map<int, int> last_cpu_by_irq_;  // irq -> CPU of its last occurrence
  std::map<std::string, std::string> learned_irq_device_;
  std::vector<std::optional<DispatchEvent>> held_;   // waiting for a wake
  size_t live_held_ = 0;
  size_t woken_count_ = 0;  // wakes_ entries whose waiter was woken
  std::deque<WakeWait> wakes_;
  absl::flat_hash_map<int, uint64_t> blocked_since_;  // pid -> when it switched out asleep
  std::deque<CompletionEvent> completions_;
  std::deque<DispatchEvent> dispatches_;
};

// Block REQ_OP_* of an rwbs string ("RS" -> 0, "FWS" -> 1, "FF" -> 2, "N" -> 34).
uint32_t OpcodeFromRwbs(absl::string_view rwbs);

}  // namespace spintune

#endif  // SPINTUNE_AGENT_TRACE_TRACE_CORRELATOR_H_
