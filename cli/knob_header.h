// The release header's #defines for knob settings found by experiment
// (docs/knobs.md): one per coordinate (SPINTUNE_KNOB_P0DMACR_TXTS 3; enum
// values as strings), and per register its tuned fields as a mask and a
// value to set with (reg & ~MASK) | VALUE, each with its evidence.
//
// Pure function; thread-safe.
#ifndef SPINTUNE_CLI_KNOB_HEADER_H_
#define SPINTUNE_CLI_KNOB_HEADER_H_

#include <vector>

#include "policy/header_writer.h"
#include "storage/experiment_record.h"

namespace spintune {

std::vector<HeaderDefine> KnobHeaderDefines(const std::vector<KnobSettingRecord>& knobs);

}  // namespace spintune

#endif  // SPINTUNE_CLI_KNOB_HEADER_H_
