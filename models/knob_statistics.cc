#include "models/knob_statistics.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace spintune {
namespace {

// Continued fraction of the regularized incomplete beta function, evaluated
// by the modified Lentz method; converges fast for x < (a + 1) / (a + b + 2).
double BetaContinuedFraction(double a, double b, double x) {
  constexpr int kMaxIterations = 400;
  constexpr double kEpsilon = 1e-15;
  constexpr double kTiny = 1e-300;
  const double qab = a + b, qap = a + 1, qam = a - 1;
  double c = 1;
  double d = 1 - qab * x / qap;
  if (std::fabs(d) < kTiny) d = kTiny;
  d = 1 / d;
  double h = d;
  for (int m = 1; m <= kMaxIterations; ++m) {
    const double m2 = 2.0 * m;
    double aa = m * (b - m) * x / ((qam + m2) * (a + m2));
    d = 1 + aa * d;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = 1 + aa / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1 / d;
    h *= d * c;
    aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
    d = 1 + aa * d;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = 1 + aa / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1 / d;
    const double step = d * c;
    h *= step;
    if (std::fabs(step - 1) < kEpsilon) break;
  }
  return h;
}

// I_x(a, b), the regularized incomplete beta function.
double RegularizedBeta(double a, double b, double x) {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const double log_front =
      std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) + b * std::log1p(-x);
  if (x < (a + 1) / (a + b + 2)) return std::exp(log_front) * BetaContinuedFraction(a, b, x) / a;
  return 1 - std::exp(log_front) * BetaContinuedFraction(b, a, 1 - x) / b;
}

}  // namespace

double StudentTCdf(double t, double df) {
  assert(df > 0);
  if (std::isinf(t)) return t > 0 ? 1 : 0;
  // P(|T| > |t|) = I_{df / (df + t^2)}(df / 2, 1 / 2).
  const double tail = RegularizedBeta(df / 2, 0.5, df / (df + t * t));
  return t >= 0 ? 1 - tail / 2 : tail / 2;
}

double StudentTQuantile(double p, double df) {
  assert(p > 0 && p < 1 && df > 0);
  double lo = -1, hi = 1;
  while (StudentTCdf(lo, df) > p) lo *= 2;
  while (StudentTCdf(hi, df) < p) hi *= 2;
  // Bisection: the CDF is monotone; 200 halvings reach double precision
  // for any bracket that fits in a double.
  for (int i = 0; i < 200 && hi - lo > 1e-12 * std::max(1.0, std::fabs(hi)); ++i) {
    const double mid = (lo + hi) / 2;
    (StudentTCdf(mid, df) < p ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

void RunningMoments::Add(double x) {
  ++n;
  const double delta = x - mean;
  mean += delta / static_cast<double>(n);
  m2 += delta * (x - mean);
}

PooledNoise PoolNoise(const std::vector<RunningMoments>& groups) {
  double m2 = 0, df = 0;
  for (const auto& g : groups) {
    if (g.n < 2) continue;
    m2 += g.m2;
    df += static_cast<double>(g.n - 1);
  }
  PooledNoise noise;
  noise.df = df;
  noise.sigma = df > 0 ? std::sqrt(m2 / df) : 0;
  return noise;
}

RatioInterval CompareLogMeans(const std::vector<double>& a_log, const std::vector<double>& b_log,
                              double confidence) {
  assert(a_log.size() >= 2 && b_log.size() >= 2 && confidence > 0 && confidence < 1);
  RunningMoments a, b;
  for (double x : a_log) a.Add(x);
  for (double x : b_log) b.Add(x);
  const double va = a.Variance() / static_cast<double>(a.n);
  const double vb = b.Variance() / static_cast<double>(b.n);
  const double d = a.mean - b.mean;
  RatioInterval r;
  r.ratio = std::exp(d);
  const double se = std::sqrt(va + vb);
  if (se == 0) {
    // No spread at all: the difference is exact.
    r.low = r.high = r.ratio;
    r.df = static_cast<double>(a.n + b.n - 2);
    r.p_value = d == 0 ? 1 : 0;
    return r;
  }
  // Welch-Satterthwaite degrees of freedom.
  r.df = (va + vb) * (va + vb) /
         (va * va / static_cast<double>(a.n - 1) + vb * vb / static_cast<double>(b.n - 1));
  const double q = StudentTQuantile(1 - (1 - confidence) / 2, r.df);
  r.low = std::exp(d - q * se);
  r.high = std::exp(d + q * se);
  r.p_value = 2 * (1 - StudentTCdf(std::fabs(d) / se, r.df));
  return r;
}

MeanInterval GeometricMeanInterval(const std::vector<double>& log_values, double confidence,
                                   const PooledNoise& noise) {
  assert(!log_values.empty() && confidence > 0 && confidence < 1);
  RunningMoments m;
  for (double x : log_values) m.Add(x);
  MeanInterval out;
  out.mean = out.low = out.high = std::exp(m.mean);
  double sigma = 0, df = 0;
  if (m.n >= 2) {
    sigma = std::sqrt(m.Variance());
    df = static_cast<double>(m.n - 1);
  } else if (noise.df > 0) {
    sigma = noise.sigma;
    df = noise.df;
  }
  if (df > 0 && sigma > 0) {
    const double half = StudentTQuantile(1 - (1 - confidence) / 2, df) * sigma /
                        std::sqrt(static_cast<double>(m.n));
    out.low = std::exp(m.mean - half);
    out.high = std::exp(m.mean + half);
  }
  return out;
}

}  // namespace spintune
