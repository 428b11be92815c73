#include "models/inverse_clock_sums.h"

#include <cassert>

namespace spintune {

InverseClockSums::InverseClockSums(Eigen::Index outputs)
    : swy_(Eigen::VectorXd::Zero(outputs)), swxy_(Eigen::VectorXd::Zero(outputs)) {}

void InverseClockSums::Add(double cpu_khz, double weight,
                           const Eigen::Ref<const Eigen::VectorXd>& y) {
  Accumulate(cpu_khz, weight, y, 1.0);
  ++clocks_[cpu_khz];
  ++observations_;
}

void InverseClockSums::Remove(double cpu_khz, double weight,
                              const Eigen::Ref<const Eigen::VectorXd>& y) {
  auto it = clocks_.find(cpu_khz);
  assert(it != clocks_.end() && observations_ > 0);
  if (it == clocks_.end()) return;
  if (--it->second == 0) clocks_.erase(it);
  --observations_;
  if (observations_ == 0) {
    // Nothing left: exact zeros, not the rounding of what was subtracted.
    sw_ = swx_ = swxx_ = 0;
    swy_.setZero();
    swxy_.setZero();
    return;
  }
  Accumulate(cpu_khz, weight, y, -1.0);
}

void InverseClockSums::Accumulate(double cpu_khz, double weight,
                                  const Eigen::Ref<const Eigen::VectorXd>& y, double sign) {
  assert(cpu_khz > 0 && weight > 0 && y.size() == swy_.size());
  const double x = 1e6 / cpu_khz;
  const double w = sign * weight;
  sw_ += w;
  swx_ += w * x;
  swxx_ += w * x * x;
  swy_ += w * y;
  swxy_ += (w * x) * y;
}

Eigen::Matrix<double, 2, Eigen::Dynamic> InverseClockSums::Solve() const {
  assert(observations_ > 0);
  Eigen::Matrix<double, 2, Eigen::Dynamic> coef(2, swy_.size());
  // Centred normal equations: sxx = sum w (x - mean)^2.
  const double sxx = swxx_ - swx_ * swx_ / sw_;
  if (clocks_.size() < 2 || !(sxx > 1e-12 * swxx_)) {
    coef.row(0) = (swy_ / sw_).transpose();
    coef.row(1).setZero();
    return coef;
  }
  const Eigen::VectorXd slope = (swxy_ - (swx_ / sw_) * swy_) / sxx;
  coef.row(1) = slope.transpose();
  coef.row(0) = ((swy_ - swx_ * slope) / sw_).transpose();
  return coef;
}

}  // namespace spintune
