// The status macros of the house style: RETURN_IF_ERROR and ASSIGN_OR_RETURN.
// (CUDA_RETURN_IF_ERROR lives in engine/kernels/cuda_check.h, beside CUDA.)
// Tested through every caller; no test of its own.
#ifndef ONECARD_ENGINE_COMMON_STATUS_MACROS_H_
#define ONECARD_ENGINE_COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define ONECARD_CONCAT_INNER_(a, b) a##b
#define ONECARD_CONCAT_(a, b) ONECARD_CONCAT_INNER_(a, b)

// Returns the status of `expr` from the enclosing function if it is not OK.
#define RETURN_IF_ERROR(expr)                          \
  do {                                                 \
    ::absl::Status onecard_status_ = (expr);           \
    if (!onecard_status_.ok()) return onecard_status_; \
  } while (0)

// ASSIGN_OR_RETURN(lhs, expr): evaluates the StatusOr `expr`; returns its
// status if not OK, otherwise moves the value into `lhs` (which may declare a
// variable: ASSIGN_OR_RETURN(auto x, F());).
#define ASSIGN_OR_RETURN(lhs, expr) \
  ONECARD_ASSIGN_OR_RETURN_IMPL_(ONECARD_CONCAT_(onecard_statusor_, __LINE__), lhs, expr)
#define ONECARD_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                                   \
  if (!statusor.ok()) return std::move(statusor).status();  \
  lhs = std::move(statusor).value()

#endif  // ONECARD_ENGINE_COMMON_STATUS_MACROS_H_
