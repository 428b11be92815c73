#include "policy/policy_builder.h"

#include <algorithm>
#include <functional>
#include <map>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "models/bootstrap.h"
#include "models/context_features.h"
#include "models/wait_distribution.h"

namespace spintune {
namespace {

OptimizerOptions OptionsFor(const FitConfig& config, uint64_t irq_timeouts,
                            uint64_t spin_timeouts,
                            const std::vector<DefaultRule>& rules) {
  OptimizerOptions o;
  o.objective = config.objective;
  o.max_spin_ns = config.max_spin_ns;
  o.robustness_rho = config.robustness_rho;
  if (irq_timeouts > 0) {
    o.Disallow(Strategy::kIrq);
    o.Disallow(Strategy::kSpinThenIrq);
  }
  if (spin_timeouts > 0) {
    o.Disallow(Strategy::kSpin);
    o.Disallow(Strategy::kSpinThenIrq);
    o.Disallow(Strategy::kSleepThenSpin);
    o.Disallow(Strategy::kPollSleep);
  }
  // Let POLL_SLEEP try the driver's own intervals too.
  for (const auto& r : rules) {
    if (r.wait.strategy == Strategy::kPollSleep && r.wait.poll_interval_ns > 0) {
      o.extra_poll_intervals_ns.push_back(r.wait.poll_interval_ns);
    }
  }
  return o;
}

// The incumbent's wait for `entry`'s key, if it has one.
const WaitParams* IncumbentWait(const PolicyTable* incumbent, const PolicyEntry& entry) {
  if (incumbent == nullptr) return nullptr;
  for (const auto& e : incumbent->entries) {
    if (e.fallback == entry.fallback && e.key == entry.key) return &e.wait;
  }
  return nullptr;
}

// Fills the fitted part of `entry` from `histogram`.
absl::Status FitEntry(const LatencyHistogram& histogram, const PlatformModel& model,
                      const OptimizerOptions& options, const DeviceInfo& device,
                      const FitConfig& config, const PolicyTable* incumbent,
                      PolicyEntry* entry) {
  const WaitDistribution dist = WaitDistribution::FromHistogram(histogram);
  entry->samples = histogram.total_count();
  entry->p50_ns = histogram.QuantileNs(0.5);
  entry->p99_ns = histogram.QuantileNs(0.99);
  const PlatformCosts& costs = model.means();
  auto result = OptimizeWait(dist, model, options);
  if (!result.ok()) {
    return absl::Status(result.status().code(),
                        absl::StrCat("key ", entry->key.device, "/", entry->key.cpu_class,
                                     "/op", entry->key.opcode, "/sc",
                                     entry->key.size_class, ": ",
                                     result.status().message()));
  }
  entry->wait = result->params;
  entry->expected = result->expected;
  entry->expected_cost_ns = result->cost_ns;
  // Hysteresis 0 turns the incumbent off: the fit depends on the samples only.
  const WaitParams* held =
      config.hysteresis > 0 ? IncumbentWait(incumbent, *entry) : nullptr;
  // Only a wait that is still allowed and within today's caps can be kept.
  if (held != nullptr &&
      (!options.IsAllowed(held->strategy) || held->spin_ns > options.max_spin_ns ||
       (options.robustness_rho > 0 && held->strategy != Strategy::kSpinThenIrq))) {
    held = nullptr;
  }
  if (held != nullptr && options.robustness_rho > 0) {
    const double b = costs.irq_cpu_ns + config.objective.latency_weight * costs.irq_wake_ns;
    const double t = static_cast<double>(held->spin_ns);
    if (t < options.robustness_rho * b - 1 || t > b / options.robustness_rho + 1) held = nullptr;
  }
  if (held != nullptr && *held != entry->wait) {
    const ExpectedCost kept = EvaluateWait(dist, *held, model);
    const double kept_cost = kept.Cost(config.objective.latency_weight);
    const bool cap_ok = !config.objective.cap_latency_at_irq ||
                        kept.latency_ns <= dist.mean_ns() + costs.irq_wake_ns;
    if (cap_ok && result->cost_ns >= (1 - config.hysteresis) * kept_cost) {
      entry->wait = *held;
      entry->expected = kept;
      entry->expected_cost_ns = kept_cost;
    }
  }
  entry->families.assign(result->families.begin(), result->families.end());
  if (!entry->fallback) {
    entry->default_wait =
        MatchDefault(device.default_rules, entry->key.opcode, entry->key.size_class);
    if (entry->default_wait) {
      entry->default_expected = EvaluateWait(dist, *entry->default_wait, model);
      entry->default_cost_ns =
          entry->default_expected.Cost(config.objective.latency_weight);
    }
  }
  const WaitParams baseline = entry->default_wait ? *entry->default_wait : WaitParams::Irq();
  entry->gain_baseline = entry->default_wait ? "default" : "irq";
  const uint64_t seed = std::hash<std::string>()(absl::StrCat(
      entry->key.device, "/", entry->key.cpu_class, "/", entry->key.opcode, "/",
      entry->key.size_class));
  const GainInterval gain = BootstrapGain(dist, entry->wait, baseline, model,
                                          config.objective.latency_weight,
                                          config.bootstrap_resamples, config.confidence, seed);
  entry->gain_ns = gain.gain_ns;
  entry->gain_ci_low_ns = gain.low_ns;
  entry->gain_ci_high_ns = gain.high_ns;
  return absl::OkStatus();
}

// Per key, its samples in issue order with the context each one had.
absl::StatusOr<std::vector<std::vector<ContextSample>>> ContextSamplesByKey(
    const FitInputs& inputs) {
  std::vector<std::vector<ContextSample>> by_key(inputs.keys.size());
  std::vector<std::vector<size_t>> by_device(inputs.devices.size());
  for (size_t i = 0; i < inputs.requests.size(); ++i) {
    const TimedRequest& r = inputs.requests[i];
    if (r.key >= inputs.keys.size() || r.device >= inputs.devices.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("request ", i, " indexes no key or device"));
    }
    by_device[r.device].push_back(i);
  }
  for (size_t d = 0; d < by_device.size(); ++d) {
    std::vector<size_t>& idx = by_device[d];
    std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
      return inputs.requests[a].issue_ns < inputs.requests[b].issue_ns;
    });
    const std::vector<uint32_t>& writes = inputs.devices[d].write_opcodes;
    std::vector<DeviceRequest> device;
    device.reserve(idx.size());
    for (size_t i : idx) {
      const TimedRequest& r = inputs.requests[i];
      device.push_back({r.issue_ns, r.wait_ns, r.bytes,
                        std::find(writes.begin(), writes.end(), r.opcode) != writes.end()});
    }
    const std::vector<ContextVector> context = ComputeContext(device);
    for (size_t j = 0; j < idx.size(); ++j) {
      by_key[inputs.requests[idx[j]].key].push_back({device[j].wait_ns, context[j]});
    }
  }
  return by_key;
}

