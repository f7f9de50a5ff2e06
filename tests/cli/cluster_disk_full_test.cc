// A full disk under a live scheduler (docs/OPERATIONS.md, "A full disk"), on a real small file
// system: a tmpfs mounted by the test for the database (skipped, saying why, where mounting is not
// allowed; CI runs as root). Mid-job the disk is filled to the last byte, then:
//   * a change fails with RESOURCE_EXHAUSTED whose message names no local path, and the
//     scheduler logs the failure once, with its cause;
//   * health turns NOT_SERVING, reads (`ripplekv jobs`) still answer, and the process lives on
//     past the time at which RocksDB used to abort on an assertion (10-13 s);
//   * once the filler is deleted the scheduler reopens its database by itself, health is SERVING
//     again, and the job completes with the profile of local `calibrate`, bit for bit;
//   * the job acknowledged before the fill, and every stored trial, is still there.
// Needs RIPPLEKV_SMOLLM2_GGUF; skipped without it.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/cli/cluster_expect.h"
#include "tests/cli/model_cluster_test.h"
#include "tests/cli/process_harness.h"

namespace ripplekv::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// 4 samples x 30 layers = 120 tasks of 2 trials: long enough to fill the disk mid-job.
const std::vector<std::string> kParams = {"--samples", "4",  "--context-len", "256",
                                          "--probe",   "16", "--trials",      "2",
                                          "--seed",    "17", "--alpha",       "0.5"};
constexpr int kSamples = 4, kLayers = 30, kTrials = 2;

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

class ClusterDiskFullTest : public ModelClusterTest {
 protected:
  void SetUp() override {
    ModelClusterTest::SetUp();
    if (IsSkipped()) return;
    disk_ = tmp_.path() / "disk";
    fs::create_directories(disk_);
    if (::mount("tmpfs", disk_.c_str(), "tmpfs", 0, "size=48m,mode=0700") != 0) {
      GTEST_SKIP() << "cannot mount a 48 MiB tmpfs for the database (" << std::strerror(errno)
                   << "); this test needs root (CAP_SYS_ADMIN)";
    }
    mounted_ = true;
  }
  void TearDown() override {
    ModelClusterTest::TearDown();  // the scheduler first: it holds files on the mount
    if (mounted_) ::umount2(disk_.c_str(), MNT_DETACH);
  }

