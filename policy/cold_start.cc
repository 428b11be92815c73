#include "policy/cold_start.h"

#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "models/cross_board_model.h"

namespace spintune {
namespace {

const DeviceInfo* FindDevice(const std::vector<DeviceInfo>& devices, const std::string& name) {
  for (const auto& d : devices) {
    if (d.name == name) return &d;
  }
  return nullptr;
}

}  // namespace

absl::StatusOr<PolicyTable> PredictPolicyTable(const std::vector<BoardEvidence>& others,
                                               const FitInputs& target,
                                               const FitConfig& config) {
  if (target.cpu_classes.empty()) return absl::InvalidArgumentError("target has no CPU class");
  const double khz = static_cast<double>(target.cpu_classes[0].cpu_khz);
  if (!(khz > 0)) return absl::InvalidArgumentError("target CPU class has no clock");

  FitInputs inputs = target;
  inputs.keys.clear();
  // Platform costs: declared, else predicted from the other boards.
  for (auto& cpu : inputs.cpu_classes) {
    if (cpu.costs.irq_cpu_ns > 0 || cpu.costs.irq_wake_ns > 0) continue;
    std::vector<CostObservation> obs;
    for (const auto& b : others) {
      if (!b.cpu_classes.empty() && b.cpu_classes[0].cpu_khz > 0) {
        obs.push_back({static_cast<double>(b.cpu_classes[0].cpu_khz), b.cpu_classes[0].costs});
      }
    }
    auto predicted = PredictCosts(obs, khz);
    if (predicted.ok()) cpu.costs = *predicted;
  }

  for (const auto& device : target.devices) {
    // (opcode, size class) -> observations across boards.
    std::map<std::pair<uint32_t, uint32_t>, std::vector<BoardObservation>> by_key;
    for (const auto& b : others) {
      if (b.cpu_classes.empty() || b.cpu_classes[0].cpu_khz == 0) continue;
      for (const auto& k : b.keys) {
        const DeviceInfo* d = FindDevice(b.devices, k.key.device);
        if (d == nullptr || d->driver != device.driver || d->model != device.model) continue;
        if (k.histogram.total_count() < config.min_samples) continue;
        by_key[{k.key.opcode, k.key.size_class}].push_back(
            {static_cast<double>(b.cpu_classes[0].cpu_khz), GridQuantiles(k.histogram),
             static_cast<double>(k.histogram.total_count())});
      }
    }
    for (const auto& [key, observations] : by_key) {
      SPINTUNE_ASSIGN_OR_RETURN(CrossBoardModel model, CrossBoardModel::Fit(observations));
      KeyEvidence e;
      e.key = {inputs.cpu_classes[0].name, device.name, key.first, key.second};
      // Weight: enough synthetic samples to pass min_samples gating.
      const double per_point = std::max(1.0, static_cast<double>(config.min_samples) / 50.0);
      for (double q : model.PredictQuantiles(khz)) {
        e.histogram.Record(static_cast<uint64_t>(std::max(0.0, q)),
                           static_cast<uint64_t>(per_point));
      }
      inputs.keys.push_back(std::move(e));
    }
  }
  if (inputs.keys.empty()) {
    return absl::NotFoundError(
        "no other board shares a device (driver and model) with this one");
  }
  SPINTUNE_ASSIGN_OR_RETURN(PolicyTable table, BuildPolicyTable(inputs, config));
  table.origin = "predicted";
  return table;
}

}  // namespace spintune
