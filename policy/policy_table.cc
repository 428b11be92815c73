#include "policy/policy_table.h"

#include <algorithm>

namespace spintune {

const char* OutcomeArmName(OutcomeArm arm) {
  return arm == OutcomeArm::kIncumbent ? "incumbent" : "table";
}

uint64_t PolicyTable::TotalSamples() const {
  uint64_t total = 0;
  for (const auto& e : entries) {
    if (!e.fallback) total += e.samples;
  }
  return total;
}

int PolicyTable::CpuClassIndex(const std::string& cpu_class) const {
  for (size_t i = 0; i < cpu_classes.size(); ++i) {
    if (cpu_classes[i].name == cpu_class) return static_cast<int>(i);
  }
  return -1;
}

const PolicyEntry* PolicyTable::EntryFor(const PolicyKey& key) const {
  const PolicyEntry* fallback = nullptr;
  for (const auto& e : entries) {
    if (!e.fallback && e.key == key) return &e;
    if (e.fallback && fallback == nullptr && e.key.device == key.device) fallback = &e;
  }
  return fallback;
}

void SortEntries(std::vector<PolicyEntry>* entries) {
  std::stable_sort(entries->begin(), entries->end(),
            [](const PolicyEntry& a, const PolicyEntry& b) {
              return std::tie(a.key.device, a.fallback, a.key.cpu_class, a.key.opcode,
                              a.key.size_class) <
                     std::tie(b.key.device, b.fallback, b.key.cpu_class, b.key.opcode,
                              b.key.size_class);
            });
}

bool SameDecisions(const PolicyTable& a, const PolicyTable& b) {
  if (a.entries.size() != b.entries.size()) return false;
  for (size_t i = 0; i < a.entries.size(); ++i) {
    const PolicyEntry& x = a.entries[i];
    const PolicyEntry& y = b.entries[i];
    if (!(x.key == y.key) || x.fallback != y.fallback || x.wait != y.wait ||
        x.context != y.context || x.trial != y.trial) {
      return false;
    }
  }
  return true;
}

size_t ContextLeafCount(const PolicyTable& table) {
  size_t n = 0;
  for (const auto& e : table.entries) n += !e.context.empty();
  return n;
}

}  // namespace spintune
