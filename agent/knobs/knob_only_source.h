// KnobOnlySource: the sample source of an agent that only runs knob
// experiments (`spintune-agent --knobs ...` without --source): it measures
// no completions and describes the target from the knob declaration (its
// board, device and driver; the simulated ahci_sunxi boards name an
// Allwinner A20), so the tuner has a target to keep the experiments of.
//
// Thread-safety: one thread per source.
#ifndef SPINTUNE_AGENT_KNOBS_KNOB_ONLY_SOURCE_H_
#define SPINTUNE_AGENT_KNOBS_KNOB_ONLY_SOURCE_H_

#include "agent/knobs/knob_declaration.h"
#include "agent/sample_source.h"

namespace spintune {

class KnobOnlySource : public SampleSource {
 public:
  // `host` names the board when the declaration does not.
  KnobOnlySource(const KnobDeclaration& declaration, std::string host);
  void Describe(v1::Hello* hello) const override;
  absl::StatusOr<size_t> Fill(size_t, v1::SampleBatch*) override { return 0; }
  bool exhausted() const override { return true; }

 private:
  std::string board_, cpu_model_, device_, driver_;
  uint64_t cpu_khz_ = 0;
};

}  // namespace spintune

#endif  // SPINTUNE_AGENT_KNOBS_KNOB_ONLY_SOURCE_H_
