// The per-request cost model (summarised in README.md, "How it decides").
//
// A driver waits for a command whose completion time (issue -> hardware
// completion) is X ns. Each strategy costs CPU ns and adds latency ns:
//
//   strategy              CPU ns                         latency ns
//   IRQ                   irq_cpu                        X + irq_wake
//   SPIN (timeout tau)    min(X, tau)                    X
//   SPIN_THEN_IRQ(T)      X            if X <= T         X
//                         T + irq_cpu  if X >  T         X + irq_wake
//   SLEEP_THEN_SPIN(S)    timer_cpu    if X <= S+tw      S + tw
//                         timer_cpu + X - (S+tw) else    X
//     with a spin bound P = spin_ns > 0 (the driver's helper arms the IRQ
//     when the spin after the sleep exceeds P):
//                         timer_cpu + P + irq_cpu        X + irq_wake
//                                       if X > S+tw+P
//   POLL_SLEEP(I)         k (poll_read + timer_cpu)      k (I + tw)
//
// with tw = timer_wake and k = ceil(X / (I + tw)), the number of sleeps until
// the first poll at or after X (polls happen at 0, I+tw, 2(I+tw), ...).
// The objective is J = mean(CPU) + lambda * mean(latency); lambda is ns of
// CPU that one ns of added latency is worth. CPU time and latency are kept
// apart everywhere: the IRQ path costs irq_cpu of CPU but adds irq_wake of
// latency.
//
// Pure functions; thread-safe.
#ifndef SPINTUNE_MODELS_COST_MODEL_H_
#define SPINTUNE_MODELS_COST_MODEL_H_

#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace spintune {

// Values match proto spintune.v1.Strategy and the blob format.
enum class Strategy : uint8_t {
  kIrq = 1,
  kSpin = 2,
  kSpinThenIrq = 3,
  kSleepThenSpin = 4,
  kPollSleep = 5,
};
inline constexpr int kStrategyCount = 5;

// "irq", "spin", "spin_then_irq", "sleep_then_spin", "poll_sleep".
absl::string_view StrategyName(Strategy strategy);
absl::StatusOr<Strategy> ParseStrategy(absl::string_view name);
bool IsValidStrategy(int value);

// Per CPU class costs of the wait mechanisms, all in ns.
struct PlatformCosts {
  double irq_cpu_ns = 0;     // CPU burnt by one trip through the IRQ path
  double irq_wake_ns = 0;    // latency that trip adds
  double poll_read_ns = 0;   // CPU of one status read
  double timer_cpu_ns = 0;   // CPU of one short hrtimer sleep
  double timer_wake_ns = 0;  // oversleep of one short hrtimer sleep

  // OK when every field is finite, >= 0 and below one hour.
  absl::Status Validate() const;
};

// One wait policy: a strategy and the parameters it uses (0 otherwise).
struct WaitParams {
  Strategy strategy = Strategy::kIrq;
  uint64_t spin_ns = 0;           // SPIN_THEN_IRQ threshold T; SPIN timeout;
                                  // SLEEP_THEN_SPIN spin bound (0: none)
  uint64_t sleep_ns = 0;          // SLEEP_THEN_SPIN sleep S
  uint64_t poll_interval_ns = 0;  // POLL_SLEEP interval I

  static WaitParams Irq() { return {Strategy::kIrq, 0, 0, 0}; }
  static WaitParams Spin(uint64_t timeout_ns) {
    return {Strategy::kSpin, timeout_ns, 0, 0};
  }
  static WaitParams SpinThenIrq(uint64_t t_ns) {
    return {Strategy::kSpinThenIrq, t_ns, 0, 0};
  }
  // `spin_bound_ns` bounds the spin after the sleep (0: poll to completion).
  static WaitParams SleepThenSpin(uint64_t s_ns, uint64_t spin_bound_ns = 0) {
    return {Strategy::kSleepThenSpin, spin_bound_ns, s_ns, 0};
  }
  static WaitParams PollSleep(uint64_t i_ns) {
    return {Strategy::kPollSleep, 0, 0, i_ns};
  }
  friend bool operator==(const WaitParams& a, const WaitParams& b) {
    return a.strategy == b.strategy && a.spin_ns == b.spin_ns &&
           a.sleep_ns == b.sleep_ns && a.poll_interval_ns == b.poll_interval_ns;
  }
  friend bool operator!=(const WaitParams& a, const WaitParams& b) {
    return !(a == b);
  }
};

// The wait with its parameter, for people: "spin_then_irq T=12.5us",
// "sleep_then_spin S=3.20ms", "irq". One rendering for every tool.
std::string DescribeWait(const WaitParams& params);
// A duration for people: "850ns", "12.5us", "3.20ms", "1.50s".
std::string FormatDurationNs(double ns);

// POLL_SLEEP's k: the number of sleeps before the first poll at or after
// `x_ns`, i.e. ceil(x_ns / period_ns): the smallest k >= 0 with
// k * period_ns >= x_ns. `inv_period` must be 1.0 / period_ns (sweeps compute
// it once). Branch-free so the optimizer's sweep vectorizes: round(x / p) by
// the 2^52 trick is ceil or ceil - 1, and one comparison fixes the latter.
// REQUIRES: period_ns > 0, 0 <= x_ns / period_ns < 2^51.
inline double PollsUntil(double x_ns, double period_ns, double inv_period) {
  constexpr double kRound = 4503599627370496.0;  // 2^52
  const double k = (x_ns * inv_period + kRound) - kRound;
  return k + (k * period_ns < x_ns ? 1.0 : 0.0);
}

struct RequestCost {
  double cpu_ns = 0;
  double latency_ns = 0;
};

// Cost of one request that completes after `x_ns` under `params`.
RequestCost CostOfRequest(double x_ns, const WaitParams& params,
                          const PlatformCosts& costs);

// The busy-wait of one request in ns: what a max_spin_ns cap limits. SPIN:
// min(X, timeout); SPIN_THEN_IRQ: min(X, T); SLEEP_THEN_SPIN: the spin after
// the sleep, min(X - S - tw, bound) (unbounded when spin_ns is 0); 0 for
// IRQ and POLL_SLEEP.
double BusyWaitNs(double x_ns, const WaitParams& params, const PlatformCosts& costs);

// How CPU and latency are traded.
struct Objective {
  // ns of CPU one ns of added latency is worth (lambda).
  double latency_weight = 1.0;
  // When true, candidates whose mean latency exceeds the IRQ path's are
  // infeasible (the "cpu" objective: with lambda = 0 alone an endless sleep
  // would look free).
  bool cap_latency_at_irq = false;

  static Objective Balanced() { return {1.0, false}; }
  static Objective Latency() { return {10.0, false}; }
  static Objective Cpu() { return {0.0, true}; }
};

// "cpu" | "balanced" | "latency".
absl::StatusOr<Objective> ParseObjective(absl::string_view name);

}  // namespace spintune

#endif  // SPINTUNE_MODELS_COST_MODEL_H_
