// Parsing one line of kernel trace text into its common fields.
//
// Accepted dialects (docs/traces.md):
//  - the kernel's `trace` / `trace_pipe`: "COMM-PID [CPU] FLAGS TIME: EVENT: PAYLOAD"
//    with 4- or 5-character irq-info flags or none, with or without the
//    "(TGID)" column, PIDs of any width, task names with spaces;
//  - `trace-cmd report`: no flags, padded event names, optional
//    "INSTANCE:" prefix, "-l" (CPU digit glued to the flags, no brackets),
//    "-t" (ns timestamps), "--ts-diff" ("(+N)" after the time);
//  - `perf script`: "COMM PID [CPU] TIME: SUBSYS:EVENT: PAYLOAD".
// Timestamps are "SECONDS.FRACTION" (any number of fraction digits) or an
// integer clock (x86-tsc, uptime, counter), taken as ticks.
//
// Everything returned points into the line: no allocation, thread-safe.
#ifndef SPINTUNE_AGENT_TRACE_TRACE_LINE_H_
#define SPINTUNE_AGENT_TRACE_TRACE_LINE_H_

#include <cstdint>

#include "absl/strings/string_view.h"

namespace spintune {

// The fields of one hot event, already decoded from the kernel's binary
// record (the raw capture): what the correlator would otherwise parse out of
// the payload text. Strings point into the event's bytes (valid while the
// record is). Semantics as the text: `prev_state` is the first letter the
// kernel prints ('R' running or preempted, 'S', 'D', 'I', ...).
struct TypedEvent {
  enum class Kind : uint8_t {
    kBlockIssue, kBlockComplete, kBlockRequeue, kIrqEntry, kIrqExit, kWaking, kSwitch,
  };
  Kind kind = Kind::kBlockIssue;
  // block_rq_*: the device's dev_t halves, rwbs flags, request bytes (issue;
  // 0 when the kernel has no such field), position (~0: none) and errno.
  int major = 0, minor = 0;
  absl::string_view rwbs;
  uint64_t bytes = 0;
  uint64_t sector = 0;
  uint64_t nr_sector = 0;
  int64_t error = 0;
  // irq_handler_entry/exit
  int64_t irq = -1;
  absl::string_view irq_name;
  // sched_waking/sched_wakeup: pid; sched_switch: prev_pid, prev_state, next_pid
  int64_t pid = -1;
  int64_t prev_pid = -1;
  char prev_state = 'R';
  int64_t next_pid = -1;
};

struct TraceRecord {
  absl::string_view task;   // command name ("<idle>", "irq/36-virtio1-r")
  int pid = -1;
  int cpu = -1;
  absl::string_view flags;  // irq-info column, empty when absent
  uint64_t ts_ns = 0;       // integer clocks: ticks
  bool integer_clock = false;
  absl::string_view event;  // without subsystem ("block_rq_issue")
  absl::string_view payload;
  // Set by binary sources for the hot events (payload then empty); nullptr
  // for text, trace-cmd and replay sources, whose payload is parsed.
  const TypedEvent* typed = nullptr;

  // The flags say the event ran in hard IRQ ('h'/'H') or softirq ('s') context.
  bool InHardIrq() const { return flags.size() >= 3 && (flags[2] == 'h' || flags[2] == 'H'); }
  bool InSoftIrq() const { return flags.size() >= 3 && flags[2] == 's'; }
};

enum class LineKind {
  kEvent,      // a tracepoint line, *record filled
  kEmpty,
  kComment,    // "# ..." headers, "cpus=N", "version = N"
  kLost,       // "CPU:N [LOST n EVENTS]"
  kNotEvent,   // function tracer, stack traces, trace_printk without an event
  kMalformed,  // looks like trace text but does not parse
};

LineKind ParseTraceLine(absl::string_view line, TraceRecord* record);

// Number parsing for payloads: decimal or 0x hex, whole token.
bool ParseNumber(absl::string_view text, uint64_t* value);
bool ParseSigned(absl::string_view text, int64_t* value);

// The value of `key` in a "k=v k=v" or "k=v, k=v" payload (values end at a
// space or comma), or empty when absent. `key` must match a whole key.
absl::string_view FindField(absl::string_view payload, absl::string_view key);

}  // namespace spintune

#endif  // SPINTUNE_AGENT_TRACE_TRACE_LINE_H_
