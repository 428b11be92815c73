#include "models/bootstrap.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace spintune {

GainInterval BootstrapGain(const WaitDistribution& dist, const WaitParams& chosen,
                           const WaitParams& baseline, const PlatformModel& model,
                           double latency_weight, int resamples, double confidence,
                           uint64_t seed) {
  const auto& pts = dist.points();
  std::vector<double> diff(pts.size());
  double sum = 0, weight = 0;
  for (size_t j = 0; j < pts.size(); ++j) {
    const RequestCost a = ExpectedRequestCost(pts[j].value_ns, baseline, model);
    const RequestCost b = ExpectedRequestCost(pts[j].value_ns, chosen, model);
    diff[j] = (a.cpu_ns - b.cpu_ns) + latency_weight * (a.latency_ns - b.latency_ns);
    sum += pts[j].weight * diff[j];
    weight += pts[j].weight;
  }
  GainInterval out;
  out.gain_ns = weight > 0 ? sum / weight : 0;
  // SplitMix64: fast, and the same stream for the same seed everywhere.
  uint64_t state = seed;
  auto next = [&state]() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  auto uniform = [&next]() { return static_cast<double>(next() >> 11) * 0x1.0p-53; };
  // Per point: exp(-count) for Knuth's Poisson draw (small counts), or
  // sqrt(count) for the normal approximation.
  std::vector<double> limit(pts.size());
  for (size_t j = 0; j < pts.size(); ++j) {
    const double c = pts[j].weight;
    limit[j] = c > 50 ? std::sqrt(c) : std::exp(-c);
  }
  std::vector<double> gains;
  gains.reserve(resamples);
  double spare = 0;  // the second normal of a Box-Muller pair
  bool has_spare = false;
  auto normal = [&]() {
    if (has_spare) {
      has_spare = false;
      return spare;
    }
    double u = 0;
    while (u <= 0) u = uniform();
    const double r = std::sqrt(-2 * std::log(u));
    const double t = 2 * M_PI * uniform();
    spare = r * std::sin(t);
    has_spare = true;
    return r * std::cos(t);
  };
  for (int r = 0; r < resamples; ++r) {
    double s = 0, wsum = 0;
    for (size_t j = 0; j < pts.size(); ++j) {
      const double c = pts[j].weight;
      double w;
      if (c > 50) {
        w = std::max(0.0, std::round(c + limit[j] * normal()));
      } else {
        // Knuth: the number of uniforms whose product stays above exp(-c).
        int k = 0;
        for (double p = uniform(); p > limit[j]; p *= uniform()) ++k;
        w = k;
      }
      s += w * diff[j];
      wsum += w;
    }
    gains.push_back(wsum > 0 ? s / wsum : out.gain_ns);
  }
  std::sort(gains.begin(), gains.end());
  const double tail = (1 - confidence) / 2;
  auto at = [&](double q) {
    const size_t i = static_cast<size_t>(std::clamp(q * (gains.size() - 1), 0.0,
                                                    static_cast<double>(gains.size() - 1)));
    return gains[i];
  };
  out.low_ns = at(tail);
  out.high_ns = at(1 - tail);
  return out;
}

}  // namespace spintune
