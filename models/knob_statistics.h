// The noise model of knob experiments and the tests built on it.
//
// Throughput, CPU per request and latency percentiles vary from run to run
// by a share of their value, not by a fixed amount, so the model is
// multiplicative:
//
//   log y = mu(setting) + e,   e ~ N(0, sigma^2), sigma the same for every setting
//
// Comparisons happen on log y: a difference d of log means is a ratio
// exp(d) of geometric means ("2.9x"), and its interval is a ratio interval.
// sigma is pooled over every setting measured twice or more (df = sum of
// n_i - 1); intervals use Student's t with those degrees of freedom, and the
// final comparison of two settings Welch's t (unequal variances,
// Satterthwaite df).
//
// Pure functions; thread-safe.
#ifndef SPINTUNE_MODELS_KNOB_STATISTICS_H_
#define SPINTUNE_MODELS_KNOB_STATISTICS_H_

#include <cstddef>
#include <vector>

namespace spintune {

// P(T <= t) for Student's t with `df` degrees of freedom (df > 0; df may be
// fractional, as Welch's is). Accurate to ~1e-10 (continued fraction of the
// regularized incomplete beta function).
double StudentTCdf(double t, double df);
// The t with P(T <= t) = p. REQUIRES: 0 < p < 1, df > 0.
double StudentTQuantile(double p, double df);

// Count, mean and sum of squared deviations of a stream (Welford).
struct RunningMoments {
  size_t n = 0;
  double mean = 0;
  double m2 = 0;
  void Add(double x);
  // Sample variance (0 for n < 2).
  double Variance() const { return n > 1 ? m2 / static_cast<double>(n - 1) : 0; }
};

// sigma of the noise model pooled over groups (each group: the log values
// of one setting). df = 0 when no group has two values.
struct PooledNoise {
  double sigma = 0;
  double df = 0;
};
PooledNoise PoolNoise(const std::vector<RunningMoments>& groups);

// exp(mean log a - mean log b) with its two-sided `confidence` interval by
// Welch's t on the log values: "a is ratio x b, CI [low, high]".
struct RatioInterval {
  double ratio = 1;
  double low = 1;
  double high = 1;
  double df = 0;
  // Two-sided p-value of "the geometric means are equal".
  double p_value = 1;
};
// REQUIRES: a_log.size() >= 2, b_log.size() >= 2, 0 < confidence < 1.
RatioInterval CompareLogMeans(const std::vector<double>& a_log, const std::vector<double>& b_log,
                              double confidence);

// Geometric mean of one setting's values with its interval: from its own
// spread when it has >= 2 values, else from `noise` (when noise.df > 0);
// otherwise low = high = mean.
struct MeanInterval {
  double mean = 0;  // geometric mean, in the metric's unit
  double low = 0;
  double high = 0;
};
// REQUIRES: !log_values.empty(), 0 < confidence < 1.
MeanInterval GeometricMeanInterval(const std::vector<double>& log_values, double confidence,
                                   const PooledNoise& noise);

}  // namespace spintune

#endif  // SPINTUNE_MODELS_KNOB_STATISTICS_H_
