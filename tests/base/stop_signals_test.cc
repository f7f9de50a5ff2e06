// base/stop_signals.h: SIGTERM and SIGINT reach the callback on a normal thread; one
// watcher per process; the default handlers come back when it ends.

#include "base/stop_signals.h"

#include <signal.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "gtest/gtest.h"

namespace ripplekv {
namespace {

bool WaitFor(const std::atomic<int>& count, int value) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (count.load() < value) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

TEST(StopSignalsTest, EachSignalRunsTheCallbackOnItsThread) {
  std::atomic<int> calls = 0;
  std::thread::id callback_thread;
  StatusOr<std::unique_ptr<StopSignals>> signals = StopSignals::Start([&] {
    callback_thread = std::this_thread::get_id();
    ++calls;
  });
  ASSERT_TRUE(signals.ok()) << signals.status();
  ASSERT_EQ(raise(SIGTERM), 0);
  ASSERT_TRUE(WaitFor(calls, 1));
  ASSERT_EQ(raise(SIGINT), 0);
  ASSERT_TRUE(WaitFor(calls, 2));
  EXPECT_NE(callback_thread, std::this_thread::get_id());

  // One per process at a time; another may start once the first is gone.
  EXPECT_EQ(StopSignals::Start([] {}).status().code(), absl::StatusCode::kFailedPrecondition);
  signals->reset();
  StatusOr<std::unique_ptr<StopSignals>> again = StopSignals::Start([&] { ++calls; });
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_EQ(raise(SIGTERM), 0);
  EXPECT_TRUE(WaitFor(calls, 3));
}

TEST(StopSignalsTest, TheDefaultHandlersComeBackWhenItEnds) {
  {
    StatusOr<std::unique_ptr<StopSignals>> signals = StopSignals::Start([] {});
    ASSERT_TRUE(signals.ok());
  }
  struct sigaction current = {};
  ASSERT_EQ(sigaction(SIGTERM, nullptr, &current), 0);
  EXPECT_EQ(current.sa_handler, SIG_DFL);
}

}  // namespace
}  // namespace ripplekv
