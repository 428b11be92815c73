#include "models/cross_board_model.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace spintune {
namespace {

// Weighted least squares for y = a + c * (1 / f) with one column of y per
// output; returns the 2 x m coefficients. With one distinct clock the slope
// is fixed at 0 and a is the weighted mean.
Eigen::Matrix<double, 2, Eigen::Dynamic> FitInverseClock(const Eigen::VectorXd& inv_f,
                                                        const Eigen::VectorXd& weight,
                                                        const Eigen::MatrixXd& y) {
  const Eigen::Index k = inv_f.size();
  Eigen::Matrix<double, 2, Eigen::Dynamic> coef(2, y.cols());
  const bool one_clock = (inv_f.array() - inv_f(0)).abs().maxCoeff() <= 1e-12 * inv_f(0);
  const Eigen::VectorXd sw = weight.array().sqrt();
  if (one_clock) {
    const double wsum = weight.sum();
    coef.row(0) = (weight.transpose() * y) / wsum;
    coef.row(1).setZero();
    return coef;
  }
  Eigen::MatrixXd design(k, 2);
  design.col(0).setOnes();
  design.col(1) = inv_f;
  const Eigen::MatrixXd a = sw.asDiagonal() * design;
  const Eigen::MatrixXd b = sw.asDiagonal() * y;
  coef = a.colPivHouseholderQr().solve(b);
  return coef;
}

}  // namespace

const std::vector<double>& QuantileGrid() {
  static const std::vector<double> kGrid = [] {
    std::vector<double> g;
    for (int i = 0; i < 100; ++i) g.push_back((i + 0.5) / 100.0);
    return g;
  }();
  return kGrid;
}

std::vector<double> GridQuantiles(const LatencyHistogram& histogram) {
  std::vector<double> q;
  q.reserve(QuantileGrid().size());
  for (double p : QuantileGrid()) q.push_back(histogram.QuantileNs(p));
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
  const size_t m = QuantileGrid().size();
  Eigen::VectorXd inv_f(boards.size()), w(boards.size());
  Eigen::MatrixXd y(boards.size(), m);
  for (size_t b = 0; b < boards.size(); ++b) {
    if (!(boards[b].cpu_khz > 0) || boards[b].quantiles_ns.size() != m || !(boards[b].weight > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("board ", b, ": needs cpu_khz > 0, weight > 0 and ", m, " quantiles"));
    }
    inv_f(b) = 1e6 / boards[b].cpu_khz;  // ns per cycle
    w(b) = boards[b].weight;
    for (size_t p = 0; p < m; ++p) y(b, p) = boards[b].quantiles_ns[p];
  }
  CrossBoardModel model;
  model.coef_ = FitInverseClock(inv_f, w, y);
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

absl::StatusOr<PlatformCosts> PredictCosts(const std::vector<CostObservation>& boards,
                                           double cpu_khz) {
  if (boards.empty()) return absl::InvalidArgumentError("no boards to predict costs from");
  Eigen::VectorXd inv_f(boards.size()), w = Eigen::VectorXd::Ones(boards.size());
  Eigen::MatrixXd y(boards.size(), 5);
  for (size_t b = 0; b < boards.size(); ++b) {
    if (!(boards[b].cpu_khz > 0)) return absl::InvalidArgumentError("cpu_khz must be > 0");
    inv_f(b) = 1e6 / boards[b].cpu_khz;
    const PlatformCosts& c = boards[b].costs;
    y.row(b) << c.irq_cpu_ns, c.irq_wake_ns, c.poll_read_ns, c.timer_cpu_ns, c.timer_wake_ns;
  }
  const auto coef = FitInverseClock(inv_f, w, y);
  const double x = 1e6 / cpu_khz;
  auto at = [&](int i) { return std::max(0.0, coef(0, i) + coef(1, i) * x); };
  return PlatformCosts{at(0), at(1), at(2), at(3), at(4)};
}

}  // namespace spintune
