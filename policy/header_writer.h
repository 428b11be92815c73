// Generates the static C header of a policy table for release builds.
//
// The output is deterministic (byte-identical for the same table and
// options), compiles as C (gnu11, also -ffreestanding) and C++ with
// -Wall -Wextra -Werror, and contains one `static const struct
// spintune_table` per device. Board and device names are untrusted: in
// identifiers they are reduced to [a-z0-9_], in comments and strings to
// printable ASCII without quotes, backslashes or comment delimiters.
//
// Pure function; thread-safe.
#ifndef SPINTUNE_POLICY_HEADER_WRITER_H_
#define SPINTUNE_POLICY_HEADER_WRITER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "policy/policy_table.h"

namespace spintune {

// One #define after the tables (knob settings found by experiment), with
// the evidence in a comment before it.
struct HeaderDefine {
  std::string name;     // reduced to an upper-case C identifier
  std::string value;    // a C expression the caller vouches for
  std::vector<std::string> comment;  // lines, each sanitized (none: no comment)
};

struct HeaderOptions {
  // Version string of the tool, for the provenance comment.
  std::string tool_version;
  // Include path of the driver header.
  std::string policy_include = "spintune/policy.h";
  std::vector<HeaderDefine> defines;
};

// Lowercase C identifier made of [a-z0-9_] from arbitrary text ("x" if empty).
std::string SanitizeIdentifier(const std::string& text);
// Printable ASCII without '"', '\\', "*/" or "/*", for comments and strings.
std::string SanitizeText(const std::string& text);

// InvalidArgument when a device's table cannot be encoded (see
// EncodePolicyBlob(); the header obeys the same bounds).
absl::StatusOr<std::string> GenerateCHeader(const PolicyTable& table,
                                            const HeaderOptions& options);

}  // namespace spintune

#endif  // SPINTUNE_POLICY_HEADER_WRITER_H_
