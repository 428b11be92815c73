#include "policy/policy_proto.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace spintune {

PlatformCosts CostsFromProto(const v1::PlatformCosts& w) {
  PlatformCosts c;
  c.irq_cpu_ns = static_cast<double>(w.irq_cpu_ns());
  c.irq_wake_ns = static_cast<double>(w.irq_wake_ns());
  c.poll_read_ns = static_cast<double>(w.poll_read_ns());
  c.timer_cpu_ns = static_cast<double>(w.timer_cpu_ns());
  c.timer_wake_ns = static_cast<double>(w.timer_wake_ns());
  return c;
}

void CostsToProto(const PlatformCosts& c, v1::PlatformCosts* w) {
  w->set_irq_cpu_ns(static_cast<uint64_t>(c.irq_cpu_ns));
  w->set_irq_wake_ns(static_cast<uint64_t>(c.irq_wake_ns));
  w->set_poll_read_ns(static_cast<uint64_t>(c.poll_read_ns));
  w->set_timer_cpu_ns(static_cast<uint64_t>(c.timer_cpu_ns));
  w->set_timer_wake_ns(static_cast<uint64_t>(c.timer_wake_ns));
}

absl::StatusOr<WaitParams> WaitFromProto(v1::Strategy strategy, uint64_t spin_ns,
                                         uint64_t sleep_ns, uint64_t poll_interval_ns) {
  if (!IsValidStrategy(static_cast<int>(strategy))) {
    return absl::InvalidArgumentError(
        absl::StrCat("strategy ", static_cast<int>(strategy), " is not a known strategy"));
  }
  WaitParams w;
  w.strategy = static_cast<Strategy>(strategy);
  w.spin_ns = spin_ns;
  w.sleep_ns = sleep_ns;
  w.poll_interval_ns = poll_interval_ns;
  return w;
}

absl::StatusOr<std::vector<DeviceInfo>> DevicesFromHello(const v1::Hello& hello) {
  std::vector<DeviceInfo> out;
  for (int i = 0; i < hello.devices_size(); ++i) {
    const auto& d = hello.devices(i);
    DeviceInfo info;
    info.name = d.name();
    info.driver = d.driver();
    info.model = d.model();
    for (int r = 0; r < d.default_rules_size(); ++r) {
      const auto& rw = d.default_rules(r);
      DefaultRule rule;
      auto wait = WaitFromProto(rw.strategy(), rw.spin_ns(), rw.sleep_ns(), rw.poll_interval_ns());
      if (!wait.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("hello.devices[", i, "].default_rules[",
                                                       r, "]: ", wait.status().message()));
      }
      rule.wait = *wait;
      rule.any_opcode = rw.any_opcode();
      rule.opcode = rw.opcode();
      rule.min_bytes = rw.min_bytes();
      rule.max_bytes = rw.max_bytes();
      rule.note = rw.note();
      info.default_rules.push_back(std::move(rule));
    }
    out.push_back(std::move(info));
  }
  return out;
}

void DeviceToProto(const DeviceInfo& device, v1::Device* wire) {
  wire->set_name(device.name);
  wire->set_driver(device.driver);
  wire->set_model(device.model);
  for (const auto& rule : device.default_rules) {
    auto* r = wire->add_default_rules();
    r->set_any_opcode(rule.any_opcode);
    r->set_opcode(rule.opcode);
    r->set_min_bytes(rule.min_bytes);
    r->set_max_bytes(rule.max_bytes);
    r->set_strategy(static_cast<v1::Strategy>(rule.wait.strategy));
    r->set_spin_ns(rule.wait.spin_ns);
    r->set_sleep_ns(rule.wait.sleep_ns);
    r->set_poll_interval_ns(rule.wait.poll_interval_ns);
    r->set_note(rule.note);
  }
}

void CpuClassToProto(const CpuClassInfo& cpu, v1::CpuClass* wire) {
  wire->set_name(cpu.name);
  wire->set_cpu_khz(cpu.cpu_khz);
  CostsToProto(cpu.costs, wire->mutable_costs());
}

std::vector<CpuClassInfo> CpuClassesFromHello(const v1::Hello& hello) {
  std::vector<CpuClassInfo> out;
  for (const auto& c : hello.target().cpu_classes()) {
    CpuClassInfo info;
    info.name = c.name();
    info.cpu_khz = c.cpu_khz();
    info.costs = CostsFromProto(c.costs());
    out.push_back(std::move(info));
  }
  return out;
}