  // Writes 1 MiB blocks to disk_/filler until the file system is full; its size in bytes.
  size_t Fill() {
    const int fd = ::open((disk_ / "filler").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    EXPECT_GE(fd, 0) << std::strerror(errno);
    if (fd < 0) return 0;
    const std::string block(1 << 20, 'f');
    size_t written = 0;
    for (;;) {
      const ssize_t n = ::write(fd, block.data(), block.size());
      if (n <= 0) break;
      written += static_cast<size_t>(n);
    }
    EXPECT_EQ(errno, ENOSPC);
    ::close(fd);
    return written;
  }

  CliResult Health() {
    return RunCli(tmp_.path(), "health",
                  {"health", "--scheduler", cluster_->address(), "--timeout-ms", "2000"},
                  seconds(10));
  }

  std::string SchedulerLog() const {
    return ReadFile(tmp_.path() / "scheduler-0.out") + ReadFile(tmp_.path() / "scheduler-0.err");
  }

  fs::path disk_;
  bool mounted_ = false;
};

TEST_F(ClusterDiskFullTest, ADiskThatFillsMidJobIsAStateNotACrash) {
  const fs::path db = disk_ / "db";
  // A small memory budget: one memtable is 1 MiB, so the reopen waits for 1 MiB of room.
  cluster_->StartScheduler(db, {"--memory-budget-mib", "64", "--verify-default", "0",
                                "--heartbeat-timeout-ms", "60000"});
  ASSERT_TRUE(cluster_->SchedulerAnswers(seconds(10))) << cluster_->Logs();
  for (const char* id : {"worker-a", "worker-b"}) cluster_->StartWorker(id, model_);
  for (const char* id : {"worker-a", "worker-b"}) {
    ASSERT_TRUE(cluster_->Registered(id, seconds(60))) << id << cluster_->Logs();
  }
  std::vector<std::string> args = {"submit", "--scheduler", cluster_->address(), "--model",
                                   model_};
  args.insert(args.end(), kParams.begin(), kParams.end());
  const CliResult submitted = RunCli(tmp_.path(), "submit", args, seconds(60));
  ASSERT_EQ(submitted.exit_code, 0) << submitted.err << cluster_->Logs();
  std::string job = submitted.out;
  while (!job.empty() && (job.back() == '\n' || job.back() == ' ')) job.pop_back();

  // Mid-job: some tasks done, most not.
  ASSERT_TRUE(WaitFor([&] { return JsonInt(Job(job), {"progress", "tasks_done"}) >= 10; },
                      seconds(240), milliseconds(200)))
      << cluster_->Logs();
  const size_t filler = Fill();
  std::cout << "filled the disk with " << (filler >> 20) << " MiB\n";

  // A change now: a job with 2 MiB of inline data cannot be written.
  const fs::path data = tmp_.path() / "data.txt";
  {
    std::string text;
    for (int i = 0; text.size() < (2u << 20); ++i) {
      text += "The quick brown fox " + std::to_string(i) + " jumps over the lazy dog.\n";
    }
    std::ofstream(data) << text;
  }
  std::vector<std::string> big = {"submit",          "--scheduler", cluster_->address(),
                                  "--model",         model_,        "--data",
                                  data.string(),     "--samples",   "2",
                                  "--context-len",   "256",         "--probe",
                                  "16",              "--layers",    "0"};
  const CliResult refused = RunCli(tmp_.path(), "submit-full", big, seconds(60));
  EXPECT_EQ(refused.exit_code, 1) << refused.out << refused.err;  // RESOURCE_EXHAUSTED
  EXPECT_NE(refused.err.find("ripplekv: error: the scheduler's disk is full"), std::string::npos)
      << refused.err;
  EXPECT_EQ(refused.err.find(disk_.string()), std::string::npos)
      << "a client's message names the scheduler's database path: " << refused.err;

  // The state, as probes and readers see it, for longer than RocksDB used to survive.
  ASSERT_TRUE(WaitFor([&] { return Health().out == "NOT_SERVING\n"; }, seconds(10),
                      milliseconds(200)))
      << Health().out << cluster_->Logs();
  const int64_t done_when_full = JsonInt(Job(job), {"progress", "tasks_done"});
  std::this_thread::sleep_for(seconds(15));
  ASSERT_FALSE(cluster_->scheduler().Wait(milliseconds(0)).has_value())
      << "the scheduler exited on a full disk\n"
      << cluster_->Logs();
  EXPECT_EQ(Health().out, "NOT_SERVING\n");
  const nlohmann::json while_full = Job(job);  // a read
  ASSERT_FALSE(while_full.is_null()) << cluster_->Logs();
  EXPECT_GE(JsonInt(while_full, {"progress", "tasks_done"}), done_when_full);
  EXPECT_LT(JsonInt(while_full, {"progress", "tasks_done"}), kSamples * kLayers);

  // Space returns: the scheduler recovers by itself and the job completes.
  const auto freed = std::chrono::steady_clock::now();
  fs::remove(disk_ / "filler");
  ASSERT_TRUE(WaitFor([&] { return Health().out == "SERVING\n"; }, seconds(60),
                      milliseconds(100)))
      << cluster_->Logs();
  std::cout << "SERVING again "
            << std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - freed)
                   .count()
            << " ms after the filler was deleted\n";
  ASSERT_EQ(Watch(job), 0);

  const nlohmann::json local = LocalCalibrateJson(tmp_.path(), model_, kParams);
  ASSERT_FALSE(local.is_null());
  const nlohmann::json remote = FetchProfileJson(tmp_.path(), cluster_->address(),
                                                 local["model"]["hash"].get<std::string>());
  ASSERT_FALSE(remote.is_null()) << cluster_->Logs();
  ExpectSameProfile(remote, local, kLayers);
  for (const auto& layer : remote["layers"]) EXPECT_EQ(layer["count"], kSamples * kTrials);

  const std::string log = SchedulerLog();
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("store:") != std::string::npos) std::cout << line << "\n";
  }
  EXPECT_EQ(Count(log, "store: a write failed"), 1u) << log;
  EXPECT_NE(log.find("No space left on device"), std::string::npos) << log;  // the cause
  EXPECT_EQ(Count(log, "store: writable again"), 1u) << log;
  EXPECT_EQ(log.find("Assertion"), std::string::npos) << log;
}

}  // namespace
}  // namespace ripplekv::testing
