#pragma once
// SIGTERM and SIGINT as an event that a normal thread handles: how the daemons (ripplekv-scheduler,
// ripplekv-worker, ripplekv-agent) stop cleanly. The handler only writes a byte to a pipe (it is
// async-signal-safe); a thread of this class reads it and runs the callback. A handler rather than
// a blocked signal mask, because threads started before main (by libraries) would not have the
// mask, and a signal delivered to one of them would kill the process.
//
// One StopSignals per process at a time (the pipe the handler writes is process-wide by nature).

#include <functional>
#include <memory>
#include <thread>

#include "base/status.h"

namespace ripplekv {

class StopSignals {
 public:
  // Installs the handlers and starts the thread; `on_signal` runs on it once per SIGTERM or SIGINT
  // received. Errors: Internal (no pipe), FailedPrecondition (another StopSignals exists).
  [[nodiscard]] static StatusOr<std::unique_ptr<StopSignals>> Start(
      std::function<void()> on_signal);

  // Restores the default handlers and joins the thread (a signal arriving later is not handled).
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

 private:
  explicit StopSignals(std::function<void()> on_signal);
  void Loop();

  std::function<void()> on_signal_;
  std::thread thread_;
};

}  // namespace ripplekv