// The leaves of `samples`' context tree as entries of `key`, or nothing
// when the tree has one leaf (or a leaf has no feasible wait).
absl::StatusOr<std::vector<PolicyEntry>> FitLeaves(const PolicyKey& key,
                                                   const std::vector<ContextSample>& samples,
                                                   const PlatformModel& model,
                                                   const OptimizerOptions& options,
                                                   const DeviceInfo& device,
                                                   const FitConfig& config) {
  ContextOptions copt = config.context_options;
  copt.min_leaf_samples = std::max<size_t>(copt.min_leaf_samples, config.min_samples);
  auto fit = FitContextTree(samples, model, options, copt);
  if (!fit.ok()) return fit.status();
  std::vector<PolicyEntry> leaves;
  if (fit->tree.leaf_count() == 1) return leaves;
  const std::vector<ContextConditions> conditions = fit->tree.LeafConditions();
  for (size_t leaf = 0; leaf < conditions.size(); ++leaf) {
    LatencyHistogram h;
    for (size_t i : fit->leaf_samples[leaf]) h.Record(samples[i].x_ns);
    PolicyEntry entry;
    entry.key = key;
    entry.context = conditions[leaf];
    absl::Status s = FitEntry(h, model, options, device, config, nullptr, &entry);
    if (absl::IsFailedPrecondition(s)) return std::vector<PolicyEntry>();
    SPINTUNE_RETURN_IF_ERROR(s);
    leaves.push_back(std::move(entry));
  }
  return leaves;
}

}  // namespace

PlatformModel WithKeyIrqPath(const PlatformModel& model, const LatencyHistogram& histogram,
                             const CostMoments* irq) {
  if (irq == nullptr || irq->requests < kMinIrqPathRequests) return model;
  return model.WithIrqPath(irq->MeanCpuNs(),
                           std::max(0.0, irq->MeanLatencyNs() - histogram.MeanNs()));
}

