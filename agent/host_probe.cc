#include "agent/host_probe.h"

#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <fstream>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "agent/io_load.h"
#include "agent/live_trace.h"
#include "common/cpu_clock.h"

namespace spintune {
namespace {

uint64_t Quantile(std::vector<uint64_t> v, double q) {
  if (v.empty()) return 0;
  const size_t k = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

void Pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

long Futex(std::atomic<int>* addr, int op, int value) {
  return syscall(SYS_futex, reinterpret_cast<int*>(addr), op | FUTEX_PRIVATE_FLAG, value, nullptr,
                 nullptr, 0);
}

void WaitWhileEquals(std::atomic<int>* addr, int value) {
  while (addr->load(std::memory_order_acquire) == value) Futex(addr, FUTEX_WAIT, value);
}

// Two threads on one CPU pass a token `rounds` times; returns ns per hand-over.
uint64_t MeasureContextSwitch(int rounds) {
  std::atomic<int> turn{0};
  std::thread other([&] {
    Pin(0);
    for (int i = 0; i < rounds; ++i) {
      WaitWhileEquals(&turn, 0);
      turn.store(0, std::memory_order_release);
      Futex(&turn, FUTEX_WAKE, 1);
    }
  });
  Pin(0);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const uint64_t start = MonotonicNs();
  for (int i = 0; i < rounds; ++i) {
    turn.store(1, std::memory_order_release);
    Futex(&turn, FUTEX_WAKE, 1);
    WaitWhileEquals(&turn, 1);
  }
  const uint64_t elapsed = MonotonicNs() - start;
  other.join();
  return elapsed / (2 * static_cast<uint64_t>(rounds));
}

// A thread on CPU `sleeper_cpu` blocks; this thread wakes it. Returns the
// wake latencies and the CPU time of each wake call.
void MeasureWake(int rounds, int sleeper_cpu, bool eventfd_mode, std::vector<uint64_t>* latency,
                 std::vector<uint64_t>* call_cpu) {
  std::atomic<int> flag{0};
  std::atomic<int> ready{0};
  std::atomic<uint64_t> woke_at{0};
  std::atomic<uint64_t> sent_at{0};
  const int efd = eventfd_mode ? eventfd(0, EFD_CLOEXEC) : -1;
  std::thread sleeper([&] {
    Pin(sleeper_cpu);
    for (int i = 0; i < rounds; ++i) {
      ready.store(1, std::memory_order_release);
      if (eventfd_mode) {
        uint64_t v;
        if (read(efd, &v, sizeof(v)) != sizeof(v)) break;
      } else {
        WaitWhileEquals(&flag, 0);
        flag.store(0, std::memory_order_relaxed);
      }
      woke_at.store(MonotonicNs(), std::memory_order_release);
    }
  });
  for (int i = 0; i < rounds; ++i) {
    while (ready.load(std::memory_order_acquire) == 0) std::this_thread::yield();
    ready.store(0, std::memory_order_relaxed);
    // Let the sleeper actually block.
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    woke_at.store(0, std::memory_order_relaxed);
    const uint64_t cpu0 = ThreadCpuNs();
    const uint64_t t0 = MonotonicNs();
    sent_at.store(t0, std::memory_order_relaxed);
    if (eventfd_mode) {
      const uint64_t one = 1;
      if (write(efd, &one, sizeof(one)) != sizeof(one)) break;
    } else {
      flag.store(1, std::memory_order_release);
      Futex(&flag, FUTEX_WAKE, 1);
    }
    call_cpu->push_back(ThreadCpuNs() - cpu0);
    uint64_t t1;
    while ((t1 = woke_at.load(std::memory_order_acquire)) == 0) std::this_thread::yield();
    latency->push_back(t1 - t0);
  }
  sleeper.join();
  if (efd >= 0) close(efd);
}

void MeasureTimer(int rounds, uint64_t* cpu_ns, uint64_t* oversleep_ns) {
  // A driver's hrtimer sleep has the slack it asks for (usleep_range); a
  // user thread has 50 us by default. Measure the timer, not the default.
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  const timespec req = {0, 10'000};
  std::vector<uint64_t> over;
  const uint64_t cpu0 = ThreadCpuNs();
  for (int i = 0; i < rounds; ++i) {
    const uint64_t t0 = MonotonicNs();
    clock_nanosleep(CLOCK_MONOTONIC, 0, &req, nullptr);
    const uint64_t slept = MonotonicNs() - t0;
    over.push_back(slept > 10'000 ? slept - 10'000 : 0);
  }
  *cpu_ns = (ThreadCpuNs() - cpu0) / static_cast<uint64_t>(rounds);
  *oversleep_ns = Quantile(over, 0.5);
}

// ns per dependent load over a random cycle of cache lines in 64 MiB.
uint64_t MeasureUncachedLoad() {
  constexpr size_t kLine = 64 / sizeof(uint64_t);
  constexpr size_t kLines = (64u << 20) / 64;
  std::vector<uint64_t> mem(kLines * kLine);
  std::vector<uint32_t> order(kLines);
  std::iota(order.begin(), order.end(), 0u);
  std::mt19937 rng(7);
  for (size_t i = kLines - 1; i > 0; --i) {  // Sattolo: one cycle through all lines
    std::uniform_int_distribution<size_t> pick(0, i - 1);
    std::swap(order[i], order[pick(rng)]);
  }
  for (size_t i = 0; i < kLines; ++i) mem[order[i] * kLine] = order[(i + 1) % kLines] * kLine;
  size_t at = order[0] * kLine;
  const size_t steps = kLines;
  const uint64_t t0 = MonotonicNs();
  for (size_t i = 0; i < steps; ++i) at = mem[at];
  const uint64_t elapsed = MonotonicNs() - t0;
  volatile size_t sink = at;
  (void)sink;
  return elapsed / steps;
}

void ProbeTrace(const HostProbeOptions& o, HostProbeResult* r) {
  r->disk = DiskOf(o.io_file.substr(0, o.io_file.rfind('/') + 1));
  if (r->disk.empty()) {
    r->trace_note = "no block disk behind " + o.io_file;
    return;
  }
  auto live = LiveTrace::Start({r->disk}, CorrelatorOptions{});
  if (!live.ok()) {
    r->trace_note = std::string(live.status().message());
    return;
  }
  IoLoadOptions load;
  load.path = o.io_file;
  load.file_bytes = 32ull << 20;
  load.sizes = {4096};
  load.write_share = 0;
  load.duration = o.io_duration;
  auto done = RunIoLoad(load);
  if (!done.ok()) {
    r->trace_note = std::string(done.status().message());
    return;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // let the reader drain
  std::deque<CompletionEvent> completions;
  std::deque<DispatchEvent> dispatches;
  (*live)->Take(&completions, &dispatches, absl::ZeroDuration());
  r->traced_requests = completions.size();
  std::vector<uint64_t> handler, wake;
  for (const auto& d : dispatches) {
    if (d.device != r->disk) continue;
    r->irq_name = d.irq_name;
    handler.push_back(d.handler_ns);
    if (d.wake_ns) wake.push_back(*d.wake_ns);
  }
  r->dispatch_samples = handler.size();
  if (handler.empty()) {
    r->trace_note = absl::StrCat("no IRQ of ", r->disk, " seen in ", completions.size(),
                                 " traced requests");
    return;
  }
  r->irq_handler_ns = Quantile(handler, 0.5);
  r->irq_handler_p99_ns = Quantile(handler, 0.99);
  if (!wake.empty()) {
    r->irq_wake_ns = Quantile(wake, 0.5);
    r->irq_wake_p99_ns = Quantile(wake, 0.99);
  }
}

std::string Ns(uint64_t ns) { return absl::StrFormat("%.2f us", static_cast<double>(ns) / 1e3); }

}  // namespace

uint64_t HostCpuKhz() {
  std::ifstream max_freq("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq");
  uint64_t khz = 0;
  if (max_freq >> khz && khz > 0) return khz;
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("cpu MHz", 0) == 0) {
      double mhz = 0;
      if (absl::SimpleAtod(absl::StripAsciiWhitespace(line.substr(line.find(':') + 1)), &mhz)) {
        return static_cast<uint64_t>(mhz * 1000);
      }
    }
  }
  return 0;
}

std::string HostCpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0 || line.rfind("uarch", 0) == 0 ||
        line.rfind("cpu\t", 0) == 0) {
      return std::string(absl::StripAsciiWhitespace(line.substr(line.find(':') + 1)));
    }
  }
  return "unknown";
}

