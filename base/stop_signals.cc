#include "base/stop_signals.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <utility>

#include "base/strings.h"

namespace ripplekv {
namespace {

int g_pipe[2] = {-1, -1};
std::atomic<bool> g_started = false;
constexpr char kSignalByte = 'S';
constexpr char kQuitByte = 'Q';

void OnSignal(int) {
  const int saved = errno;
  const char byte = kSignalByte;
  [[maybe_unused]] const ssize_t n = write(g_pipe[1], &byte, 1);
  errno = saved;
}

void SetHandler(void (*handler)(int)) {
  struct sigaction action = {};
  action.sa_handler = handler;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
}

}  // namespace

StopSignals::StopSignals(std::function<void()> on_signal) : on_signal_(std::move(on_signal)) {}

StatusOr<std::unique_ptr<StopSignals>> StopSignals::Start(std::function<void()> on_signal) {
  if (g_started.exchange(true)) {
    return absl::FailedPreconditionError("StopSignals: one per process at a time");
  }
  if (pipe2(g_pipe, O_CLOEXEC) != 0) {
    g_started = false;
    return absl::InternalError(Cat("StopSignals: pipe: ", std::strerror(errno)));
  }
  std::unique_ptr<StopSignals> signals(new StopSignals(std::move(on_signal)));
  SetHandler(OnSignal);
  signals->thread_ = std::thread(&StopSignals::Loop, signals.get());
  return signals;
}

StopSignals::~StopSignals() {
  SetHandler(SIG_DFL);
  const char quit = kQuitByte;
  while (write(g_pipe[1], &quit, 1) < 0 && errno == EINTR) {
  }
  thread_.join();
  close(g_pipe[0]);
  close(g_pipe[1]);
  g_pipe[0] = g_pipe[1] = -1;
  g_started = false;
}

void StopSignals::Loop() {
  char byte = 0;
  while (read(g_pipe[0], &byte, 1) == 1 || errno == EINTR) {
    if (byte == kQuitByte) return;
    if (byte == kSignalByte) on_signal_();
    byte = 0;
  }
}

}  // namespace ripplekv
