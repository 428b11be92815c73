// CostMoments: what the requests of one key cost, as measured (a driver's
// own report of CPU and latency per request, or a simulated driver's), kept
// as exact first and second moments so that for any latency weight lambda
// the mean cost per request J = cpu + lambda * latency and its variance
// follow without the individual requests:
//   mean(J) = (S_c + lambda S_l) / n
//   var(J)  = var(c) + lambda^2 var(l) + 2 lambda cov(c, l)
// The interval of mean(J) is the normal one, mean +- z sqrt(var(J) / n):
// with the hundreds of requests a verification waits for, the mean of i.i.d.
// costs is normal to well within the interval's precision, and unlike a
// bootstrap it needs no resampling of stored requests.
//
// Pure value type; thread-compatible.
#ifndef SPINTUNE_MODELS_COST_MOMENTS_H_
#define SPINTUNE_MODELS_COST_MOMENTS_H_

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace spintune {

struct CostInterval {
  double mean_ns = 0;
  double low_ns = 0;
  double high_ns = 0;
};

struct CostMoments {
  uint64_t requests = 0;
  double cpu_ns_sum = 0;
  double latency_ns_sum = 0;
  double cpu_ns_sq_sum = 0;
  double latency_ns_sq_sum = 0;
  double cpu_latency_ns_sum = 0;  // sum of cpu * latency

  void Add(double cpu_ns, double latency_ns) {
    ++requests;
    cpu_ns_sum += cpu_ns;
    latency_ns_sum += latency_ns;
    cpu_ns_sq_sum += cpu_ns * cpu_ns;
    latency_ns_sq_sum += latency_ns * latency_ns;
    cpu_latency_ns_sum += cpu_ns * latency_ns;
  }
  void Merge(const CostMoments& o) {
    requests += o.requests;
    cpu_ns_sum += o.cpu_ns_sum;
    latency_ns_sum += o.latency_ns_sum;
    cpu_ns_sq_sum += o.cpu_ns_sq_sum;
    latency_ns_sq_sum += o.latency_ns_sq_sum;
    cpu_latency_ns_sum += o.cpu_latency_ns_sum;
  }
  double MeanCpuNs() const { return requests ? cpu_ns_sum / requests : 0; }
  double MeanLatencyNs() const { return requests ? latency_ns_sum / requests : 0; }
  double MeanCostNs(double latency_weight) const {
    return MeanCpuNs() + latency_weight * MeanLatencyNs();
  }
  // Variance of one request's J (population form; 0 below 2 requests).
  double CostVariance(double latency_weight) const {
    if (requests < 2) return 0;
    const double n = static_cast<double>(requests);
    const double mc = cpu_ns_sum / n, ml = latency_ns_sum / n;
    const double vc = cpu_ns_sq_sum / n - mc * mc;
    const double vl = latency_ns_sq_sum / n - ml * ml;
    const double cv = cpu_latency_ns_sum / n - mc * ml;
    return std::max(0.0, vc + latency_weight * latency_weight * vl + 2 * latency_weight * cv);
  }
  // Mean J with its interval at `z` standard errors (1.96: 95%).
  CostInterval Interval(double latency_weight, double z = 1.96) const {
    CostInterval out;
    out.mean_ns = MeanCostNs(latency_weight);
    const double se =
        requests ? std::sqrt(CostVariance(latency_weight) / static_cast<double>(requests)) : 0;
    out.low_ns = out.mean_ns - z * se;
    out.high_ns = out.mean_ns + z * se;
    return out;
  }
};

}  // namespace spintune

#endif  // SPINTUNE_MODELS_COST_MOMENTS_H_
