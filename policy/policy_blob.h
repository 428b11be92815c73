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
// table.cpu_classes) in format 2, or format 3 when an entry has an A/B
// trial (its trial section): a key's context leaves become a tree
// (ContextTree::FromLeafConditions()) in the node section. The result always
// passes spintune_table_parse(). InvalidArgument when the device is unknown
// or has no fallback entry, its name is 32 bytes or longer, a value exceeds
// the driver's bounds, a key's contexts do not form a tree of depth <= 3,
// or the device has more than 4 write opcodes, or a trial is on a fallback
// entry or context leaf or has a share outside 1..255.
absl::StatusOr<std::string> EncodePolicyBlob(const PolicyTable& table,
                                             const std::string& device);

// The entries of `device` in blob order: by (cpu class index, opcode, size
// class), a key's leaves in table order, the fallback last. InvalidArgument
// for an entry with an unknown CPU class or a key out of range.
absl::StatusOr<std::vector<const PolicyEntry*>> EntriesInBlobOrder(const PolicyTable& table,
                                                                   const std::string& device);

struct DecodedBlob {
  spintune_table table;  // points into `storage`: entries, nodes, key index
  std::vector<uint64_t> storage;

  DecodedBlob() = default;
  DecodedBlob(const DecodedBlob&) = delete;
  DecodedBlob& operator=(const DecodedBlob&) = delete;
};

// Parses with the driver's own parser (spintune_table_parse(), formats 1
// to 3; a trial's incumbent wait is the trial entry after the entries). InvalidArgument carrying the errno name and the parser's reason
// when the blob is rejected.
absl::StatusOr<std::unique_ptr<DecodedBlob>> DecodePolicyBlob(const std::string& blob);

}  // namespace spintune

#endif  // SPINTUNE_POLICY_POLICY_BLOB_H_
