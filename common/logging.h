// Process-wide logging on stderr through spdlog.
//
// Log lines are "<time> <level> <component>: message key=value ...". Call
// InitLogging() once from main(); afterwards Logger() is thread-safe.
#ifndef SPINTUNE_COMMON_LOGGING_H_
#define SPINTUNE_COMMON_LOGGING_H_

#include <memory>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "spdlog/logger.h"

namespace spintune {

// `level` is one of trace, debug, info, warn, error, off.
absl::Status InitLogging(absl::string_view component, absl::string_view level);
// The process logger (a stderr logger at "info" before InitLogging()).
spdlog::logger& Logger();

}  // namespace spintune

#endif  // SPINTUNE_COMMON_LOGGING_H_
