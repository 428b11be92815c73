#include "agent/knobs/knob_only_source.h"

#include "agent/host_probe.h"

namespace spintune {

KnobOnlySource::KnobOnlySource(const KnobDeclaration& d, std::string host)
    : board_(d.board.empty() ? std::move(host) : d.board),
      device_(d.device.empty() ? d.name : d.device),
      driver_(d.driver.empty() ? "unknown" : d.driver) {
  if (!d.sim_board.empty()) {
    cpu_model_ = "Allwinner A20 (2x Cortex-A7 @ 1 GHz, simulated)";
    cpu_khz_ = 1'000'000;
  } else {
    cpu_khz_ = HostCpuKhz();
  }
}

void KnobOnlySource::Describe(v1::Hello* hello) const {
  auto* target = hello->mutable_target();
  target->set_board(board_);
  target->set_cpu_model(cpu_model_);
  // Platform costs unknown (0): this agent sends no samples to fit with.
  auto* cpu = target->add_cpu_classes();
  cpu->set_name("default");
  cpu->set_cpu_khz(cpu_khz_);
  cpu->mutable_costs();
  auto* device = hello->add_devices();
  device->set_name(device_);
  device->set_driver(driver_);
}

}  // namespace spintune
