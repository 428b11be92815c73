// libFuzzer target: arbitrary bytes as an agent's knob declaration, through
// the tuner's checks (SpaceFromDeclaration); a declaration they accept must
// make a valid experiment whose every planned trial is in its space.
#include <cstdint>
#include <variant>

#include "models/experiment_design.h"
#include "spintune/v1/spintune.pb.h"
#include "tuner/knob_protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  spintune::v1::KnobsDeclared d;
  if (!d.ParseFromArray(data, static_cast<int>(size))) return 0;
  auto declared = spintune::SpaceFromDeclaration(d);
  if (!declared.ok()) return 0;
  if (!spintune::ExperimentDesign::ValidateSpace(declared->space, declared->start).ok()) {
    __builtin_trap();  // accepted by the tuner, refused by the design
  }
  spintune::ExperimentDesignOptions options;
  options.max_trials = 40;
  spintune::ExperimentDesign design(declared->space, declared->start, options, d.lower_is_better());
  for (uint32_t n = 0;; ++n) {
    auto step = design.Next();
    if (std::holds_alternative<spintune::ExperimentConclusion>(step)) break;
    const auto& setting = std::get<spintune::PlannedTrial>(step).setting;
    if (!declared->space.Contains(setting) || n >= options.max_trials) __builtin_trap();
    // Some settings fail, the others measure a value derived from them
    // (summed unsigned: the values may be anywhere in int64).
    uint64_t sum = 0;
    for (int64_t v : setting) sum += static_cast<uint64_t>(v);
    design.Record({setting, 1.0 + static_cast<double>(sum & 7), (sum & 3) != 0});
  }
  return 0;
}
