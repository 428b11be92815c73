// Cold start for a new board: a least-squares model across boards (Eigen).
//
// For one (device model, opcode, size class) seen on boards b = 1..k at CPU
// clocks f_b, every quantile x_p of the completion time is modelled as
//
//   x_p(f) = device_ns_p + cycles_p / f        (the CPU-clocked part scales)
//
// and fitted by weighted least squares over the boards (weight = samples),
// one column per quantile p on a fixed grid (QuantileGrid()), from the sums
// of models/inverse_clock_sums.h. With a single
// clock among the boards the slope is not identifiable and the model keeps
// the observed quantiles (cycles_p = 0). Platform costs are modelled the same
// way per field (irq_cpu_ns = a + cycles / f, ...). A new board's predicted
// table is the optimizer run on the predicted quantiles and costs.
//
// Pure math; thread-safe.
#ifndef SPINTUNE_MODELS_CROSS_BOARD_MODEL_H_
#define SPINTUNE_MODELS_CROSS_BOARD_MODEL_H_

#include <array>
#include <cstdint>
#include <vector>

#include "Eigen/Dense"
#include "absl/status/statusor.h"
#include "models/cost_model.h"
#include "models/inverse_clock_sums.h"
#include "models/latency_histogram.h"
#include "models/wait_distribution.h"

namespace spintune {

// Probabilities 0.005, 0.015, ..., 0.995 (kQuantileGridPoints, 1% each).
constexpr int kQuantileGridPoints = 100;
const std::vector<double>& QuantileGrid();
// The buckets of `histogram`'s quantiles on QuantileGrid() (each quantile is
// its bucket's midpoint, LatencyHistogram::QuantileNs), in one pass over the
// buckets; all 0 for an empty histogram.
std::array<uint16_t, kQuantileGridPoints> GridQuantileBuckets(const LatencyHistogram& histogram);
// `histogram`'s quantiles on QuantileGrid() (0 when it is empty).
std::vector<double> GridQuantiles(const LatencyHistogram& histogram);
// A distribution with one equal-weight point per grid quantile (sorted,
// negative values clipped to 0), weight `samples_per_point` each.
WaitDistribution DistributionFromQuantiles(std::vector<double> quantiles_ns,
                                           double samples_per_point = 1.0);

struct BoardObservation {
  double cpu_khz = 0;
  std::vector<double> quantiles_ns;  // on QuantileGrid()
  double weight = 1;                 // e.g. the sample count
};

class CrossBoardModel {
 public:
  // InvalidArgument without observations, with a clock <= 0 or with
  // quantile vectors of the wrong length.
  static absl::StatusOr<CrossBoardModel> Fit(const std::vector<BoardObservation>& boards);
  // The model of the observations in `sums` (the same fit, from its sums).
  // REQUIRES: sums.outputs() == QuantileGrid().size(), sums.observations() > 0.
  static CrossBoardModel FromSums(const InverseClockSums& sums);
  std::vector<double> PredictQuantiles(double cpu_khz) const;
  // Row 0: device ns per quantile; row 1: CPU cycles per quantile.
  const Eigen::Matrix<double, 2, Eigen::Dynamic>& coefficients() const { return coef_; }

 private:
  Eigen::Matrix<double, 2, Eigen::Dynamic> coef_;
};

struct CostObservation {
  double cpu_khz = 0;
  PlatformCosts costs;
};

// Each cost field fitted as a + cycles / f over `boards` (a = mean, slope 0
// when only one clock is present). InvalidArgument without observations.
absl::StatusOr<PlatformCosts> PredictCosts(const std::vector<CostObservation>& boards,
                                           double cpu_khz);
// The costs' outputs in sums of PredictCosts' form, in its order.
Eigen::VectorXd CostOutputs(const PlatformCosts& costs);
// PredictCosts from its sums (weight 1 per board, outputs CostOutputs()).
// REQUIRES: sums.outputs() == 5, sums.observations() > 0.
PlatformCosts CostsFromSums(const InverseClockSums& sums, double cpu_khz);

}  // namespace spintune

#endif  // SPINTUNE_MODELS_CROSS_BOARD_MODEL_H_
