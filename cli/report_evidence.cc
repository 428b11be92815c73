#include "cli/report_evidence.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace spintune {
namespace {

bool SameEntries(const PolicyTable& a, const PolicyTable& b) {
  return std::equal(a.entries.begin(), a.entries.end(), b.entries.begin(), b.entries.end(),
                    [](const PolicyEntry& x, const PolicyEntry& y) {
                      return x.fallback == y.fallback && x.key == y.key && x.wait == y.wait &&
                             x.samples == y.samples && x.context == y.context;
                    });
}

}  // namespace

std::map<PolicyKey, uint64_t> FittedSamples(const PolicyTable& table) {
  std::map<PolicyKey, uint64_t> fitted;
  for (const auto& e : table.entries) {
    if (!e.fallback) fitted[e.key] += e.samples;
  }
  return fitted;
}

bool IsFitEvidence(const PolicyTable& table, const std::vector<KeyEvidence>& keys) {
  std::map<PolicyKey, uint64_t> shown;
  for (const auto& k : keys) shown[k.key] = k.histogram.total_count();
  for (const auto& [key, samples] : FittedSamples(table)) {
    auto it = shown.find(key);
    if (it == shown.end() || it->second != samples) return false;
  }
  return true;
}

absl::StatusOr<Profile> WithFitEvidence(Store& store, Profile snapshot, std::string* source) {
  *source = absl::StrCat("today's samples of target '", snapshot.info.target, "'");
  if (IsFitEvidence(snapshot.table, snapshot.keys)) return snapshot;
  SPINTUNE_ASSIGN_OR_RETURN(std::vector<ProfileInfo> saved, store.ListProfiles());
  for (auto it = saved.rbegin(); it != saved.rend(); ++it) {  // newest first
    if (it->target != snapshot.info.target) continue;
    SPINTUNE_ASSIGN_OR_RETURN(Profile p, store.LoadProfile(it->name));
    if (!SameEntries(p.table, snapshot.table) || !IsFitEvidence(p.table, p.keys)) continue;
    snapshot.keys = std::move(p.keys);
    snapshot.dispatch = std::move(p.dispatch);
    snapshot.info.samples = p.info.samples;
    *source = absl::StrCat("the samples saved with profile '", it->name, "'");
    return snapshot;
  }
  return snapshot;
}

}  // namespace spintune
