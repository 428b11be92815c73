// The knob messages of the Session (spintune.proto, docs/knobs.md) as the
// experiment design sees them: a declaration's search space and start, its
// fingerprint, and settings as KnobValue lists.
//
// Coordinates: an integer knob is one coordinate named after it; an enum
// knob one whose values are label indexes; a register knob one coordinate
// per bit field, named "KNOB.FIELD".
//
// Pure functions; thread-safe.
#ifndef SPINTUNE_TUNER_KNOB_PROTOCOL_H_
#define SPINTUNE_TUNER_KNOB_PROTOCOL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "models/knob_space.h"
#include "spintune/v1/spintune.pb.h"
#include "storage/experiment_record.h"

namespace spintune {

struct DeclaredSpace {
  KnobSpace space;
  KnobSetting start;
};

// Checks every field (InvalidArgument naming it: "knobs_declared.knobs[1]
// .values: ..."); a start value outside the candidates is added to them.
absl::StatusOr<DeclaredSpace> SpaceFromDeclaration(const v1::KnobsDeclared& declared);
// Of everything but the start values (a board's current values do not make
// a different experiment).
uint64_t DeclarationFingerprint(const v1::KnobsDeclared& declared);
// "dma_errors <= 0, temp_c in [0, 80]" ("" when none).
std::string ConstraintsText(const v1::KnobsDeclared& declared);

void SettingToProto(const KnobSpace& space, const KnobSetting& setting,
                    google::protobuf::RepeatedPtrField<v1::KnobValue>* out);
// The setting as knob settings in force, with their evidence.
std::vector<KnobSettingRecord> SettingRecords(const KnobSpace& space, const KnobSetting& setting,
                                              const std::string& declaration,
                                              int64_t experiment_id, const std::string& evidence);

}  // namespace spintune

#endif  // SPINTUNE_TUNER_KNOB_PROTOCOL_H_
