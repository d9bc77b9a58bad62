// Status helpers shared by every SketchFuse library.
//
// Abseil 20220623 ships no status macros; these are the project's only ones.
//   RETURN_IF_ERROR(expr)          returns the status of `expr` if it is not OK.
//   ASSIGN_OR_RETURN(lhs, expr)    evaluates an absl::StatusOr expression and
//                                  assigns its value to `lhs`, or returns its
//                                  status. `lhs` may be a declaration.
#ifndef SKETCHFUSE_COMMON_STATUS_MACROS_H_
#define SKETCHFUSE_COMMON_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define SF_STATUS_CONCAT_INNER_(a, b) a##b
#define SF_STATUS_CONCAT_(a, b) SF_STATUS_CONCAT_INNER_(a, b)

#define RETURN_IF_ERROR(expr)                          \
  do {                                                 \
    ::absl::Status sf_status_ = (expr);                \
    if (!sf_status_.ok()) return sf_status_;           \
  } while (false)

#define ASSIGN_OR_RETURN(lhs, expr) \
  SF_ASSIGN_OR_RETURN_IMPL_(SF_STATUS_CONCAT_(sf_statusor_, __LINE__), lhs, expr)

#define SF_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                              \
  if (!statusor.ok()) return statusor.status();        \
  lhs = std::move(statusor).value()

#endif  // SKETCHFUSE_COMMON_STATUS_MACROS_H_