absl::StatusOr<PolicyTable> BuildPolicyTable(const FitInputs& inputs, const FitConfig& config,
                                             const PolicyTable* incumbent) {
  if (inputs.cpu_classes.empty()) {
    return absl::InvalidArgumentError("target has no CPU classes");
  }
  PolicyTable table;
  table.board = inputs.board;
  table.objective_name = config.objective_name;
  table.latency_weight = config.objective.latency_weight;
  table.max_spin_ns = config.max_spin_ns;
  table.min_samples = config.min_samples;
  table.robustness_rho = config.robustness_rho;
  table.cpu_classes = inputs.cpu_classes;
  table.devices = inputs.devices;
  // One model per CPU class, in cpu_classes order; the table records means.
  std::vector<PlatformModel> models;
  for (auto& cpu : table.cpu_classes) {
    auto measured = inputs.measured_costs.find(cpu.name);
    models.push_back(measured == inputs.measured_costs.end()
                         ? PlatformModel(cpu.costs)
                         : PlatformModel::Measured(cpu.costs, measured->second));
    cpu.costs = models.back().means();
    absl::Status s = cpu.costs.Validate();
    if (!s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("cpu class ", cpu.name, ": ", s.message()));
    }
  }

  std::map<std::string, const DeviceInfo*> devices;
  for (const auto& d : inputs.devices) devices[d.name] = &d;
  // Per device: everything merged (for the fallback) and its timeouts.
  std::map<std::string, KeyEvidence> merged;
  std::vector<std::vector<ContextSample>> context;
  if (config.context && !inputs.requests.empty()) {
    SPINTUNE_ASSIGN_OR_RETURN(context, ContextSamplesByKey(inputs));
  }

  for (size_t key_index = 0; key_index < inputs.keys.size(); ++key_index) {
    const KeyEvidence& k = inputs.keys[key_index];
    const int cpu = table.CpuClassIndex(k.key.cpu_class);
    if (cpu < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown cpu class '", k.key.cpu_class, "'"));
    }
    auto dev = devices.find(k.key.device);
    if (dev == devices.end()) {
      return absl::InvalidArgumentError(absl::StrCat("unknown device '", k.key.device, "'"));
    }
    KeyEvidence& m = merged[k.key.device];
    m.histogram.Merge(k.histogram);
    m.errors += k.errors;
    m.irq_timeouts += k.irq_timeouts;
    m.spin_timeouts += k.spin_timeouts;
    if (k.histogram.total_count() < config.min_samples) continue;
    const OptimizerOptions options =
        OptionsFor(config, k.irq_timeouts, k.spin_timeouts, dev->second->default_rules);
    if (key_index < context.size() && context[key_index].size() >= config.min_samples) {
      auto leaves = FitLeaves(k.key, context[key_index], models[cpu], options, *dev->second,
                              config);
      if (!leaves.ok() && !absl::IsFailedPrecondition(leaves.status())) return leaves.status();
      if (leaves.ok() && !leaves->empty()) {
        for (auto& leaf : *leaves) table.entries.push_back(std::move(leaf));
        continue;
      }
    }
    PolicyEntry entry;
    entry.key = k.key;
    auto irq = inputs.irq_outcomes.find(k.key);
    const PlatformModel model = WithKeyIrqPath(
        models[cpu], k.histogram, irq == inputs.irq_outcomes.end() ? nullptr : &irq->second);
    absl::Status fitted =
        FitEntry(k.histogram, model, options, *dev->second, config, incumbent, &entry);
    // Every strategy excluded by timeouts: no entry, the fallback decides.
    if (absl::IsFailedPrecondition(fitted)) continue;
    SPINTUNE_RETURN_IF_ERROR(fitted);
    table.entries.push_back(std::move(entry));
  }

  for (const auto& d : inputs.devices) {
    PolicyEntry fallback;
    fallback.key = {kAnyCpuClass, d.name, 0, 0};
    fallback.fallback = true;
    const KeyEvidence& m = merged[d.name];
    absl::Status fitted = absl::FailedPreconditionError("too few samples");
    if (m.histogram.total_count() >= config.min_samples) {
      fitted = FitEntry(m.histogram, models[0],
                        OptionsFor(config, m.irq_timeouts, m.spin_timeouts,
                                   d.default_rules),
                        d, config, incumbent, &fallback);
      if (!fitted.ok() && !absl::IsFailedPrecondition(fitted)) return fitted;
    }
    if (!fitted.ok()) {
      // Too few samples, or every strategy excluded: the safe choice.
      PolicyEntry safe;
      safe.key = fallback.key;
      safe.fallback = true;
      safe.wait = WaitParams::Irq();
      safe.samples = m.histogram.total_count();
      fallback = std::move(safe);
    }
    table.entries.push_back(std::move(fallback));
  }
  SortEntries(&table.entries);
  return table;
}

}  // namespace spintune
