#pragma once
// The apply hook of a serving node's agent (docs/ROLLOUTS.md, "The agent"): an operator's shell
// command that makes the serving engine pick up a newly written (or removed) budget map. It runs
// as `/bin/sh -c COMMAND` in a process group of its own, with stdin and stdout on /dev/null and the
// agent's environment plus the variables given; its stderr is read through a pipe of which only
// the last non-empty line is kept (at most kMaxHookLineBytes of it), for the failure message. A
// hook still running after the timeout, or when the caller cancels, is killed with SIGKILL to its
// whole process group.
//
// Thread-safe: hooks of different callers may run at once (each waits for its own child only).

#include <atomic>
#include <chrono>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace ripplekv::agent {

// Longest part of the hook's last stderr line that is kept, bytes (the rest is cut).
inline constexpr size_t kMaxHookLineBytes = 512;

struct ApplyHookOptions {
  std::string command;  // run by /bin/sh -c; must not be empty
  // Variables added to the agent's environment (replacing ones of the same name), in order.
  std::vector<std::pair<std::string, std::string>> env;
  std::chrono::milliseconds timeout{60000};  // then the group is killed; > 0
  // Polled about every 100 ms while the hook runs; true kills the hook. May be null.
  const std::atomic<bool>* cancel = nullptr;
};

// How a hook ended. Exactly one of: exited (exit_code >= 0), killed by a signal, timed out,
// cancelled.
struct ApplyHookResult {
  // The exit status; -1 when the hook was killed (by a signal, the timeout or the cancel).
  int exit_code = 0;
  int signal = 0;                // the signal that killed it, 0 when it exited
  bool timed_out = false;        // killed after ApplyHookOptions::timeout
  bool cancelled = false;        // killed because `cancel` became true
  std::string last_stderr_line;  // trimmed; control characters replaced by '?'; may be empty

  bool ok() const { return exit_code == 0 && !timed_out && !cancelled && signal == 0; }
};

// The one-line failure text of `result` ("" when ok):
//   "apply hook exited CODE: LAST_STDERR_LINE"   ("apply hook exited CODE" without a line)
//   "apply hook killed by signal N: LAST_STDERR_LINE"
//   "apply hook timed out after N s"             (N: `timeout` in seconds)
//   "apply hook cancelled"
[[nodiscard]] std::string DescribeApplyHookFailure(const ApplyHookResult& result,
                                                   std::chrono::milliseconds timeout);

// `text` as one line fit for a report (proto3 strings must be valid UTF-8): line breaks become
// spaces, tabs a space, other control characters and invalid UTF-8 bytes '?', surrounding spaces
// trimmed, cut to at most `max_bytes` bytes on a character boundary.
[[nodiscard]] std::string OneCleanLine(std::string_view text, size_t max_bytes);

// Runs the hook and waits for it (at most the timeout, plus the moment the kill takes). A hook
// that ran is a result, whatever its outcome; errors are for a hook that could not be started:
// InvalidArgument (empty command, timeout <= 0), Internal (pipe or posix_spawn failed, with
// strerror).
[[nodiscard]] StatusOr<ApplyHookResult> RunApplyHook(const ApplyHookOptions& options);

}  // namespace ripplekv::agent
