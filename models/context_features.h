// Context features: what a driver knows about a command when it issues it,
// beyond its key (issue 16). They are computed from a few words of per-device
// state that the driver helpers keep in O(1) (spintune_ctx_issue() and
// spintune_ctx_done() in driver/include/spintune/policy.h):
//
//   prev_wait_ns    completion time (issue -> hardware completion) of the
//                   command of this device that completed last before the
//                   issue; 0 before the first completion
//   since_write_ns  issue time minus the completion time of the device's
//                   last completed write; kNoWriteYet before the first
//   inflight        commands of this device issued before this one and not
//                   yet completed
//   bytes           the command's transfer length
//
// ComputeContext() recomputes them from a device's requests (issue time,
// completion time, length, write or not) exactly as the helpers would have
// seen them, so a table fitted offline selects leaves the way a driver does.
//
// Pure functions; thread-safe.
#ifndef SPINTUNE_MODELS_CONTEXT_FEATURES_H_
#define SPINTUNE_MODELS_CONTEXT_FEATURES_H_

#include <array>
#include <cstdint>
#include <limits>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace spintune {

// Values match enum spintune_feature of the driver header and the blob.
enum class ContextFeature : uint8_t {
  kPrevWaitNs = 0,
  kSinceWriteNs = 1,
  kInflight = 2,
  kBytes = 3,
};
inline constexpr int kContextFeatureCount = 4;

// since_write_ns of a device that has completed no write yet.
inline constexpr uint64_t kNoWriteYet = std::numeric_limits<uint64_t>::max();

// "prev_wait_ns", "since_write_ns", "inflight", "bytes".
absl::string_view ContextFeatureName(ContextFeature feature);
absl::StatusOr<ContextFeature> ParseContextFeature(absl::string_view name);

// One command's features, indexed by ContextFeature value.
using ContextVector = std::array<uint64_t, kContextFeatureCount>;

// One command of a device.
struct DeviceRequest {
  uint64_t issue_ns = 0;
  uint64_t wait_ns = 0;  // completes at issue_ns + wait_ns
  uint64_t bytes = 0;
  bool write = false;    // its completion resets since_write_ns
};

// The features of every request (result[i] belongs to requests[i]; any
// order). A request sees the completions at or before its issue time; of
// requests issued at the same instant, the earlier one in `requests` counts
// as issued first. O(n log n).
std::vector<ContextVector> ComputeContext(absl::Span<const DeviceRequest> requests);

// The block layer's REQ_OP_WRITE (1) and the MMC data writes CMD24
// (WRITE_BLOCK) and CMD25 (WRITE_MULTIPLE_BLOCK): what a table calls a write
// unless its device says otherwise (DeviceInfo::write_opcodes).
const std::vector<uint32_t>& DefaultWriteOpcodes();

}  // namespace spintune

#endif  // SPINTUNE_MODELS_CONTEXT_FEATURES_H_
