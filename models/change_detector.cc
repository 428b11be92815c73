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
                           int64_t since, const ChangeTest& test, uint64_t min_recent,
                           uint64_t keep_windows) {
  WindowVerdict v;
  if (windows.size() < 2) return v;
  const auto& [latest, recent] = windows.back();
  if (recent.total_count() < min_recent) return v;
  LatencyHistogram before;
  for (size_t i = 0; i + 1 < windows.size(); ++i) before.Merge(windows[i].second);
  v.changed = before.total_count() >= min_recent && DistributionChanged(before, recent, test);
  v.keep_from = v.changed ? latest
                          : std::max<int64_t>(since, latest - static_cast<int64_t>(keep_windows));
  return v;
}

}  // namespace spintune
