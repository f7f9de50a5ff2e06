// kill -9 at random points while a child process writes CompleteTask batches: after reopening,
// every batch is applied entirely or not at all (a task is done exactly when all its trials are
// stored), nothing the store acknowledged is lost, and no lease survives.

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "store/store.h"
#include "tests/store/store_test_util.h"

extern char** environ;

namespace ripplekv::store {
namespace {

using ::ripplekv::store::testing::MakeSpec;
using ::ripplekv::store::testing::TempDir;

constexpr uint32_t kSamples = 40;
constexpr uint32_t kLayers = 30;
constexpr uint32_t kTrials = 4;

double ExpectedKl(uint32_t sample, uint32_t layer, uint32_t trial) {
  return 1.0 / (1.0 + sample) + layer * 1e-3 + trial * 1e-9;
}

// A running child writer with its stdout on a pipe.
class Writer {
 public:
  Writer(const std::string& db, bool sync, uint32_t seed) {
    int fds[2];
    if (pipe(fds) != 0) {
      ADD_FAILURE() << "pipe failed";
      return;
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, fds[0]);
    const std::string seed_text = std::to_string(seed);
    const std::string sync_text = sync ? "1" : "0";
    const char* argv[] = {RIPPLEKV_STORE_CRASH_WRITER, db.c_str(), sync_text.c_str(),
                          seed_text.c_str(), nullptr};
    const int rc = posix_spawn(&pid_, RIPPLEKV_STORE_CRASH_WRITER, &actions, nullptr,
                               const_cast<char* const*>(argv), environ);
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
    if (rc != 0) {
      ADD_FAILURE() << "posix_spawn " << RIPPLEKV_STORE_CRASH_WRITER << " failed: " << rc;
      close(fds[0]);
      pid_ = -1;
      return;
    }
    out_ = fdopen(fds[0], "r");
  }
  ~Writer() {
    if (pid_ > 0) Kill();
    if (out_ != nullptr) fclose(out_);
  }

  // The next line the child printed, without the newline; empty at end of output.
  std::string ReadLine() {
    if (out_ == nullptr) return {};
    char* line = nullptr;
    size_t cap = 0;
    const ssize_t n = getline(&line, &cap, out_);
    std::string text = n > 0 ? std::string(line, static_cast<size_t>(n)) : std::string();
    free(line);
    if (!text.empty() && text.back() == '\n') text.pop_back();
    return text;
  }

  // SIGKILL and reap; returns the wait status.
  int Kill() {
    kill(pid_, SIGKILL);
    return Wait();
  }
  int Wait() {
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }
  bool started() const { return pid_ > 0 && out_ != nullptr; }

