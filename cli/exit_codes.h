#pragma once
// Exit codes of the `ripplekv` command (documented in README.md):
//   0  success
//   1  the work failed (internal error, resources) or data is lost (truncated/corrupt file)
//   2  bad usage or bad input (unknown flag, invalid argument, file not found, unsupported model)
//   3  unavailable (a remote service could not be reached; retry later)
//   4  a watched rollout paused (`ripplekv rollout status --watch`; the reason is on stderr)

#include "base/status.h"

namespace ripplekv::cli {

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitBadInput = 2;
constexpr int kExitUnavailable = 3;
constexpr int kExitRolloutPaused = 4;

int ExitCodeFor(const Status& status);

// Prints "ripplekv: error: <message>" on stderr (one line) and returns ExitCodeFor(status).
int ReportError(const Status& status);

}  // namespace ripplekv::cli
