// Printable: text from a client made safe for one log line or a database
// column: control characters (newline, escape...) are escaped as \n, \t or
// \xNN so that nothing can forge a log line or a terminal sequence, and the
// result is cut to `max_bytes` with a note of how much was cut. Thread-safe.
#ifndef SPINTUNE_COMMON_PRINTABLE_H_
#define SPINTUNE_COMMON_PRINTABLE_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace spintune {

std::string Printable(absl::string_view text, size_t max_bytes = 512);

}  // namespace spintune

#endif  // SPINTUNE_COMMON_PRINTABLE_H_