void PolicyTableToProto(const PolicyTable& t, v1::PolicyTable* w) {
  w->Clear();
  w->set_version(t.version);
  w->set_latency_weight(t.latency_weight);
  w->set_objective(t.objective_name);
  w->set_max_spin_ns(t.max_spin_ns);
  w->set_fitted_at(t.fitted_at);
  w->set_robustness_rho(t.robustness_rho);
  for (const auto& e : t.entries) {
    auto* we = w->add_entries();
    we->set_cpu_class(e.key.cpu_class);
    we->set_device(e.key.device);
    we->set_opcode(e.key.opcode);
    we->set_size_class(e.key.size_class);
    we->set_fallback(e.fallback);
    we->set_strategy(static_cast<v1::Strategy>(e.wait.strategy));
    we->set_spin_ns(e.wait.spin_ns);
    we->set_sleep_ns(e.wait.sleep_ns);
    we->set_poll_interval_ns(e.wait.poll_interval_ns);
    we->set_samples(e.samples);
    we->set_expected_cpu_ns(e.expected.cpu_ns);
    we->set_expected_latency_ns(e.expected.latency_ns);
    we->set_expected_cost_ns(e.expected_cost_ns);
    we->set_gain_ns(e.gain_ns);
    we->set_gain_ci_low_ns(e.gain_ci_low_ns);
    we->set_gain_ci_high_ns(e.gain_ci_high_ns);
    if (e.trial) {
      auto* trial = we->mutable_trial();
      trial->set_strategy(static_cast<v1::Strategy>(e.trial->wait.strategy));
      trial->set_spin_ns(e.trial->wait.spin_ns);
      trial->set_sleep_ns(e.trial->wait.sleep_ns);
      trial->set_poll_interval_ns(e.trial->wait.poll_interval_ns);
      trial->set_share(e.trial->share);
    }
    if (e.default_wait) {
      we->set_default_cpu_ns(e.default_expected.cpu_ns);
      we->set_default_latency_ns(e.default_expected.latency_ns);
      we->set_default_cost_ns(e.default_cost_ns);
    }
  }
}

absl::StatusOr<PolicyTable> PolicyTableFromProto(const v1::PolicyTable& w,
                                                 const v1::Hello& hello) {
  PolicyTable t;
  t.version = w.version();
  t.board = hello.target().board();
  t.latency_weight = w.latency_weight();
  t.objective_name = w.objective();
  t.max_spin_ns = w.max_spin_ns();
  t.fitted_at = w.fitted_at();
  t.robustness_rho = w.robustness_rho();
  t.cpu_classes = CpuClassesFromHello(hello);
  SPINTUNE_ASSIGN_OR_RETURN(t.devices, DevicesFromHello(hello));
  for (int i = 0; i < w.entries_size(); ++i) {
    const auto& we = w.entries(i);
    PolicyEntry e;
    e.key = {we.cpu_class(), we.device(), we.opcode(), we.size_class()};
    e.fallback = we.fallback();
    if (!e.fallback && t.CpuClassIndex(e.key.cpu_class) < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("entries[", i, "].cpu_class: unknown class '", e.key.cpu_class, "'"));
    }
    auto wait = WaitFromProto(we.strategy(), we.spin_ns(), we.sleep_ns(), we.poll_interval_ns());
    if (!wait.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("entries[", i, "].strategy: ", wait.status().message()));
    }
    e.wait = *wait;
    if (we.has_trial()) {
      const v1::PolicyTrial& wt = we.trial();
      auto trial_wait =
          WaitFromProto(wt.strategy(), wt.spin_ns(), wt.sleep_ns(), wt.poll_interval_ns());
      if (!trial_wait.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("entries[", i, "].trial.strategy: ", trial_wait.status().message()));
      }
      if (wt.share() < 1 || wt.share() > 255 || e.fallback) {
        return absl::InvalidArgumentError(absl::StrCat(
            "entries[", i, "].trial: share must be 1..255, on a non-fallback entry"));
      }
      e.trial = Trial{*trial_wait, wt.share()};
    }
    e.samples = we.samples();
    e.expected = {we.expected_cpu_ns(), we.expected_latency_ns()};
    e.expected_cost_ns = we.expected_cost_ns();
    e.gain_ns = we.gain_ns();
    e.gain_ci_low_ns = we.gain_ci_low_ns();
    e.gain_ci_high_ns = we.gain_ci_high_ns();
    t.entries.push_back(std::move(e));
  }
  SortEntries(&t.entries);
  return t;
}

}  // namespace spintune
