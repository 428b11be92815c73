// Which samples a report of a stored version shows, and whether they are
// the samples that version was fitted on.
//
// The tuner keeps one set of histograms per target (today's); a version
// stores only how many samples each entry was fitted on. A report of an
// older or rolled-back version therefore either finds that version's own
// evidence in a saved profile (which keeps histograms), or shows today's
// samples and says so (cli/report_writer.h states it on the page).
//
// Pure functions except WithFitEvidence (reads the store); thread-safe.
#ifndef SPINTUNE_CLI_REPORT_EVIDENCE_H_
#define SPINTUNE_CLI_REPORT_EVIDENCE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "storage/profile.h"
#include "storage/store.h"

namespace spintune {

// Per key with entries in `table`: the samples they were fitted on (the sum
// over the key's context leaves; fallback entries are not keys).
std::map<PolicyKey, uint64_t> FittedSamples(const PolicyTable& table);

// True when `keys` hold exactly the samples `table` was fitted on: every
// key with entries has its fitted count (keys too small for an entry are
// not counted either way).
bool IsFitEvidence(const PolicyTable& table, const std::vector<KeyEvidence>& keys);

// `snapshot`: a target's version with the target's samples today
// (Store::SnapshotProfile). When those are not what the version was fitted
// on, the newest saved profile of the same target whose entries are the
// version's (same keys, waits and sample counts) and whose samples are its
// fit evidence lends its histograms (keys and IRQ dispatch). `*source` says
// where the returned profile's samples come from, for the page.
absl::StatusOr<Profile> WithFitEvidence(Store& store, Profile snapshot, std::string* source);

}  // namespace spintune

#endif  // SPINTUNE_CLI_REPORT_EVIDENCE_H_
