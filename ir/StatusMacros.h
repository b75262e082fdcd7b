// Propagation macros for absl::Status / absl::StatusOr (abseil does not ship public ones).
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define MEMRA_CONCAT_INNER_(a, b) a##b
#define MEMRA_CONCAT_(a, b) MEMRA_CONCAT_INNER_(a, b)

// Returns from the enclosing function if `expr` (an absl::Status) is not OK.
#define MEMRA_RETURN_IF_ERROR(expr)                \
  do {                                             \
    ::absl::Status memra_status_ = (expr);         \
    if (!memra_status_.ok()) return memra_status_; \
  } while (0)

// `lhs = value of expr` (an absl::StatusOr<T>), or returns its error from the enclosing function.
#define MEMRA_ASSIGN_OR_RETURN(lhs, expr) \
  MEMRA_ASSIGN_OR_RETURN_IMPL_(MEMRA_CONCAT_(memra_statusor_, __LINE__), lhs, expr)
#define MEMRA_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()
