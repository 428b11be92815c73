#include "models/change_detector.h"

#include <algorithm>
#include <cmath>

namespace spintune {

double KsDistance(const LatencyHistogram& a, const LatencyHistogram& b) {
  if (a.empty() || b.empty()) return 0;
  const double na = static_cast<double>(a.total_count());
  const double nb = static_cast<double>(b.total_count());
  auto ia = a.buckets().begin(), ib = b.buckets().begin();
  double ca = 0, cb = 0, d = 0;
  while (ia != a.buckets().end() || ib != b.buckets().end()) {
    int index;
    if (ib == b.buckets().end() || (ia != a.buckets().end() && ia->first <= ib->first)) {
      index = ia->first;
    } else {
      index = ib->first;
    }
    if (ia != a.buckets().end() && ia->first == index) ca += static_cast<double>((ia++)->second);
    if (ib != b.buckets().end() && ib->first == index) cb += static_cast<double>((ib++)->second);
    d = std::max(d, std::fabs(ca / na - cb / nb));
  }
  return d;
}

bool DistributionChanged(const LatencyHistogram& reference, const LatencyHistogram& recent,
                         const ChangeTest& test) {
  if (reference.empty() || recent.empty()) return false;
  const double n = static_cast<double>(reference.total_count());
  const double m = static_cast<double>(recent.total_count());
  const double critical = std::sqrt(-std::log(test.alpha / 2) / 2) * std::sqrt((n + m) / (n * m));
  return KsDistance(reference, recent) > std::max(test.min_effect, critical);
}

WindowVerdict JudgeWindows(const std::vector<std::pair<int64_t, LatencyHistogram>>& windows,
                           int64_t since, int64_t changed_through, const ChangeTest& test,
                           uint64_t min_recent, uint64_t keep_windows) {
  WindowVerdict v;
  // The recent evidence: windows [first_recent, end).
  LatencyHistogram recent;
  size_t first_recent = windows.size();
  auto enough = [&] { return first_recent < windows.size() && recent.total_count() >= min_recent; };
  while (first_recent > 1 && !enough()) recent.Merge(windows[--first_recent].second);
  if (!enough()) return v;
  // Before it: windows [0, first_recent); the last ones that hold
  // min_recent samples start at first_before.
  LatencyHistogram before;
  size_t first_before = first_recent;
  uint64_t needed = 0;
  for (size_t i = first_recent; i-- > 0;) {
    before.Merge(windows[i].second);
    if (needed < min_recent) {
      needed += windows[i].second.total_count();
      first_before = i;
    }
  }
  v.changed = before.total_count() >= min_recent && DistributionChanged(before, recent, test);
  if (v.changed) {
    v.since = windows[first_recent].first;
    v.keep_from = v.since;
    // Compared with nothing but the last change's own evidence: that change.
    v.refined = windows[first_recent - 1].first <= changed_through;
    v.through = v.refined ? changed_through : windows.back().first;
    return v;
  }
  const int64_t latest = windows.back().first;
  v.keep_from = std::max<int64_t>(
      since, std::min<int64_t>(latest - static_cast<int64_t>(keep_windows),
                               windows[first_before].first));
  return v;
}

}  // namespace spintune
