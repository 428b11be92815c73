// Verifier: every pushed table is a hypothesis, checked against what the
// driver measured (issue #12).
//
// A driver that reports outcomes (KeyOutcome: CPU and latency per request
// under the version it waited by, models/cost_moments.h) lets the tuner
// compare, for every key whose wait a version changed, the measured cost J
// per request under that version with the measured cost under the version
// in force before it (its incumbent: the latest earlier version, or the
// driver's default rule, version 0, with measurements of that key). Once
// the version has `min_requests` measured requests of the key:
//   - measured interval entirely above the incumbent's: "worse". The key is
//     rolled back to the incumbent's wait in a new version (origin
//     "verify-rollback", pushed like any other) and held there: refits keep
//     that wait until the key's evidence changes (a detected drift, or twice
//     the samples it had);
//   - entirely below: "better";
//   - overlapping after `max_requests`: "inconclusive".
// That is a before/after comparison of two windows; when the key's
// completion times drifted between them (a drift Store::DetectChanges
// recorded inside the span of the two measurements), the verdict is
// "inconclusive" at once and nothing is rolled back. The detector runs when
// such a verdict is due.
//
// A/B: when a version carries a trial for the key (AttachTrials) and the
// driver reported both arms, the version's two arms, interleaved in the
// same window, are compared instead (each arm needs min_requests / 2; the
// same interval rule; method "ab"), which a drift cannot confound. A
// version that a trial's verdict settles without a rollback is followed by
// one without those trials (origin "verify-settled").
// Each verdict is stored with the prediction the fit made for the entry
// (its expected J), so predicted and measured can be compared.
//
// Thread-compatible: called on the fitter's thread with its Store.
#ifndef SPINTUNE_TUNER_VERIFIER_H_
#define SPINTUNE_TUNER_VERIFIER_H_

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "storage/store.h"

namespace spintune {

struct VerifierOptions {
  uint64_t min_requests = 1000;
  uint64_t max_requests = 8000;
  double z = 1.96;  // interval half-width in standard errors (95%)
  // A/B trials (AttachTrials): commands per 256 a changed key sends to its
  // incumbent's wait, for targets whose drivers read format 3 blobs
  // (TrialShare); 0: no trials. Equal arms (128) give the narrowest
  // interval on the difference for a given number of requests.
  uint32_t ab_share = 128;
  // The drift detector's test (the fitter's TunerOptions::change).
  ChangeTest change;
};

struct VerifyResult {
  std::vector<VerificationRecord> decided;  // verdicts recorded now
  // Stored; to push: a rollback, or a version that drops settled trials.
  std::optional<PolicyTable> rollback;
  // Keys whose drift the check detected now (for the next refit's held
  // keys: ApplyHeldKeys' `changed`).
  std::vector<PolicyKey> drifted;
};

absl::StatusOr<VerifyResult> VerifyTarget(Store& store, int64_t target_id,
                                          const VerifierOptions& options);

// Gives each key of a freshly fitted `table` whose wait differs from
// `latest`'s (the version in force before it; the default rule when null)
// an A/B trial of that wait with `share` (1..255 of 256 commands); a key
// whose wait is `latest`'s keeps `latest`'s trial until a verdict on it is
// recorded. Keys with context leaves and fallback entries get none. Nothing
// when `share` is 0.
absl::Status AttachTrials(Store& store, int64_t target_id, const PolicyTable* latest,
                          uint32_t share, PolicyTable* table);

// The blob format that carries A/B trials (SPINTUNE_BLOB_VERSION_3).
inline constexpr uint32_t kTrialBlobFormat = 3;

// `ab_share` for a target whose agent said (Hello max_blob_format) that its
// drivers read format 3 blobs; 0 (no trials) for any other, including
// agents from before the field: their drivers would refuse the blob whole.
inline uint32_t TrialShare(const TargetRecord& target, uint32_t ab_share) {
  return target.max_blob_format >= kTrialBlobFormat ? ab_share : 0;
}

// Applies the target's held keys to a freshly fitted `table`: a held key
// keeps its held wait (priced on `keys`' evidence with the table's mean
// costs); a key whose evidence changed (in `changed`, or twice the samples
// it was held at) is released. Returns the keys released.
absl::StatusOr<std::vector<PolicyKey>> ApplyHeldKeys(Store& store, int64_t target_id,
                                                     const std::vector<KeyEvidence>& keys,
                                                     const std::vector<PolicyKey>& changed,
                                                     PolicyTable* table);

// Per key, the outcomes measured under versions (or the default rule,
// version 0, by `devices`' rules) in which that key waited by the IRQ path,
// merged: FitInputs::irq_outcomes.
absl::StatusOr<std::map<PolicyKey, CostMoments>> IrqPathOutcomes(
    Store& store, int64_t target_id, const std::vector<DeviceInfo>& devices);

}  // namespace spintune

#endif  // SPINTUNE_TUNER_VERIFIER_H_