uint64_t HostProbeResult::IrqOverheadNs() const { return 2 * context_switch_ns; }

PlatformCosts HostProbeResult::Costs() const {
  PlatformCosts c;
  c.poll_read_ns = static_cast<double>(std::max<uint64_t>(1, uncached_load_ns));
  c.timer_cpu_ns = static_cast<double>(timer_cpu_ns);
  c.timer_wake_ns = static_cast<double>(timer_wake_ns);
  c.irq_cpu_ns = static_cast<double>(IrqOverheadNs() + irq_handler_ns.value_or(0));
  c.irq_wake_ns = static_cast<double>(irq_wake_ns.value_or(futex_wake_ns));
  return c;
}

std::string HostProbeResult::Report() const {
  std::string out = absl::StrFormat("host probe: %s, %d kHz\n", cpu_model, cpu_khz);
  auto row = [&](const std::string& what, const std::string& value) {
    absl::StrAppend(&out, absl::StrFormat("  %-44s %s\n", what, value));
  };
  row("context switch (futex hand-over, one CPU)", Ns(context_switch_ns));
  row("futex wake -> running (other CPU, p50)", Ns(futex_wake_ns));
  row("eventfd wake -> running (other CPU, p50)", Ns(eventfd_wake_ns));
  row("CPU of one futex wake call (p50)", Ns(wake_call_cpu_ns));
  row("10 us hrtimer sleep: CPU", Ns(timer_cpu_ns));
  row("10 us hrtimer sleep: oversleep (p50)", Ns(timer_wake_ns));
  row("uncached load (status read stand-in)", Ns(uncached_load_ns));
  if (irq_handler_ns) {
    row(absl::StrCat("IRQ handler ", irq_name, " (p50 / p99)"),
        absl::StrCat(Ns(*irq_handler_ns), " / ", Ns(*irq_handler_p99_ns)));
    row("IRQ -> waiter running (p50 / p99)",
        irq_wake_ns ? absl::StrCat(Ns(*irq_wake_ns), " / ", Ns(*irq_wake_p99_ns))
                    : std::string("not measured (no wake seen)"));
    row("traced requests / dispatch samples",
        absl::StrCat(traced_requests, " on ", disk, " / ", dispatch_samples));
  } else {
    row("IRQ handler and wake (live trace)", "not measured: " + trace_note);
  }
  const PlatformCosts c = Costs();
  absl::StrAppend(&out, "platform costs:\n");
  row("irq_cpu_ns", absl::StrCat(c.irq_cpu_ns));
  row("irq_wake_ns", absl::StrCat(c.irq_wake_ns));
  row("irq_overhead_cpu_ns", absl::StrCat(IrqOverheadNs()));
  row("poll_read_ns", absl::StrCat(c.poll_read_ns));
  row("timer_cpu_ns", absl::StrCat(c.timer_cpu_ns));
  row("timer_wake_ns", absl::StrCat(c.timer_wake_ns));
  return out;
}

