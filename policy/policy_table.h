// PolicyTable: a target's fitted policy, one entry per key plus one
// fallback entry per device, with the evidence behind every entry.
//
// This is the in-memory form shared by the tuner, the agent and the CLI; the
// wire form is spintune.v1.PolicyTable, the driver forms are the blob
// (policy_blob.h) and the C header (header_writer.h), the human form is the
// JSON of docs/policy-json.md (policy_json.h).
//
// Plain values; thread-compatible.
#ifndef SPINTUNE_POLICY_POLICY_TABLE_H_
#define SPINTUNE_POLICY_POLICY_TABLE_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "models/context_features.h"
#include "models/context_tree.h"
#include "models/cost_model.h"
#include "models/wait_optimizer.h"
#include "policy/default_rule.h"

namespace spintune {

// Wildcard cpu class name of fallback entries.
inline constexpr char kAnyCpuClass[] = "*";

struct PolicyKey {
  std::string cpu_class;  // kAnyCpuClass for a fallback entry
  std::string device;
  uint32_t opcode = 0;
  uint32_t size_class = 0;

  friend bool operator<(const PolicyKey& a, const PolicyKey& b) {
    return std::tie(a.device, a.cpu_class, a.opcode, a.size_class) <
           std::tie(b.device, b.cpu_class, b.opcode, b.size_class);
  }
  friend bool operator==(const PolicyKey& a, const PolicyKey& b) {
    return std::tie(a.device, a.cpu_class, a.opcode, a.size_class) ==
           std::tie(b.device, b.cpu_class, b.opcode, b.size_class);
  }
};

// An A/B trial on an entry (issue #12): the driver waits by `wait` (the
// incumbent's, what was in force before this version) for `share` of 256
// commands of the entry, chosen per command from a counter seeded by the
// table version, and by the entry's own wait for the others; it reports the
// outcomes of the two arms apart, so the verifier compares them in the same
// window (docs/verification.md, "A/B trials").
struct Trial {
  WaitParams wait;
  uint32_t share = 0;  // commands per 256 on the incumbent arm, 1..255

  friend bool operator==(const Trial& a, const Trial& b) {
    return a.wait == b.wait && a.share == b.share;
  }
  friend bool operator!=(const Trial& a, const Trial& b) { return !(a == b); }
};

// Which wait an outcome was measured under: the entry's own (also every
// outcome of an entry without a trial) or its trial's incumbent wait.
enum class OutcomeArm : uint8_t { kTable = 0, kIncumbent = 1 };
const char* OutcomeArmName(OutcomeArm arm);  // "table", "incumbent"

struct PolicyEntry {
  PolicyKey key;
  bool fallback = false;  // the device's entry for keys not in the table
  // Empty for a key with one entry. Else the entry is one leaf of its key's
  // context tree (issue 16): the conditions of the leaf's path; a key's
  // leaves are consecutive, in tree order, and tile the feature space
  // (ContextTree::FromLeafConditions()).
  ContextConditions context;
  WaitParams wait;
  // An A/B trial against the incumbent's wait (never on a fallback entry or
  // a context leaf).
  std::optional<Trial> trial;
  // Evidence.
  uint64_t samples = 0;
  double p50_ns = 0;
  double p99_ns = 0;
  ExpectedCost expected;
  double expected_cost_ns = 0;
  // The driver's own rule on the same samples, when it has one.
  std::optional<WaitParams> default_wait;
  ExpectedCost default_expected;
  double default_cost_ns = 0;
  // Expected gain per request (ns of J) over the baseline (the driver
  // default when known, else IRQ) with its bootstrap confidence interval.
  std::string gain_baseline;  // "default" or "irq"; empty when not fitted
  double gain_ns = 0;
  double gain_ci_low_ns = 0;
  double gain_ci_high_ns = 0;
  // Best candidate of every strategy family (index Strategy - 1); empty for
  // entries that were not fitted (too few samples).
  std::vector<FamilyOptimum> families;
};

struct CpuClassInfo {
  std::string name;
  uint64_t cpu_khz = 0;
  PlatformCosts costs;  // the costs the table was fitted with
};

// Write opcodes a device may have (SPINTUNE_MAX_WRITE_OPCODES of the blob).
inline constexpr size_t kMaxWriteOpcodes = 4;

struct DeviceInfo {
  std::string name;
  std::string driver;
  std::string model;
  std::vector<DefaultRule> default_rules;
  // Opcodes whose completion resets the context feature since_write_ns
  // (sorted, at most kMaxWriteOpcodes).
  std::vector<uint32_t> write_opcodes = DefaultWriteOpcodes();
};

struct PolicyTable {
  uint64_t version = 0;
  std::string board;
  std::string fitted_at;  // RFC 3339 UTC, set when the table is stored
  // "fitted" (from the board's samples) or "predicted" (cold start).
  std::string origin = "fitted";
  std::string objective_name = "balanced";
  double latency_weight = 1.0;
  uint64_t max_spin_ns = 0;
  uint64_t min_samples = 0;
  double robustness_rho = 0;  // 0: no clamp
  std::vector<CpuClassInfo> cpu_classes;
  std::vector<DeviceInfo> devices;
  // In SortEntries() order; fallback entries use cpu_class "*"; the leaves
  // of a key with context in tree order.
  std::vector<PolicyEntry> entries;

  // Total samples over the non-fallback entries.
  uint64_t TotalSamples() const;
  // Index of `cpu_class` in cpu_classes, or -1.
  int CpuClassIndex(const std::string& cpu_class) const;
  // The entry a driver uses for `key`: its own (the first, for a key with
  // context leaves), else its device's fallback; null when neither exists.
  const PolicyEntry* EntryFor(const PolicyKey& key) const;
};

// Sorts by (device, fallback last, cpu class, opcode, size class); stable,
// so a key's leaves keep their order.
void SortEntries(std::vector<PolicyEntry>* entries);

// True when both tables prescribe the same waits for the same keys and
// contexts (the part a driver sees; evidence and version are ignored).
bool SameDecisions(const PolicyTable& a, const PolicyTable& b);

// Number of entries with a context (the leaves of keys that have a tree).
size_t ContextLeafCount(const PolicyTable& table);

}  // namespace spintune

#endif  // SPINTUNE_POLICY_POLICY_TABLE_H_
