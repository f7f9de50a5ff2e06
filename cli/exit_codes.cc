#include "cli/exit_codes.h"

#include <cstdio>
#include <string>

namespace ripplekv::cli {

int ExitCodeFor(const Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return kExitOk;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kUnimplemented:
    case absl::StatusCode::kAlreadyExists:
      return kExitBadInput;
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
      return kExitUnavailable;
    default:
      return kExitFailure;
  }
}

int ReportError(const Status& status) {
  std::string message(status.message());
  for (char& c : message) {
    if (c == '\n') c = ' ';
  }
  std::fprintf(stderr, "ripplekv: error: %s\n", message.c_str());
  return ExitCodeFor(status);
}

}  // namespace ripplekv::cli
