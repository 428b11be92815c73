// Fingerprint64: a stable 64-bit fingerprint of a byte string, the same in
// every process and build (unlike absl::Hash), for telling a resent batch
// from a different one with the same sequence number. Not cryptographic.
#ifndef SPINTUNE_COMMON_FINGERPRINT_H_
#define SPINTUNE_COMMON_FINGERPRINT_H_

#include <cstdint>

#include "absl/strings/string_view.h"

namespace spintune {

uint64_t Fingerprint64(absl::string_view bytes);

}  // namespace spintune

#endif  // SPINTUNE_COMMON_FINGERPRINT_H_
