// InverseClockSums: the weighted sums of a least-squares fit of
//
//   y_j(f) = a_j + c_j / f        for outputs j = 0..m-1
//
// over observations (clock f, weight w, outputs y), kept so that an
// observation can be added or taken out again in O(m), whatever the number
// of observations: a fit over k boards costs O(m), not O(k m). With one
// distinct clock among the observations the slope is not identifiable and
// Solve() gives the weighted mean (c = 0), as models/cross_board_model.h
// documents.
//
// Taking out an observation subtracts what adding it added; the caller takes
// out only what it added (the same values), or the sums mean nothing.
//
// Pure math; thread-compatible (const methods may run concurrently).
#ifndef SPINTUNE_MODELS_INVERSE_CLOCK_SUMS_H_
#define SPINTUNE_MODELS_INVERSE_CLOCK_SUMS_H_

#include <cstdint>
#include <map>

#include "Eigen/Dense"

namespace spintune {

class InverseClockSums {
 public:
  explicit InverseClockSums(Eigen::Index outputs);

  // REQUIRES: cpu_khz > 0, weight > 0, y.size() == outputs().
  void Add(double cpu_khz, double weight, const Eigen::Ref<const Eigen::VectorXd>& y);
  // Takes out an observation Add() put in, with the same arguments.
  void Remove(double cpu_khz, double weight, const Eigen::Ref<const Eigen::VectorXd>& y);

  Eigen::Index outputs() const { return swy_.size(); }
  // Observations in the sums (added less removed).
  uint64_t observations() const { return observations_; }
  // Row 0: a_j; row 1: c_j, in units of y per (ns per cycle), i.e. cycles
  // when y is in ns. REQUIRES: observations() > 0.
  Eigen::Matrix<double, 2, Eigen::Dynamic> Solve() const;

 private:
  void Accumulate(double cpu_khz, double weight, const Eigen::Ref<const Eigen::VectorXd>& y,
                  double sign);

  double sw_ = 0, swx_ = 0, swxx_ = 0;  // x = 1e6 / cpu_khz: ns per cycle
  Eigen::VectorXd swy_, swxy_;
  std::map<double, uint64_t> clocks_;  // observations per distinct clock
  uint64_t observations_ = 0;
};

}  // namespace spintune

#endif  // SPINTUNE_MODELS_INVERSE_CLOCK_SUMS_H_
