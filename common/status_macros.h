// Error propagation helpers for absl::Status / absl::StatusOr.
//
// The system abseil (20220623) has no status macros; these two are the only
// ones the project uses. Thread-safe: they are plain control flow.
#ifndef SPINTUNE_COMMON_STATUS_MACROS_H_
#define SPINTUNE_COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define SPINTUNE_STATUS_CONCAT_INNER_(a, b) a##b
#define SPINTUNE_STATUS_CONCAT_(a, b) SPINTUNE_STATUS_CONCAT_INNER_(a, b)

// Evaluates `expr` (an absl::Status) once; returns it from the enclosing
// function when it is not OK.
#define SPINTUNE_RETURN_IF_ERROR(expr)                 \
  do {                                                 \
    ::absl::Status spintune_status_ = (expr);          \
    if (!spintune_status_.ok()) return spintune_status_; \
  } while (0)

// Evaluates `rexpr` (an absl::StatusOr<T>) once; on error returns its status,
// otherwise moves the value into `lhs` (which may be a declaration).
#define SPINTUNE_ASSIGN_OR_RETURN(lhs, rexpr)                                  \
  SPINTUNE_ASSIGN_OR_RETURN_IMPL_(                                             \
      SPINTUNE_STATUS_CONCAT_(spintune_statusor_, __LINE__), lhs, rexpr)

#define SPINTUNE_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                                    \
  if (!statusor.ok()) return std::move(statusor).status();    \
  lhs = std::move(*statusor)

#endif  // SPINTUNE_COMMON_STATUS_MACROS_H_
