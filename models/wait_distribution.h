// WaitDistribution: the empirical distribution of completion times X of one
// key, as sorted weighted points with prefix sums, ready for exact threshold
// sweeps.
//
// Each point has a value (the X it stands for) and a catch threshold: the
// smallest spin threshold T that still catches it. For raw samples both are
// the sample itself; for a histogram bucket the value is the bucket midpoint
// and the catch threshold its upper bound, so a threshold chosen on a
// histogram catches the whole bucket (error bounded by bucket resolution).
//
// Immutable after construction; thread-safe.
#ifndef SPINTUNE_MODELS_WAIT_DISTRIBUTION_H_
#define SPINTUNE_MODELS_WAIT_DISTRIBUTION_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "models/latency_histogram.h"

namespace spintune {

class WaitDistribution {
 public:
  struct Point {
    double value_ns;
    uint64_t catch_ns;
    double weight;
  };

  WaitDistribution() = default;
  // Exact empirical distribution of `samples_ns` (any order, duplicates ok).
  static WaitDistribution FromSamples(std::vector<uint64_t> samples_ns);
  // Bucketed distribution of `histogram`.
  static WaitDistribution FromHistogram(const LatencyHistogram& histogram);

  // Sorted by value, strictly increasing, weights > 0.
  const std::vector<Point>& points() const { return points_; }
  size_t size() const { return points_.size(); }
  bool empty() const { return points_.empty(); }
  double total_weight() const { return prefix_weight_.back(); }
  // Sum of weights / of weight*value over points [0, j).
  // REQUIRES: 0 <= j <= size().
  double prefix_weight(size_t j) const { return prefix_weight_[j]; }
  double prefix_sum(size_t j) const { return prefix_sum_[j]; }
  double mean_ns() const {
    return empty() ? 0.0 : prefix_sum_.back() / prefix_weight_.back();
  }
  double max_ns() const { return empty() ? 0.0 : points_.back().value_ns; }
  // Number of points with value <= x (binary search).
  size_t CountAtOrBelow(double x) const;

 private:
  void BuildPrefixSums();

  std::vector<Point> points_;
  std::vector<double> prefix_weight_{0.0};
  std::vector<double> prefix_sum_{0.0};
};

}  // namespace spintune

#endif  // SPINTUNE_MODELS_WAIT_DISTRIBUTION_H_
