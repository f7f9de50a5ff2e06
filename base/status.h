#pragma once
// Errors are values: absl::Status / absl::StatusOr<T>. Codes mean something to the caller
// (see STYLE.md): kInvalidArgument / kFailedPrecondition never retry, kUnavailable retry
// elsewhere, kResourceExhausted retry smaller, kDataLoss stop and shout.

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ripplekv {

using Status = absl::Status;
template <typename T>
using StatusOr = absl::StatusOr<T>;

}  // namespace ripplekv

#define RIPPLEKV_CONCAT_INNER_(a, b) a##b
#define RIPPLEKV_CONCAT_(a, b) RIPPLEKV_CONCAT_INNER_(a, b)

// Returns from the enclosing function if `expr` (a Status) is not OK.
#define RETURN_IF_ERROR(expr)                        \
  do {                                               \
    ::absl::Status ripplekv_status_ = (expr);        \
    if (!ripplekv_status_.ok()) return ripplekv_status_; \
  } while (0)

// `ASSIGN_OR_RETURN(auto x, MakeX());` — binds the value or returns the error.
#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL_(RIPPLEKV_CONCAT_(ripplekv_statusor_, __LINE__), lhs, expr)
#define ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                           \
  if (!tmp.ok()) return std::move(tmp).status(); \
  lhs = std::move(tmp).value()