 private:
  pid_t pid_ = -1;
  FILE* out_ = nullptr;
};

struct Snapshot {
  uint64_t done = 0;
  uint64_t results = 0;
  uint64_t partial = 0;  // tasks not done with some results (killed between the two writes)
};

// Reopens the store and checks every invariant; `acked` are tasks the writer saw completed.
Snapshot Verify(const std::string& db, const std::set<std::pair<uint32_t, uint32_t>>& acked) {
  Snapshot snap;
  StatusOr<std::unique_ptr<Store>> store = OpenStore(db, {.create_if_missing = false});
  EXPECT_TRUE(store.ok()) << store.status();
  if (!store.ok()) return snap;
  EXPECT_LE((*store)->RecoveredLeases(), 1u);  // the writer holds one lease at a time
  StatusOr<std::vector<Task>> tasks = (*store)->ListTasks(1);
  StatusOr<std::vector<TrialResult>> results = (*store)->ListResults(1);
  StatusOr<Job> job = (*store)->GetJob(1);
  EXPECT_TRUE(tasks.ok() && results.ok() && job.ok());
  if (!tasks.ok() || !results.ok() || !job.ok()) return snap;

  std::map<std::pair<uint32_t, uint32_t>, uint32_t> per_task;
  for (const TrialResult& r : *results) {
    ++per_task[{r.sample, r.layer}];
    EXPECT_EQ(r.kl, ExpectedKl(r.sample, r.layer, r.trial));
  }
  for (const Task& t : *tasks) {
    const uint32_t n = per_task[{t.key.sample, t.key.layer}];
    EXPECT_NE(t.state, TaskState::kLeased);
    if (t.state == TaskState::kDone) {
      ++snap.done;
      EXPECT_EQ(n, kTrials) << "done task " << t.key.sample << "/" << t.key.layer;
    } else {
      EXPECT_LE(n, kTrials / 2) << "pending task " << t.key.sample << "/" << t.key.layer;
      if (n > 0) ++snap.partial;
    }
  }
  for (const auto& [sample, layer] : acked) {
    EXPECT_EQ((*store)->GetTask({.job = 1, .sample = sample, .layer = layer})->state,
              TaskState::kDone)
        << "acknowledged task " << sample << "/" << layer << " lost";
  }
  snap.results = results->size();
  EXPECT_EQ(job->tasks_done, snap.done);
  EXPECT_EQ(job->results_stored, snap.results);
  EXPECT_EQ(job->state, JobState::kRunning);
  return snap;
}

TEST(StoreCrashTest, KillNineAtRandomPointsLosesNothingAndAppliesBatchesWhole) {
  TempDir dir;
  {
    std::vector<PlannedTask> planned;
    for (uint32_t s = 0; s < kSamples; ++s) {
      for (uint32_t l = 0; l < kLayers; ++l) planned.push_back({.sample = s, .layer = l});
    }
    StatusOr<std::unique_ptr<Store>> store = OpenStore(dir.db(), {.sync_writes = false});
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_TRUE((*store)->CreateJob(MakeSpec("ab", kTrials), planned).ok());
  }

  std::mt19937 rng(20240611);
  std::set<std::pair<uint32_t, uint32_t>> acked;
  uint64_t partial_seen = 0;
  constexpr int kKills = 10;
  for (int round = 0; round < kKills; ++round) {
    const bool sync = round % 2 == 1;
    Writer writer(dir.db(), sync, rng());
    ASSERT_TRUE(writer.started());
    const std::string ready = writer.ReadLine();
    ASSERT_EQ(ready.rfind("ready ", 0), 0u) << "child said '" << ready << "'";
    // Let it acknowledge 1..40 tasks, then kill it at a random moment inside the next ones.
    const int wait_for = std::uniform_int_distribution<int>(1, 40)(rng);
    for (int i = 0; i < wait_for; ++i) {
      const std::string line = writer.ReadLine();
      ASSERT_EQ(line.rfind("done ", 0), 0u) << "child said '" << line << "'";
      unsigned sample = 0, layer = 0;
      ASSERT_EQ(std::sscanf(line.c_str(), "done %u %u", &sample, &layer), 2);
      acked.emplace(sample, layer);
    }
    std::this_thread::sleep_for(
        std::chrono::microseconds(std::uniform_int_distribution<int>(0, 3000)(rng)));
    const int status = writer.Kill();
    ASSERT_TRUE(WIFSIGNALED(status))
        << "the writer ended before the kill (status " << status << ")";
    const Snapshot snap = Verify(dir.db(), acked);
    partial_seen += snap.partial;
    RecordProperty("round" + std::to_string(round), std::to_string(snap.done) + " done, " +
                                                        std::to_string(snap.partial) + " partial");
    ASSERT_FALSE(HasFailure()) << "after kill " << round;
  }
  std::printf("store_crash_test: %zu tasks acknowledged over %d kills; %llu partial tasks seen\n",
              acked.size(), kKills, static_cast<unsigned long long>(partial_seen));

  // A last writer runs to the end: every task done exactly once, nothing counted twice.
  Writer last(dir.db(), false, rng());
  ASSERT_TRUE(last.started());
  std::string line;
  while (!(line = last.ReadLine()).empty() && line != "finished") {
  }
  EXPECT_EQ(line, "finished");
  const int status = last.Wait();
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  const Snapshot final_snap = Verify(dir.db(), acked);
  EXPECT_EQ(final_snap.done, kSamples * kLayers);
  EXPECT_EQ(final_snap.results, kSamples * kLayers * kTrials);
}

}  // namespace
}  // namespace ripplekv::store
