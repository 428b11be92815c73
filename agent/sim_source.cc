#include "agent/sim_source.h"

#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "policy/policy_proto.h"

namespace spintune {
namespace {

// Relative spread of the measured IRQ handler and wake times.
constexpr double kDispatchSigma = 0.15;

// Lognormal noise with mean 1 (not median 1), so means stay unbiased.
double MeanOneNoise(std::mt19937_64& rng, double sigma) {
  std::lognormal_distribution<double> d(-0.5 * sigma * sigma, sigma);
  return d(rng);
}

v1::WaitPath PathFor(const BoardModel& board, uint32_t opcode, uint64_t bytes, double x_ns) {
  for (const auto& rule : board.default_rules) {
    if (!rule.Matches(opcode, bytes)) continue;
    switch (rule.wait.strategy) {
      case Strategy::kIrq:
        return v1::WAIT_PATH_IRQ;
      case Strategy::kSpinThenIrq:
        return x_ns <= static_cast<double>(rule.wait.spin_ns) ? v1::WAIT_PATH_SPIN
                                                              : v1::WAIT_PATH_IRQ;
      default:
        return v1::WAIT_PATH_SPIN;
    }
  }
  return v1::WAIT_PATH_UNKNOWN;
}

}  // namespace

SimSource::SimSource(const BoardModel& board, uint64_t seed)
    : board_(board), rng_(seed), sim_(board, seed, &rng_) {}

void SimSource::Describe(v1::Hello* hello) const {
  auto* target = hello->mutable_target();
  target->set_board(board_.name);
  target->set_cpu_model(board_.cpu_model);
  target->set_kernel_release(board_.kernel_release);
  auto* cpu = target->add_cpu_classes();
  cpu->set_name(board_.cpu_class);
  cpu->set_cpu_khz(board_.cpu_khz);
  CostsToProto(board_.Costs(), cpu->mutable_costs());
  cpu->mutable_costs()->set_irq_overhead_cpu_ns(
      static_cast<uint64_t>(board_.IrqOverheadNs()));
  DeviceToProto({board_.device_name, board_.driver, board_.device_model, board_.default_rules},
                hello->add_devices());
}

absl::StatusOr<size_t> SimSource::Fill(size_t max_completions, v1::SampleBatch* batch) {
  auto* c = batch->mutable_completions();
  auto* d = batch->mutable_dispatches();
  for (size_t i = 0; i < max_completions; ++i) {
    const SimRequest r = sim_.Next();
    const v1::WaitPath path = PathFor(board_, r.op->opcode, r.bytes, r.x_ns);
    c->add_device_index(0);
    c->add_cpu_class_index(0);
    c->add_opcode(r.op->opcode);
    c->add_bytes(r.bytes);
    c->add_wait_ns(std::max<uint64_t>(1, static_cast<uint64_t>(std::llround(r.x_ns))));
    c->add_path(path);
    c->add_flags(r.error ? 1u : 0u);
    c->add_issue_ns(r.issue_ns);
    if (path == v1::WAIT_PATH_IRQ) {
      d->add_cpu_class_index(0);
      d->add_device_index(0);
      d->add_handler_ns(static_cast<uint64_t>(
          board_.CyclesToNs(board_.irq_handler_cycles) * MeanOneNoise(rng_, kDispatchSigma)));
      d->add_wake_ns(static_cast<uint64_t>(
          board_.CyclesToNs(board_.irq_wake_cycles) * MeanOneNoise(rng_, kDispatchSigma)));
    }
  }
  return max_completions;
}

}  // namespace spintune
