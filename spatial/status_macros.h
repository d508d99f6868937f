// Small status macros: this Abseil (20220623) has neither RETURN_IF_ERROR nor ASSIGN_OR_RETURN.
#ifndef SPATIAL_STATUS_MACROS_H_
#define SPATIAL_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define SPATIAL_CONCAT_INNER_(a, b) a##b
#define SPATIAL_CONCAT_(a, b) SPATIAL_CONCAT_INNER_(a, b)

// Returns the status of `expr` from the enclosing function when it is not OK.
#define RETURN_IF_ERROR(expr)                       \
  do {                                              \
    ::absl::Status spatial_status_ = (expr);        \
    if (!spatial_status_.ok()) return spatial_status_; \
  } while (0)

// `ASSIGN_OR_RETURN(auto x, MakeX());` binds the value or returns the error.
#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL_(SPATIAL_CONCAT_(spatial_statusor_, __LINE__), lhs, expr)
#define ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                           \
  if (!tmp.ok()) return tmp.status();          \
  lhs = std::move(tmp).value()

#endif  // SPATIAL_STATUS_MACROS_H_
