// BuildPolicyTable: fits a target's policy table from its per-key evidence.
//
// The one fitting path of the product: the tuner calls it on the histograms
// in SQLite, `spintune tune` on histograms built from a CSV, so both give the
// same table for the same samples. For every key with at least
// FitConfig::min_samples samples it runs OptimizeWait() on the key's
// histogram with its CPU class's platform model; each device also gets a
// fallback entry fitted on all of its samples (with the first CPU class's
// model), or IRQ when the device has fewer than min_samples samples.
//
// A CPU class's model is its declared costs with the measured distributions
// of FitInputs::measured_costs in their place (PlatformModel::Measured):
// the means of irq_cpu and irq_wake, the atoms of the timer oversleep, over
// which every candidate is priced exactly. The table's cpu_classes record
// the means the table was fitted with.
//
// Every fitted entry carries its expected gain over the driver default (or
// IRQ when the driver's rule is unknown) with a bootstrap confidence interval
// (models/bootstrap.h), seeded from the key so the table is deterministic.
//
// A key whose IRQ path timed out excludes IRQ and SPIN_THEN_IRQ; a key whose
// polling path timed out excludes SPIN, SPIN_THEN_IRQ, SLEEP_THEN_SPIN and
// POLL_SLEEP. Plain errors (CRC, card errors) exclude nothing.
//
// Pure function; thread-safe.
#ifndef SPINTUNE_POLICY_POLICY_BUILDER_H_
#define SPINTUNE_POLICY_POLICY_BUILDER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "models/context_tree.h"
#include "models/latency_histogram.h"
#include "models/platform_model.h"
#include "models/cost_moments.h"
#include "policy/policy_table.h"

namespace spintune {

// Everything measured for one key.
struct KeyEvidence {
  PolicyKey key;
  LatencyHistogram histogram;
  uint64_t errors = 0;         // requests that completed with an error
  uint64_t irq_timeouts = 0;   // timeouts while waiting on the IRQ path
  uint64_t spin_timeouts = 0;  // timeouts while polling
  uint64_t irq_path = 0;       // requests the driver completed via its IRQ
  uint64_t spin_path = 0;      // requests the driver completed by polling
};

// One request with its issue time: what the context features of its key's
// samples are recomputed from.
struct TimedRequest {
  uint32_t key = 0;     // index into FitInputs::keys
  uint32_t device = 0;  // index into FitInputs::devices
  uint32_t opcode = 0;
  uint64_t bytes = 0;
  uint64_t issue_ns = 0;
  uint64_t wait_ns = 0;
};

struct FitConfig {
  std::string objective_name = "balanced";  // for the record only
  Objective objective = Objective::Balanced();
  uint64_t max_spin_ns = 1'000'000;
  uint64_t min_samples = 50;
  // Robustness clamp of SPIN_THEN_IRQ thresholds (OptimizerOptions); 0: off.
  double robustness_rho = 0;
  // Bootstrap of every entry's gain: resamples and confidence level.
  int bootstrap_resamples = 200;
  double confidence = 0.95;
  // Hysteresis against an incumbent table: a key keeps its incumbent wait
  // unless the new fit is cheaper on the current evidence by this fraction.
  // 0 ignores the incumbent.
  double hysteresis = 0.02;
  // Context leaves (issue 16): with FitInputs::requests, each key may be
  // split by a context tree (models/context_tree.h) whose leaves are fitted
  // as entries; a key whose tree has one leaf keeps one entry.
  bool context = true;
  ContextOptions context_options;
};

inline constexpr uint64_t kMinIrqPathRequests = 100;

struct FitInputs {
  std::string board;
  std::vector<CpuClassInfo> cpu_classes;  // declared (constant) costs
  // Measured platform costs by CPU class name; a class without an entry, or
  // an empty histogram, keeps its constant.
  std::map<std::string, MeasuredCosts> measured_costs;
  std::vector<DeviceInfo> devices;
  std::vector<KeyEvidence> keys;
  // Optional: what a driver measured for a key while it waited by the IRQ
  // path (outcomes, docs/verification.md). A key with at least
  // kMinIrqPathRequests of them is priced with its own IRQ path: irq_cpu =
  // their mean CPU, irq_wake = their mean latency - the mean completion time
  // of its evidence (>= 0), in place of its CPU class's. On a VM or with deep
  // idle states the wake-up cost depends on how long the CPU slept, so one
  // constant per class misprices some keys.
  std::map<PolicyKey, CostMoments> irq_outcomes;
  // Optional: every request with its issue time (any order), for context.
  std::vector<TimedRequest> requests;
};

// `model`, or, when `irq` (may be null) has at least kMinIrqPathRequests,
// `model` with the IRQ path measured for a key whose completions are
// `histogram`: irq_cpu = irq's mean CPU, irq_wake = its mean latency - the
// histogram's mean (>= 0). See FitInputs::irq_outcomes.
PlatformModel WithKeyIrqPath(const PlatformModel& model, const LatencyHistogram& histogram,
                             const CostMoments* irq);

// `incumbent` (may be null) is the table in force: for every key it also has,
// its wait is kept unless the fresh optimum costs less than (1 - hysteresis)
// times the incumbent wait's cost on the same evidence, so tables change only
// for a real gain (and do not flap between near-equal thresholds). Context
// leaves are fitted without an incumbent.
//
// Context: per device, the requests' features are recomputed in issue order
// (ComputeContext(); a write is an opcode in the device's write_opcodes),
// and each key with at least min_samples samples gets FitContextTree() over
// its samples in issue order. Each leaf with more than one is an entry of
// its own, with the leaf's conditions, fitted by the same path as any entry
// on the samples it selects.
//
// Errors: InvalidArgument when a key names an unknown CPU class or device, a
// CPU class has invalid costs, there are no CPU classes, or a request
// indexes no key or device.
absl::StatusOr<PolicyTable> BuildPolicyTable(const FitInputs& inputs, const FitConfig& config,
                                             const PolicyTable* incumbent = nullptr);

}  // namespace spintune

#endif  // SPINTUNE_POLICY_POLICY_BUILDER_H_
