// The binary policy blob of one device (docs/policy-format.md): what the
// agent's sinks hand to a driver, parsed there by spintune_blob_parse() in
// driver/include/spintune/policy.h.
//
// Pure functions; thread-safe.
#ifndef SPINTUNE_POLICY_POLICY_BLOB_H_
#define SPINTUNE_POLICY_POLICY_BLOB_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "policy/policy_table.h"
#include "spintune/policy.h"

namespace spintune {

// Encodes the entries of `device` in `table` (CPU classes by their index in
// table.cpu_classes). The result always passes spintune_blob_parse().
// InvalidArgument when the device is unknown or has no fallback entry, its
// name is 32 bytes or longer, or a value exceeds the driver's bounds.
absl::StatusOr<std::string> EncodePolicyBlob(const PolicyTable& table,
                                             const std::string& device);

struct DecodedBlob {
  spintune_table table;  // entries point into `entries`
  std::vector<spintune_entry> entries;

  DecodedBlob() = default;
  DecodedBlob(const DecodedBlob&) = delete;
  DecodedBlob& operator=(const DecodedBlob&) = delete;
};

// Parses with the driver's own parser. InvalidArgument carrying the errno
// name when the blob is rejected.
absl::StatusOr<std::unique_ptr<DecodedBlob>> DecodePolicyBlob(const std::string& blob);

}  // namespace spintune

#endif  // SPINTUNE_POLICY_POLICY_BLOB_H_
