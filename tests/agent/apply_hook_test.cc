// agent/apply_hook.h: the hook's exit code, its last stderr line, its environment, the timeout
// that kills its whole process group, and cancellation.

#include "agent/apply_hook.h"

#include <signal.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ripplekv::agent {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

ApplyHookResult RunHook(const std::string& command, std::chrono::milliseconds timeout = 10s,
                        std::vector<std::pair<std::string, std::string>> env = {}) {
  StatusOr<ApplyHookResult> r =
      RunApplyHook({.command = command, .env = std::move(env), .timeout = timeout});
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : ApplyHookResult{.exit_code = -99};
}

TEST(ApplyHookTest, ExitZeroIsOk) {
  const ApplyHookResult r = RunHook("echo to stdout; echo warning >&2; exit 0");
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.last_stderr_line, "warning");
  EXPECT_EQ(DescribeApplyHookFailure(r, 10s), "");
}

TEST(ApplyHookTest, NonZeroExitKeepsLastNonEmptyStderrLine) {
  const ApplyHookResult r =
      RunHook("echo first >&2; printf 'bad config\\r\\n\\n   \\n' >&2; echo ignored; exit 3");
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.signal, 0);
  EXPECT_EQ(r.last_stderr_line, "bad config");
  EXPECT_EQ(DescribeApplyHookFailure(r, 10s), "apply hook exited 3: bad config");
}

TEST(ApplyHookTest, LastLineWithoutNewlineCountsAndNoLineGivesBareMessage) {
  EXPECT_EQ(RunHook("echo a >&2; printf 'tail' >&2; exit 1").last_stderr_line, "tail");
  const ApplyHookResult silent = RunHook("exit 4");
  EXPECT_EQ(silent.last_stderr_line, "");
  EXPECT_EQ(DescribeApplyHookFailure(silent, 10s), "apply hook exited 4");
}

TEST(ApplyHookTest, LongStderrKeepsBoundedLine) {
  // 1 MiB on one line, then a short one: memory stays bounded, the last line wins.
  const ApplyHookResult r =
      RunHook("head -c 1048576 /dev/zero | tr '\\0' x >&2; echo >&2; echo done >&2; exit 5");
  EXPECT_EQ(r.last_stderr_line, "done");
  const ApplyHookResult long_last = RunHook("head -c 100000 /dev/zero | tr '\\0' y >&2; exit 5");
  EXPECT_EQ(long_last.last_stderr_line, std::string(kMaxHookLineBytes, 'y'));
}

TEST(ApplyHookTest, TimeoutKillsTheWholeGroupWithinTheTimeout) {
  std::string dir = (std::filesystem::path(::testing::TempDir()) / "apply_hook_XXXXXX").string();
  ASSERT_NE(::mkdtemp(dir.data()), nullptr);
  const std::string pid_file = dir + "/sleep.pid";
  const auto start = std::chrono::steady_clock::now();
  // The shell waits for a child that holds stderr open: only killing the group ends both.
  const ApplyHookResult r =
      RunHook("echo starting >&2; sleep 60 & echo $! > '" + pid_file + "'; wait; exit 0", 300ms);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.exit_code, -1);
  EXPECT_FALSE(r.ok());
  EXPECT_GE(took, 300ms);
  EXPECT_LT(took, 3s);
  EXPECT_EQ(r.last_stderr_line, "starting");
  EXPECT_EQ(DescribeApplyHookFailure(r, 300ms), "apply hook timed out after 0.3 s");
  EXPECT_EQ(DescribeApplyHookFailure(r, 60s), "apply hook timed out after 60 s");
  // The background `sleep` died with the group (gone, or a zombie until its new parent reaps it).
  std::ifstream pid_in(pid_file);
  int pid = 0;
  ASSERT_TRUE(pid_in >> pid);
  bool dead = false;
  for (int i = 0; i < 200 && !dead; ++i) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string pid_field, comm, state;
    dead = !(stat >> pid_field >> comm >> state) || state == "Z";
    if (!dead) std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE(dead) << "sleep " << pid << " survived the timeout";
  std::filesystem::remove_all(dir);
}

TEST(ApplyHookTest, BackgroundChildDoesNotDelayAnExitedHook) {
  // The hook exits at once but leaves a child holding its stderr: the exit is what counts.
  const auto start = std::chrono::steady_clock::now();
  const ApplyHookResult r = RunHook("sleep 2 & echo bye >&2; exit 0", 10s);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.last_stderr_line, "bye");
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
}

TEST(ApplyHookTest, KilledBySignalIsReported) {
  const ApplyHookResult r = RunHook("echo dying >&2; kill -TERM $$");
  EXPECT_EQ(r.exit_code, -1);
  EXPECT_EQ(r.signal, SIGTERM);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(DescribeApplyHookFailure(r, 10s),
            "apply hook killed by signal " + std::to_string(SIGTERM) + ": dying");
}

TEST(ApplyHookTest, EnvironmentVariablesAreVisible) {
  const ApplyHookResult r = RunHook(
      "echo \"$RIPPLEKV_MAP_FILE|$RIPPLEKV_MAP_VERSION|$RIPPLEKV_NODE_ID|${PATH:+path}\" >&2; "
      "exit 7",
      10s,
      {{"RIPPLEKV_MAP_FILE", "/tmp/x y.json"},
       {"RIPPLEKV_MAP_VERSION", ""},
       {"RIPPLEKV_NODE_ID", "node-1"}});
  EXPECT_EQ(r.exit_code, 7);
  // The agent's own environment (PATH) is kept.
  EXPECT_EQ(r.last_stderr_line, "/tmp/x y.json||node-1|path");
}

TEST(ApplyHookTest, CancelKillsPromptly) {
  std::atomic<bool> cancel{false};
  std::thread canceller([&] {
    std::this_thread::sleep_for(200ms);
    cancel = true;
  });
  const auto start = std::chrono::steady_clock::now();
  StatusOr<ApplyHookResult> r =
      RunApplyHook({.command = "sleep 60", .timeout = 60s, .cancel = &cancel});
  canceller.join();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->cancelled);
  EXPECT_EQ(r->exit_code, -1);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
  EXPECT_EQ(DescribeApplyHookFailure(*r, 60s), "apply hook cancelled");
}

TEST(ApplyHookTest, RejectsEmptyCommandAndTimeout) {
  EXPECT_EQ(RunApplyHook({.command = ""}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RunApplyHook({.command = "true", .timeout = 0ms}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(OneCleanLineTest, MakesOneValidUtf8Line) {
  EXPECT_EQ(OneCleanLine("  a\nb\tc\x01 ", 100), "a b c?");
  EXPECT_EQ(OneCleanLine("caf\xc3\xa9 \xff\xc3", 100), "caf\xc3\xa9 ??");
  EXPECT_EQ(OneCleanLine("\xed\xa0\x80", 100), "???");  // a surrogate is not UTF-8
  // Cut on a character boundary: the two-byte character does not fit in 4 bytes after "abc".
  EXPECT_EQ(OneCleanLine("abc\xc3\xa9", 4), "abc");
}

}  // namespace
}  // namespace ripplekv::agent
