// KnobAccessor: reads and writes one knob's raw value (the text a sysfs
// attribute or a register helper takes), and KnobWorkload: one measured
// trial window. Factories build them from a KnobDeclaration.
//
// Thread-compatible: the knob controller uses them from its worker thread.
#ifndef SPINTUNE_AGENT_KNOBS_KNOB_ACCESS_H_
#define SPINTUNE_AGENT_KNOBS_KNOB_ACCESS_H_

#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "agent/knobs/ahci_sunxi_sim.h"
#include "agent/knobs/knob_declaration.h"

namespace spintune {

class KnobAccessor {
 public:
  virtual ~KnobAccessor() = default;
  // The value as it can be written back: trimmed; for a sysfs enum list
  // ("none [mq-deadline] kyber") the bracketed entry.
  virtual absl::StatusOr<std::string> Read() = 0;
  // Unavailable (with the errno text or the helper's exit status) on failure.
  virtual absl::Status Write(const std::string& raw) = 0;
};

class KnobWorkload {
 public:
  virtual ~KnobWorkload() = default;
  // Runs one trial window; every metric it measured by name.
  virtual absl::StatusOr<std::map<std::string, double>> Run() = 0;
};

// The simulated ahci_sunxi board shared by its register accessor and its
// workload; `board` as in ahci_sunxi_sim.h.
absl::StatusOr<std::shared_ptr<AhciSunxiSim>> MakeAhciSunxiSim(const std::string& board,
                                                               uint64_t seed);

// `sim` is used for KnobAccess::Kind::kSim (and must then be set).
std::unique_ptr<KnobAccessor> MakeKnobAccessor(const KnobAccess& access,
                                               std::shared_ptr<AhciSunxiSim> sim);
// Metrics: ioload: mib_per_s, requests_per_s, errors (0); command: the
// name=value pairs it printed, plus seconds; sim: write_mbps, read_mbps,
// dma_errors.
std::unique_ptr<KnobWorkload> MakeKnobWorkload(const WorkloadSpec& spec,
                                               std::shared_ptr<AhciSunxiSim> sim);

}  // namespace spintune

#endif  // SPINTUNE_AGENT_KNOBS_KNOB_ACCESS_H_
