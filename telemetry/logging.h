#pragma once
// How the daemons log (`--log-format text|json`, docs/OPERATIONS.md, "Logs"): to stderr, as
// spdlog's text lines or as one JSON object per line:
//
//   {"ts":"2026-12-02T23:10:00.123Z","severity":"info","service":"scheduler","msg":"...",
//    "job":"7","task":"7/0/3"}
//
// `ts` is UTC with milliseconds (RFC 3339), `severity` one of trace, debug, info, warning, error,
// critical. The ids (job, task, rollout, worker) are those of the ScopedLogIds active on the
// logging thread, each present only when set. Messages that are not valid UTF-8 have the bad
// bytes replaced, so every line parses.

#include <string>
#include <string_view>

#include "base/status.h"

namespace ripplekv::telemetry {

// Makes the default logger write `format` ("text" or "json") lines for `service` to stderr.
// InvalidArgument names any other format.
[[nodiscard]] Status ConfigureLogging(std::string_view service, std::string_view format);

// The ids a log line carries; empty ones are left out.
struct LogIds {
  std::string job;
  std::string task;
  std::string rollout;
  std::string worker;
};

// Sets the non-empty fields of `ids` for the lines this thread logs until destroyed, restoring
// the ones before (scopes nest).
class ScopedLogIds {
 public:
  explicit ScopedLogIds(const LogIds& ids);
  ~ScopedLogIds();
  ScopedLogIds(const ScopedLogIds&) = delete;
  ScopedLogIds& operator=(const ScopedLogIds&) = delete;

 private:
  LogIds saved_;
};

// The ids active on this thread.
const LogIds& CurrentLogIds();

}  // namespace ripplekv::telemetry
