#include "policy/policy_diff.h"

#include <map>
#include <tuple>

#include "models/wait_distribution.h"
#include "models/wait_optimizer.h"

namespace spintune {

const char* DiffKindName(DiffKind kind) {
  switch (kind) {
    case DiffKind::kSame:
      return "same";
    case DiffKind::kChanged:
      return "changed";
    case DiffKind::kOnlyA:
      return "only_a";
    case DiffKind::kOnlyB:
      return "only_b";
  }
  return "?";
}

PolicyDiff DiffPolicyTables(const PolicyTable& a, const PolicyTable& b,
                            const std::vector<KeyEvidence>* b_evidence) {
  std::map<PolicyKey, const KeyEvidence*> evidence;
  if (b_evidence) {
    for (const auto& k : *b_evidence) evidence[k.key] = &k;
  }
  // Fallback entries sort after the device's keys, as in SortEntries().
  // A key's context leaves are rows of their own.
  using Slot = std::tuple<std::string, bool, std::string, uint32_t, uint32_t, std::string>;
  auto slot = [](const PolicyEntry& e) {
    return Slot{e.key.device,     e.fallback,      e.key.cpu_class,
                e.key.opcode,     e.key.size_class, DescribeContext(e.context)};
  };
  std::map<Slot, KeyDiff> rows;
  for (const PolicyEntry& e : a.entries) {
    KeyDiff& d = rows[slot(e)];
    d.key = e.key;
    d.fallback = e.fallback;
    d.context = e.context;
    d.a = e;
  }
  for (const PolicyEntry& e : b.entries) {
    KeyDiff& d = rows[slot(e)];
    d.key = e.key;
    d.fallback = e.fallback;
    d.context = e.context;
    d.b = e;
  }
  PolicyDiff diff;
  for (auto& [unused, d] : rows) {
    if (d.a && d.b) {
      d.kind = d.a->wait == d.b->wait ? DiffKind::kSame : DiffKind::kChanged;
      d.cost_delta_ns = d.b->expected_cost_ns - d.a->expected_cost_ns;
      // The key's evidence is all of its samples: not a leaf's.
      auto ev = d.fallback || !d.context.empty() ? evidence.end() : evidence.find(d.key);
      const int cpu = b.CpuClassIndex(d.key.cpu_class);
      if (ev != evidence.end() && cpu >= 0 && !ev->second->histogram.empty()) {
        d.a_on_b_cost_ns =
            EvaluateWait(WaitDistribution::FromHistogram(ev->second->histogram), d.a->wait,
                         b.cpu_classes[cpu].costs)
                .Cost(b.latency_weight);
      }
    } else {
      d.kind = d.a ? DiffKind::kOnlyA : DiffKind::kOnlyB;
    }
    ++(d.kind == DiffKind::kSame      ? diff.same
       : d.kind == DiffKind::kChanged ? diff.changed
       : d.kind == DiffKind::kOnlyA   ? diff.only_a
                                      : diff.only_b);
    diff.keys.push_back(std::move(d));
  }
  return diff;
}

}  // namespace spintune
