// DiffPolicyTables: what changed between two tables, key by key, for
// `spintune profiles diff` (comparing driver versions, cards, boards).
//
// Keys are matched exactly (CPU class, device, opcode, size class; fallback
// entries by device). Each side's expected cost is its own entry's, on its
// own evidence: the delta says how much cheaper (negative) or dearer
// (positive) per request B's fitted decision is than A's. Given B's
// evidence, it also evaluates A's wait on B's samples with B's costs: what
// keeping A's table would cost where B was measured.
//
// Pure function; thread-safe.
#ifndef SPINTUNE_POLICY_POLICY_DIFF_H_
#define SPINTUNE_POLICY_POLICY_DIFF_H_

#include <optional>
#include <string>
#include <vector>

#include "policy/policy_builder.h"
#include "policy/policy_table.h"

namespace spintune {

enum class DiffKind { kSame, kChanged, kOnlyA, kOnlyB };

// "same", "changed", "only_a", "only_b".
const char* DiffKindName(DiffKind kind);

struct KeyDiff {
  PolicyKey key;
  bool fallback = false;
  ContextConditions context;  // a context leaf's conditions (rows per leaf)
  DiffKind kind = DiffKind::kSame;
  std::optional<PolicyEntry> a, b;
  // b.expected_cost_ns - a.expected_cost_ns when both sides have the key.
  double cost_delta_ns = 0;
  // A's wait on B's samples (keys both have, B's evidence given).
  std::optional<double> a_on_b_cost_ns;
};

struct PolicyDiff {
  std::vector<KeyDiff> keys;  // in SortEntries() order
  int changed = 0, only_a = 0, only_b = 0, same = 0;
};

PolicyDiff DiffPolicyTables(const PolicyTable& a, const PolicyTable& b,
                            const std::vector<KeyEvidence>* b_evidence = nullptr);

}  // namespace spintune

#endif  // SPINTUNE_POLICY_POLICY_DIFF_H_