HostProbeResult ProbeHost(const HostProbeOptions& o) {
  HostProbeResult r;
  r.cpu_khz = HostCpuKhz();
  r.cpu_model = HostCpuModel();
  const int cpus = static_cast<int>(std::thread::hardware_concurrency());
  const int rounds = std::max(10, o.rounds);
  // Each measurement runs in a thread of its own so that pinning does not
  // stick to the caller.
  std::thread([&] { r.context_switch_ns = MeasureContextSwitch(rounds * 5); }).join();
  std::vector<uint64_t> latency, call_cpu;
  std::thread([&] {
    Pin(0);
    MeasureWake(rounds, cpus > 1 ? 1 : 0, false, &latency, &call_cpu);
  }).join();
  r.futex_wake_ns = Quantile(latency, 0.5);
  r.wake_call_cpu_ns = Quantile(call_cpu, 0.5);
  latency.clear();
  call_cpu.clear();
  std::thread([&] {
    Pin(0);
    MeasureWake(rounds, cpus > 1 ? 1 : 0, true, &latency, &call_cpu);
  }).join();
  r.eventfd_wake_ns = Quantile(latency, 0.5);
  std::thread([&] { MeasureTimer(rounds, &r.timer_cpu_ns, &r.timer_wake_ns); }).join();
  r.uncached_load_ns = MeasureUncachedLoad();
  if (o.trace_io) {
    ProbeTrace(o, &r);
  } else {
    r.trace_note = "skipped";
  }
  return r;
}

}  // namespace spintune
