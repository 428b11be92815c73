#include "tuner/fit_inputs.h"

namespace spintune {

FitInputs BuildFitInputs(const TargetRecord& target, std::vector<KeyEvidence> keys,
                         const std::vector<DispatchRecord>& dispatch,
                         const std::vector<TimerRecord>& timers) {
  FitInputs in;
  in.board = target.board;
  in.devices = target.devices;
  in.keys = std::move(keys);
  for (const auto& c : target.cpu_classes) {
    MeasuredCosts measured;
    measured.irq_overhead_cpu_ns = c.irq_overhead_cpu_ns;
    for (const auto& d : dispatch) {
      if (d.cpu_class != c.name) continue;
      measured.irq_handler.Merge(d.handler);
      measured.irq_wake.Merge(d.wake);
    }
    for (const auto& t : timers) {
      if (t.cpu_class == c.name) measured.timer_wake.Merge(t.oversleep);
    }
    CpuClassInfo info;
    info.name = c.name;
    info.cpu_khz = c.cpu_khz;
    info.costs = PlatformModel::Measured(c.declared, measured).means();
    in.cpu_classes.push_back(std::move(info));
    in.measured_costs[c.name] = std::move(measured);
  }
  return in;
}

}  // namespace spintune
