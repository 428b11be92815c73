#include "models/cross_board_model.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "models/inverse_clock_sums.h"

namespace spintune {

const std::vector<double>& QuantileGrid() {
  static const std::vector<double> kGrid = [] {
    std::vector<double> g;
    for (int i = 0; i < kQuantileGridPoints; ++i) g.push_back((i + 0.5) / kQuantileGridPoints);
    return g;
  }();
  return kGrid;
}

std::array<uint16_t, kQuantileGridPoints> GridQuantileBuckets(const LatencyHistogram& histogram) {
  static_assert(LatencyHistogram::kBucketCount <= 65536, "bucket indices fit 16 bits");
  std::array<uint16_t, kQuantileGridPoints> out{};
  const uint64_t n = histogram.total_count();
  if (n == 0) return out;
  // QuantileNs' nearest rank at every grid point; the ranks only grow.
  const auto& buckets = histogram.buckets();
  auto bucket = buckets.begin();
  uint64_t seen = bucket->second;
  for (int i = 0; i < kQuantileGridPoints; ++i) {
    const uint64_t rank = std::max<uint64_t>(
        1, static_cast<uint64_t>(std::ceil(QuantileGrid()[i] * static_cast<double>(n))));
    while (seen < rank && std::next(bucket) != buckets.end()) seen += (++bucket)->second;
    out[i] = static_cast<uint16_t>(bucket->first);
  }
  return out;
}

std::vector<double> GridQuantiles(const LatencyHistogram& histogram) {
  std::vector<double> q(kQuantileGridPoints, 0.0);
  if (histogram.empty()) return q;
  const auto buckets = GridQuantileBuckets(histogram);
  for (int i = 0; i < kQuantileGridPoints; ++i) q[i] = LatencyHistogram::BucketMidNs(buckets[i]);
  return q;
}

WaitDistribution DistributionFromQuantiles(std::vector<double> quantiles_ns,
                                           double samples_per_point) {
  LatencyHistogram h;
  const uint64_t count = static_cast<uint64_t>(std::max(1.0, std::round(samples_per_point)));
  for (double q : quantiles_ns) h.Record(static_cast<uint64_t>(std::max(0.0, q)), count);
  return WaitDistribution::FromHistogram(h);
}

absl::StatusOr<CrossBoardModel> CrossBoardModel::Fit(const std::vector<BoardObservation>& boards) {
  if (boards.empty()) return absl::InvalidArgumentError("no boards to fit on");
  InverseClockSums sums(kQuantileGridPoints);
  for (size_t b = 0; b < boards.size(); ++b) {
    if (!(boards[b].cpu_khz > 0) || boards[b].quantiles_ns.size() != kQuantileGridPoints ||
        !(boards[b].weight > 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "board ", b, ": needs cpu_khz > 0, weight > 0 and ", kQuantileGridPoints, " quantiles"));
    }
    sums.Add(boards[b].cpu_khz, boards[b].weight,
             Eigen::Map<const Eigen::VectorXd>(boards[b].quantiles_ns.data(), kQuantileGridPoints));
  }
  return FromSums(sums);
}

CrossBoardModel CrossBoardModel::FromSums(const InverseClockSums& sums) {
  assert(sums.outputs() == kQuantileGridPoints);
  CrossBoardModel model;
  model.coef_ = sums.Solve();
  return model;
}

std::vector<double> CrossBoardModel::PredictQuantiles(double cpu_khz) const {
  const double inv_f = 1e6 / cpu_khz;
  std::vector<double> q(coef_.cols());
  for (Eigen::Index p = 0; p < coef_.cols(); ++p) {
    q[p] = std::max(0.0, coef_(0, p) + coef_(1, p) * inv_f);
  }
  std::sort(q.begin(), q.end());  // keep the quantile function monotone
  return q;
}

Eigen::VectorXd CostOutputs(const PlatformCosts& c) {
  Eigen::VectorXd y(5);
  y << c.irq_cpu_ns, c.irq_wake_ns, c.poll_read_ns, c.timer_cpu_ns, c.timer_wake_ns;
  return y;
}

PlatformCosts CostsFromSums(const InverseClockSums& sums, double cpu_khz) {
  assert(sums.outputs() == 5);
  const auto coef = sums.Solve();
  const double x = 1e6 / cpu_khz;
  auto at = [&](int i) { return std::max(0.0, coef(0, i) + coef(1, i) * x); };
  return PlatformCosts{at(0), at(1), at(2), at(3), at(4)};
}

absl::StatusOr<PlatformCosts> PredictCosts(const std::vector<CostObservation>& boards,
                                           double cpu_khz) {
  if (boards.empty()) return absl::InvalidArgumentError("no boards to predict costs from");
  InverseClockSums sums(5);
  for (const auto& b : boards) {
    if (!(b.cpu_khz > 0)) return absl::InvalidArgumentError("cpu_khz must be > 0");
    sums.Add(b.cpu_khz, 1.0, CostOutputs(b.costs));
  }
  return CostsFromSums(sums, cpu_khz);
}

}  // namespace spintune
