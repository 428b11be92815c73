#include "models/platform_model.h"

namespace spintune {

PlatformModel::PlatformModel(const PlatformCosts& costs)
    : means_(costs), constant_timer_wake_{costs.timer_wake_ns, 1.0} {}

PlatformModel PlatformModel::Measured(const PlatformCosts& declared,
                                      const MeasuredCosts& measured) {
  PlatformModel m(declared);
  if (measured.irq_overhead_cpu_ns > 0 && !measured.irq_handler.empty()) {
    m.means_.irq_cpu_ns = measured.irq_overhead_cpu_ns + measured.irq_handler.MeanNs();
  }
  if (!measured.irq_wake.empty()) {
    m.means_.irq_wake_ns = measured.irq_wake.MeanNs();
  }
  const LatencyHistogram& timer = measured.timer_wake;
  if (!timer.empty()) {
    const double total = static_cast<double>(timer.total_count());
    m.timer_wake_.reserve(timer.buckets().size());
    double mean = 0;
    for (const auto& [index, count] : timer.buckets()) {
      const CostAtom atom{LatencyHistogram::BucketMidNs(index),
                          static_cast<double>(count) / total};
      m.timer_wake_.push_back(atom);
      mean += atom.value_ns * atom.probability;
    }
    m.means_.timer_wake_ns = mean;
  }
  return m;
}

RequestCost ExpectedRequestCost(double x_ns, const WaitParams& params,
                                const PlatformModel& model) {
  const auto atoms = model.timer_wake();
  const bool uses_timer =
      params.strategy == Strategy::kSleepThenSpin || params.strategy == Strategy::kPollSleep;
  if (!uses_timer || atoms.size() == 1) return CostOfRequest(x_ns, params, model.means());
  PlatformCosts costs = model.means();
  RequestCost sum;
  for (const CostAtom& atom : atoms) {
    costs.timer_wake_ns = atom.value_ns;
    const RequestCost c = CostOfRequest(x_ns, params, costs);
    sum.cpu_ns += atom.probability * c.cpu_ns;
    sum.latency_ns += atom.probability * c.latency_ns;
  }
  return sum;
}

}  // namespace spintune
