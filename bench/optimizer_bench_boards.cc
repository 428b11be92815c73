// Constant against measured timer oversleep, key by key, on the simulated
// boards whose sleeps are tick-bound (the LiteX Rocket boards: HZ=250 and
// HZ=100, agent/board_catalog.cc). A sleep there ends at the first tick after
// it expires, so its oversleep is uniform over one tick; the catalog's
// timer_wake_ns is its mean, half a tick. For every key this prints:
//   - the wait fitted with the constant and the cost it predicts;
//   - that wait's true cost, convolved with the uniform oversleep;
//   - the wait fitted over the distribution and its (exact) cost.
// The other boards use hrtimers, whose oversleep shape the catalog does not
// give, and are left out.
//
//   build/bench/optimizer_bench_boards [samples per key, default 20000]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

#include "agent/board_model.h"
#include "models/platform_model.h"
#include "models/wait_optimizer.h"
#include "policy/default_rule.h"

namespace spintune {
namespace {

constexpr int kOversleepSamples = 1000;  // evenly spaced over one tick

PlatformModel TickBound(const PlatformCosts& costs) {
  MeasuredCosts m;
  const double tick_ns = 2 * costs.timer_wake_ns;
  for (int k = 1; k <= kOversleepSamples; ++k) {
    m.timer_wake.Record(static_cast<uint64_t>(tick_ns * k / kOversleepSamples));
  }
  return PlatformModel::Measured(costs, m);
}

std::string Us(double ns) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", ns / 1e3);
  return buf;
}

int Run(int samples) {
  OptimizerOptions options;  // the tuner's defaults: balanced, 1 ms spin cap
  std::printf("%-30s %4s %6s | %-26s %9s %9s | %-26s %9s %6s\n", "board", "op", "bytes",
              "fitted with the constant", "J pred", "J true", "fitted over the ticks",
              "J", "saved");
  for (const BoardModel& board : BoardCatalog()) {
    if (board.name.rfind("litex-rocket", 0) != 0 || board.modulation.modulated()) continue;
    const PlatformCosts costs = board.Costs();
    const PlatformModel ticks = TickBound(costs);
    std::mt19937_64 rng(1);
    for (const OpcodeModel& op : board.opcodes) {
      for (const SizeShare& size : op.sizes) {
        LatencyHistogram h;
        for (int i = 0; i < samples; ++i) {
          h.Record(static_cast<uint64_t>(DrawCompletionNs(board, op, size.bytes, rng)));
        }
        const WaitDistribution dist = WaitDistribution::FromHistogram(h);
        auto constant = OptimizeWait(dist, costs, options);
        auto measured = OptimizeWait(dist, ticks, options);
        if (!constant.ok() || !measured.ok()) {
          std::fprintf(stderr, "%s op %u: %s\n", board.name.c_str(), op.opcode,
                       std::string((constant.ok() ? measured : constant).status().message())
                           .c_str());
          return 1;
        }
        const double lambda = options.objective.latency_weight;
        const double true_cost = EvaluateWait(dist, constant->params, ticks).Cost(lambda);
        // The optimum over the distribution is never worse, up to rounding.
        const double saved = std::max(0.0, (true_cost - measured->cost_ns) / true_cost);
        std::printf("%-30s %4u %6llu | %-26s %9s %9s | %-26s %9s %5.1f%%\n",
                    board.name.c_str(), op.opcode, static_cast<unsigned long long>(size.bytes),
                    DescribeWait(constant->params).c_str(), Us(constant->cost_ns).c_str(),
                    Us(true_cost).c_str(), DescribeWait(measured->params).c_str(),
                    Us(measured->cost_ns).c_str(), 100 * saved);
      }
    }
  }
  std::printf("J in us per request (CPU + latency); saved = (J true - J) / J true.\n");
  return 0;
}

}  // namespace
}  // namespace spintune

int main(int argc, char** argv) {
  const int samples = argc > 1 ? std::atoi(argv[1]) : 20000;
  if (samples <= 0) {
    std::fprintf(stderr, "usage: %s [samples per key > 0]\n", argv[0]);
    return 2;
  }
  return spintune::Run(samples);
}
