// Host probe (`spintune-agent --probe`): measures this machine's platform
// costs (DESIGN §2) instead of taking them from a file.
//
//  - context switch: two threads pinned to one CPU hand a futex back and
//    forth; one hand-over = wake call + switch;
//  - futex and eventfd wake: a thread blocked on another CPU is woken; the
//    time from the wake call to it running, and the CPU of the wake call;
//  - timer: 10 µs clock_nanosleep with 1 ns timer slack; its oversleep and
//    its CPU time;
//  - status read: one dependent load that misses every cache (a pointer
//    chase over 64 MiB), the stand-in for an uncached MMIO read;
//  - IRQ handler and wake-to-run latency (root): a live trace of O_DIRECT
//    reads on the root disk, through the same correlator as everything else.
//
// Mapping to PlatformCosts (docs/traces.md, "Host probe"):
//   poll_read_ns = uncached load; timer_cpu_ns / timer_wake_ns = the timer's;
//   irq_overhead_cpu_ns = 2 context switches (out of the waiter and back);
//   irq_cpu_ns = irq_overhead_cpu_ns + handler p50;
//   irq_wake_ns = traced wake p50, else the futex wake latency.
//
// Thread-safety: ProbeHost starts and joins its own threads.
#ifndef SPINTUNE_AGENT_HOST_PROBE_H_
#define SPINTUNE_AGENT_HOST_PROBE_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/time/time.h"
#include "policy/policy_table.h"

namespace spintune {

struct HostProbeOptions {
  bool trace_io = true;                  // the IRQ measurement (needs root)
  std::string io_file = "/var/tmp/spintune-probe.bin";
  absl::Duration io_duration = absl::Milliseconds(1500);
  int rounds = 2000;                     // per synthetic measurement
};

struct HostProbeResult {
  uint64_t cpu_khz = 0;
  std::string cpu_model;
  uint64_t context_switch_ns = 0;
  uint64_t futex_wake_ns = 0;       // wake call -> woken thread running (p50)
  uint64_t eventfd_wake_ns = 0;
  uint64_t wake_call_cpu_ns = 0;    // CPU of one FUTEX_WAKE (p50)
  uint64_t timer_cpu_ns = 0;
  uint64_t timer_wake_ns = 0;       // oversleep of a 10 µs sleep (p50)
  uint64_t uncached_load_ns = 0;
  // From the live trace.
  std::string disk;
  std::string irq_name;
  uint64_t traced_requests = 0;
  uint64_t dispatch_samples = 0;
  std::optional<uint64_t> irq_handler_ns, irq_handler_p99_ns;
  std::optional<uint64_t> irq_wake_ns, irq_wake_p99_ns;
  std::string trace_note;           // why the trace part is missing

  PlatformCosts Costs() const;
  // The part of irq_cpu_ns that is not the handler (sent with the hello so
  // the tuner can add the handler time it measures from dispatch samples).
  uint64_t IrqOverheadNs() const;
  // A table of the measurements and the costs derived from them.
  std::string Report() const;
};

HostProbeResult ProbeHost(const HostProbeOptions& options);

// This machine's nominal clock (kHz) and CPU model, from /proc/cpuinfo.
uint64_t HostCpuKhz();
std::string HostCpuModel();

}  // namespace spintune

#endif  // SPINTUNE_AGENT_HOST_PROBE_H_
