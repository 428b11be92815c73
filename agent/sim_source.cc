#include "agent/sim_source.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/capture/histogram_batch.h"
#include "models/cost_moments.h"
#include "policy/policy_proto.h"

namespace spintune {
namespace {

// The wait of a request: the applied table's entry for its key (or its
// device's fallback), else the board's stock rules (IRQ when none matches).
WaitParams WaitFor(const BoardModel& board, const std::optional<PolicyTable>& table,
                   uint32_t opcode, uint64_t bytes) {
  if (table) {
    const PolicyKey key{board.cpu_class, board.device_name, opcode, SizeClassOf(bytes)};
    if (const PolicyEntry* e = table->EntryFor(key)) return e->wait;
  }
  for (const auto& rule : board.default_rules) {
    if (rule.Matches(opcode, bytes)) return rule.wait;
  }
  return WaitParams::Irq();
}

}  // namespace

SimSource::SimSource(const BoardModel& board, uint64_t seed, double timer_wake_factor)
    : board_(board),
      driver_(board, timer_wake_factor, seed * 0x9e3779b97f4a7c15ull + 1),
      rng_(seed),
      sim_(board, seed, &rng_) {}

void SimSource::OnTableApplied(const PolicyTable& table) {
  table_ = table;
  blob_.reset();
  const bool trials = std::any_of(table.entries.begin(), table.entries.end(),
                                  [](const PolicyEntry& e) { return e.trial.has_value(); });
  if (!trials) return;
  // The agent applied it, so it encodes; a failure here is a bug.
  auto blob = EncodePolicyBlob(table, board_.device_name);
  auto decoded = blob.ok() ? DecodePolicyBlob(*blob) : blob.status();
  if (!decoded.ok()) return;
  blob_ = std::move(*decoded);
  spintune_ab_init(&ab_, &blob_->table);
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
  const uint64_t version = table_ ? table_->version : 0;
  // (opcode, size class, arm)
  std::map<std::tuple<uint32_t, uint32_t, OutcomeArm>, CostMoments> outcomes;
  LatencyHistogram oversleep;
  uint64_t oversleep_sum = 0;
  for (size_t i = 0; i < max_completions; ++i) {
    SimRequest r = sim_.Next();
    if (table_) r.x_ns *= drift_factor_;
    const uint32_t opcode = r.op->opcode;
    WaitParams wait = WaitFor(board_, table_, opcode, r.bytes);
    OutcomeArm arm = OutcomeArm::kTable;
    if (blob_) {
      const spintune_entry* e = spintune_ab_pick(
          &blob_->table, spintune_lookup(&blob_->table, 0, opcode, r.bytes), &ab_);
      wait = {static_cast<Strategy>(e->strategy), e->spin_ns, e->sleep_ns, e->poll_interval_ns};
      if (spintune_entry_is_incumbent(e)) arm = OutcomeArm::kIncumbent;
    }
    const SimWait w = driver_.Wait(wait, r.x_ns);
    c->add_device_index(0);
    c->add_cpu_class_index(0);
    c->add_opcode(opcode);
    c->add_bytes(r.bytes);
    c->add_wait_ns(std::max<uint64_t>(1, static_cast<uint64_t>(std::llround(r.x_ns))));
    c->add_path(w.irq ? v1::WAIT_PATH_IRQ : v1::WAIT_PATH_SPIN);
    c->add_flags(r.error ? 1u : 0u);
    c->add_issue_ns(r.issue_ns);
    if (w.irq) {
      d->add_cpu_class_index(0);
      d->add_device_index(0);
      d->add_handler_ns(static_cast<uint64_t>(w.handler_ns));
      d->add_wake_ns(static_cast<uint64_t>(w.wake_ns));
    }
    outcomes[{opcode, SizeClassOf(r.bytes), arm}].Add(w.cpu_ns, w.latency_ns);
    for (double o : w.oversleep_ns) {
      oversleep.Record(static_cast<uint64_t>(o));
      oversleep_sum += static_cast<uint64_t>(o);
    }
  }
  for (const auto& [key, m] : outcomes) {
    auto* o = batch->add_outcomes();
    o->set_device_index(0);
    o->set_cpu_class_index(0);
    o->set_opcode(std::get<0>(key));
    o->set_size_class(std::get<1>(key));
    o->set_policy_version(version);
    if (std::get<2>(key) == OutcomeArm::kIncumbent) o->set_arm(v1::OUTCOME_ARM_INCUMBENT);
    o->set_requests(m.requests);
    o->set_cpu_ns_sum(m.cpu_ns_sum);
    o->set_latency_ns_sum(m.latency_ns_sum);
    o->set_cpu_ns_sq_sum(m.cpu_ns_sq_sum);
    o->set_latency_ns_sq_sum(m.latency_ns_sq_sum);
    o->set_cpu_latency_ns_sum(m.cpu_latency_ns_sum);
  }
  if (!oversleep.empty()) {
    auto* t = batch->add_timer_oversleep();
    t->set_cpu_class_index(0);
    BucketCountsToProto({oversleep.buckets(), oversleep.total_count(), oversleep_sum},
                        t->mutable_oversleep());
  }
  return max_completions;
}

}  // namespace spintune
