#include "models/bootstrap.h"

#include <algorithm>
#include <cmath>
#include <random>
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
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<double> gains;
  gains.reserve(resamples);
  for (int r = 0; r < resamples; ++r) {
    double s = 0, wsum = 0;
    for (size_t j = 0; j < pts.size(); ++j) {
      const double c = pts[j].weight;
      double w;
      if (c > 50) {
        w = std::max(0.0, std::round(c + std::sqrt(c) * normal(rng)));
      } else {
        w = static_cast<double>(std::poisson_distribution<int>(c)(rng));
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
