#include "models/wait_distribution.h"

#include <algorithm>

namespace spintune {

WaitDistribution WaitDistribution::FromSamples(std::vector<uint64_t> samples_ns) {
  WaitDistribution d;
  std::sort(samples_ns.begin(), samples_ns.end());
  for (uint64_t x : samples_ns) {
    if (!d.points_.empty() && d.points_.back().catch_ns == x) {
      d.points_.back().weight += 1.0;
    } else {
      d.points_.push_back({static_cast<double>(x), x, 1.0});
    }
  }
  d.BuildPrefixSums();
  return d;
}

WaitDistribution WaitDistribution::FromHistogram(const LatencyHistogram& histogram) {
  WaitDistribution d;
  d.points_.reserve(histogram.buckets().size());
  for (const auto& [index, count] : histogram.buckets()) {
    d.points_.push_back({LatencyHistogram::BucketMidNs(index),
                         LatencyHistogram::BucketUpperNs(index),
                         static_cast<double>(count)});
  }
  d.BuildPrefixSums();
  return d;
}

void WaitDistribution::BuildPrefixSums() {
  prefix_weight_.assign(points_.size() + 1, 0.0);
  prefix_sum_.assign(points_.size() + 1, 0.0);
  for (size_t j = 0; j < points_.size(); ++j) {
    prefix_weight_[j + 1] = prefix_weight_[j] + points_[j].weight;
    prefix_sum_[j + 1] = prefix_sum_[j] + points_[j].weight * points_[j].value_ns;
  }
}

size_t WaitDistribution::CountAtOrBelow(double x) const {
  return static_cast<size_t>(
      std::upper_bound(points_.begin(), points_.end(), x,
                       [](double v, const Point& p) { return v < p.value_ns; }) -
      points_.begin());
}

}  // namespace spintune
