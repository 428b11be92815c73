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

SimSource::SimSource(const BoardModel& board, uint64_t seed) : board_(board), rng_(seed) {
  std::vector<double> shares;
  for (const auto& op : board.opcodes) {
    shares.push_back(op.share);
    std::vector<double> sizes;
    for (const auto& s : op.sizes) sizes.push_back(s.share);
    pick_size_.emplace_back(sizes.begin(), sizes.end());
  }
  pick_opcode_ = std::discrete_distribution<size_t>(shares.begin(), shares.end());
}

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
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (size_t i = 0; i < max_completions; ++i) {
    const size_t op_index = pick_opcode_(rng_);
    const OpcodeModel& op = board_.opcodes[op_index];
    const uint64_t bytes = op.sizes[pick_size_[op_index](rng_)].bytes;
    const double x_ns = DrawCompletionNs(board_, op, bytes, rng_);
    const bool error = unit(rng_) < op.error_share;
    const v1::WaitPath path = PathFor(board_, op.opcode, bytes, x_ns);
    c->add_device_index(0);
    c->add_cpu_class_index(0);
    c->add_opcode(op.opcode);
    c->add_bytes(bytes);
    c->add_wait_ns(std::max<uint64_t>(1, static_cast<uint64_t>(std::llround(x_ns))));
    c->add_path(path);
    c->add_flags(error ? 1u : 0u);
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
