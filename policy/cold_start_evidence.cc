#include "policy/cold_start_evidence.h"

#include <algorithm>
#include <utility>

#include "common/status_macros.h"

namespace spintune {
namespace {

const DeviceInfo* FindDevice(const std::vector<DeviceInfo>& devices, const std::string& name) {
  for (const auto& d : devices) {
    if (d.name == name) return &d;
  }
  return nullptr;
}

}  // namespace

ColdStartEvidence::ColdStartEvidence(FitConfig config) : config_(std::move(config)) {}

Eigen::VectorXd ColdStartEvidence::Quantiles(const KeyContribution& key) {
  Eigen::VectorXd q(kQuantileGridPoints);
  for (int i = 0; i < kQuantileGridPoints; ++i) {
    q(i) = LatencyHistogram::BucketMidNs(key.quantile_buckets[i]);
  }
  return q;
}

void ColdStartEvidence::Erase(int64_t board_id) {
  auto it = boards_.find(board_id);
  if (it == boards_.end()) return;
  const Board& b = it->second;
  for (const auto& k : b.keys) {
    k.group->second.Remove(b.cpu_khz, k.weight, Quantiles(k));
    if (k.group->second.observations() == 0) groups_.erase(k.group);
  }
  if (b.cpu_khz > 0) costs_.Remove(b.cpu_khz, 1.0, b.costs);
  boards_.erase(it);
}

void ColdStartEvidence::Set(int64_t board_id, const BoardEvidence& evidence) {
  Erase(board_id);
  Board& b = boards_[board_id];
  if (evidence.cpu_classes.empty() || evidence.cpu_classes[0].cpu_khz == 0) return;
  b.cpu_khz = static_cast<double>(evidence.cpu_classes[0].cpu_khz);
  b.costs = CostOutputs(evidence.cpu_classes[0].costs);
  costs_.Add(b.cpu_khz, 1.0, b.costs);
  for (const auto& k : evidence.keys) {
    const DeviceInfo* d = FindDevice(evidence.devices, k.key.device);
    if (d == nullptr || k.histogram.total_count() < config_.min_samples) continue;
    KeyContribution c;
    c.group = groups_
                  .try_emplace(GroupKey{d->driver, d->model, k.key.opcode, k.key.size_class},
                               kQuantileGridPoints)
                  .first;
    c.weight = static_cast<double>(k.histogram.total_count());
    c.quantile_buckets = GridQuantileBuckets(k.histogram);
    c.group->second.Add(b.cpu_khz, c.weight, Quantiles(c));
    b.keys.push_back(c);
  }
}

absl::StatusOr<PolicyTable> ColdStartEvidence::Predict(const FitInputs& target,
                                                       int64_t exclude) const {
  if (target.cpu_classes.empty()) return absl::InvalidArgumentError("target has no CPU class");
  const double khz = static_cast<double>(target.cpu_classes[0].cpu_khz);
  if (!(khz > 0)) return absl::InvalidArgumentError("target CPU class has no clock");

  // The sums `exclude` is in, without it.
  const Board* left_out = nullptr;
  if (auto it = boards_.find(exclude); it != boards_.end()) left_out = &it->second;
  std::map<const GroupKey*, InverseClockSums> without;
  InverseClockSums costs = costs_;
  if (left_out != nullptr) {
    for (const auto& k : left_out->keys) {
      without.try_emplace(&k.group->first, k.group->second)
          .first->second.Remove(left_out->cpu_khz, k.weight, Quantiles(k));
    }
    if (left_out->cpu_khz > 0) costs.Remove(left_out->cpu_khz, 1.0, left_out->costs);
  }

  FitInputs inputs = target;
  inputs.keys.clear();
  // Platform costs: declared, else predicted from the other boards.
  for (auto& cpu : inputs.cpu_classes) {
    if (cpu.costs.irq_cpu_ns > 0 || cpu.costs.irq_wake_ns > 0) continue;
    if (costs.observations() > 0) cpu.costs = CostsFromSums(costs, khz);
  }

  // Weight: enough synthetic samples to pass min_samples gating.
  const double per_point = std::max(1.0, static_cast<double>(config_.min_samples) / 50.0);
  for (const auto& device : target.devices) {
    for (auto g = groups_.lower_bound(GroupKey{device.driver, device.model, 0, 0});
         g != groups_.end() && std::get<0>(g->first) == device.driver &&
         std::get<1>(g->first) == device.model;
         ++g) {
      const auto w = without.find(&g->first);
      const InverseClockSums& sums = w == without.end() ? g->second : w->second;
      if (sums.observations() == 0) continue;
      KeyEvidence e;
      e.key = {inputs.cpu_classes[0].name, device.name, std::get<2>(g->first),
               std::get<3>(g->first)};
      for (double q : CrossBoardModel::FromSums(sums).PredictQuantiles(khz)) {
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
  SPINTUNE_ASSIGN_OR_RETURN(PolicyTable table, BuildPolicyTable(inputs, config_));
  table.origin = "predicted";
  return table;
}

}  // namespace spintune
