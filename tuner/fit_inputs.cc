#include "tuner/fit_inputs.h"

namespace spintune {

FitInputs BuildFitInputs(const TargetRecord& target, std::vector<KeyEvidence> keys,
                         const std::vector<DispatchRecord>& dispatch) {
  FitInputs in;
  in.board = target.board;
  in.devices = target.devices;
  in.keys = std::move(keys);
  for (const auto& c : target.cpu_classes) {
    LatencyHistogram handler, wake;
    for (const auto& d : dispatch) {
      if (d.cpu_class != c.name) continue;
      handler.Merge(d.handler);
      wake.Merge(d.wake);
    }
    CpuClassInfo info;
    info.name = c.name;
    info.cpu_khz = c.cpu_khz;
    info.costs = c.declared;
    if (c.irq_overhead_cpu_ns > 0 && !handler.empty()) {
      info.costs.irq_cpu_ns = c.irq_overhead_cpu_ns + handler.MeanNs();
    }
    if (!wake.empty()) info.costs.irq_wake_ns = wake.MeanNs();
    in.cpu_classes.push_back(std::move(info));
  }
  return in;
}

}  // namespace spintune
