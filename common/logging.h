// Process-wide logging on stderr through spdlog.
//
// Log lines are "<time> <level> <component>: message key=value ..." or JSON
// objects (InitLogging). Call
// InitLogging() once from main(); afterwards Logger() is thread-safe.
#ifndef SPINTUNE_COMMON_LOGGING_H_
#define SPINTUNE_COMMON_LOGGING_H_

#include <memory>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "spdlog/logger.h"

// Debian's abseil has its own string_view type; let log lines format it.
template <>
struct fmt::formatter<absl::string_view> : fmt::formatter<fmt::string_view> {
  template <typename Context>
  auto format(absl::string_view s, Context& ctx) const {
    return fmt::formatter<fmt::string_view>::format(fmt::string_view(s.data(), s.size()), ctx);
  }
};

namespace spintune {

// `level` is one of trace, debug, info, warn, error, off. `format` "text"
// gives "<local time> <level> <component>: message key=value ..."; "json"
// one object per line: {"time" (UTC), "level", "component", "msg"}.
absl::Status InitLogging(absl::string_view component, absl::string_view level,
                         absl::string_view format = "text");
// The process logger (a stderr logger at "info" before InitLogging()).
spdlog::logger& Logger();

}  // namespace spintune

#endif  // SPINTUNE_COMMON_LOGGING_H_
