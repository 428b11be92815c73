#include "models/cost_model.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace spintune {

absl::string_view StrategyName(Strategy strategy) {
  switch (strategy) {
    case Strategy::kIrq:
      return "irq";
    case Strategy::kSpin:
      return "spin";
    case Strategy::kSpinThenIrq:
      return "spin_then_irq";
    case Strategy::kSleepThenSpin:
      return "sleep_then_spin";
    case Strategy::kPollSleep:
      return "poll_sleep";
  }
  return "invalid";
}

bool IsValidStrategy(int value) { return value >= 1 && value <= kStrategyCount; }

absl::StatusOr<Strategy> ParseStrategy(absl::string_view name) {
  for (int v = 1; v <= kStrategyCount; ++v) {
    if (StrategyName(static_cast<Strategy>(v)) == name) {
      return static_cast<Strategy>(v);
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown strategy '", name,
      "' (expected irq, spin, spin_then_irq, sleep_then_spin or poll_sleep)"));
}

absl::Status PlatformCosts::Validate() const {
  constexpr double kOneHourNs = 3600e9;
  const struct {
    const char* name;
    double value;
  } fields[] = {{"irq_cpu_ns", irq_cpu_ns},
                {"irq_wake_ns", irq_wake_ns},
                {"poll_read_ns", poll_read_ns},
                {"timer_cpu_ns", timer_cpu_ns},
                {"timer_wake_ns", timer_wake_ns}};
  for (const auto& f : fields) {
    if (!std::isfinite(f.value) || f.value < 0 || f.value > kOneHourNs) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s must be a finite number in [0, 3.6e12] ns, got %g", f.name, f.value));
    }
  }
  return absl::OkStatus();
}

std::string FormatDurationNs(double ns) {
  if (ns >= 1e9) return absl::StrFormat("%.2fs", ns / 1e9);
  if (ns >= 1e6) return absl::StrFormat("%.2fms", ns / 1e6);
  if (ns >= 1e3) return absl::StrFormat("%.1fus", ns / 1e3);
  return absl::StrFormat("%.0fns", ns);
}

std::string DescribeWait(const WaitParams& p) {
  switch (p.strategy) {
    case Strategy::kIrq:
      return "irq";
    case Strategy::kSpin:
      return absl::StrCat("spin timeout=", FormatDurationNs(static_cast<double>(p.spin_ns)));
    case Strategy::kSpinThenIrq:
      return absl::StrCat("spin_then_irq T=", FormatDurationNs(static_cast<double>(p.spin_ns)));
    case Strategy::kSleepThenSpin:
      return absl::StrCat("sleep_then_spin S=", FormatDurationNs(static_cast<double>(p.sleep_ns)));
    case Strategy::kPollSleep:
      return absl::StrCat("poll_sleep I=",
                          FormatDurationNs(static_cast<double>(p.poll_interval_ns)));
  }
  return "?";
}

RequestCost CostOfRequest(double x, const WaitParams& p, const PlatformCosts& c) {
  switch (p.strategy) {
    case Strategy::kIrq:
      return {c.irq_cpu_ns, x + c.irq_wake_ns};
    case Strategy::kSpin: {
      const double tau = static_cast<double>(p.spin_ns);
      return {x <= tau ? x : tau, x};
    }
    case Strategy::kSpinThenIrq: {
      const double t = static_cast<double>(p.spin_ns);
      if (x <= t) return {x, x};
      return {t + c.irq_cpu_ns, x + c.irq_wake_ns};
    }
    case Strategy::kSleepThenSpin: {
      const double d = static_cast<double>(p.sleep_ns) + c.timer_wake_ns;
      if (x <= d) return {c.timer_cpu_ns, d};
      const double bound = static_cast<double>(p.spin_ns);
      if (p.spin_ns > 0 && x > d + bound) {
        return {c.timer_cpu_ns + bound + c.irq_cpu_ns, x + c.irq_wake_ns};
      }
      return {c.timer_cpu_ns + x - d, x};
    }
    case Strategy::kPollSleep: {
      const double period = static_cast<double>(p.poll_interval_ns) + c.timer_wake_ns;
      const double k = period > 0 ? PollsUntil(x, period, 1.0 / period) : 0.0;
      return {k * (c.poll_read_ns + c.timer_cpu_ns), k * period};
    }
  }
  return {0, 0};
}

double BusyWaitNs(double x, const WaitParams& p, const PlatformCosts& c) {
  switch (p.strategy) {
    case Strategy::kSpin:
    case Strategy::kSpinThenIrq:
      return std::min(x, static_cast<double>(p.spin_ns));
    case Strategy::kSleepThenSpin: {
      const double spun = x - static_cast<double>(p.sleep_ns) - c.timer_wake_ns;
      if (spun <= 0) return 0;
      return p.spin_ns > 0 ? std::min(spun, static_cast<double>(p.spin_ns)) : spun;
    }
    default:
      return 0;
  }
}

absl::StatusOr<Objective> ParseObjective(absl::string_view name) {
  if (name == "balanced") return Objective::Balanced();
  if (name == "latency") return Objective::Latency();
  if (name == "cpu") return Objective::Cpu();
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown objective '", name, "' (expected cpu, balanced or latency)"));
}

}  // namespace spintune
