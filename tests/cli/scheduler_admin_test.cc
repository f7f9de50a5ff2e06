// The operator's commands against a real ripplekv-scheduler on loopback, no model needed:
//   * `ripplekv health` prints SERVING and exits 0 while the scheduler runs (for the server and
//     for each service), exits 2 for a service it does not know, and 3 against a closed port or
//     a scheduler that is gone;
//   * `ripplekv-scheduler --db PATH --checkpoint DIR` refuses while a scheduler holds the
//     database, saying so, and afterwards writes a checkpoint a scheduler serves the same jobs
//     from;
//   * `ripplekv admin checkpoint` writes only under the scheduler's --checkpoint-dir: without one
//     it is FAILED_PRECONDITION naming the flag; a path outside, a ".." or a symlink leading out
//     and a missing parent are refused (exit 2, the path named), writing nothing; a relative path
//     lands under the root; the checkpoint is 0700 with 0600 files, and so is the database (the
//     scheduler's umask);
//   * a token file others may read stops the scheduler (exit 1, the file, its mode and the fix
//     named) unless --allow-insecure-token-file; the CLI only warns about its own;
//   * a plaintext call to a TLS scheduler says that TLS is the likely cause and how to pass it,
//     in the CLI's error and in ripplekv-worker's log (the latter needs RIPPLEKV_SMOLLM2_GGUF).
// Every process is killed on every path.

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "store/store.h"
#include "tests/cli/process_harness.h"

namespace ripplekv::testing {
namespace {

using std::chrono::seconds;

// A model hash no worker holds: its job stays pending, which is all these tests need.
const std::string kHash(64, 'a');

class SchedulerAdminTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(tmp_.path().empty());
    cluster_ = std::make_unique<LocalCluster>(tmp_.path());
  }
  void TearDown() override {
    if (cluster_) cluster_->StopAll();
  }

  CliResult Health(const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {"health", "--scheduler", cluster_->address(), "--timeout-ms",
                                     "2000"};
    args.insert(args.end(), extra.begin(), extra.end());
    return RunCli(tmp_.path(), "health", args, seconds(10));
  }

  // `ripplekv-scheduler --db DB --checkpoint DIR`, to completion.
  CliResult OfflineCheckpoint(const fs::path& db, const fs::path& dir) {
    const fs::path out = tmp_.path() / "offline.out", err = tmp_.path() / "offline.err";
    CliResult r;
    {
      Process p({RIPPLEKV_SCHEDULER, "--db", db.string(), "--checkpoint", dir.string()}, out, err);
      r.exit_code = p.Wait(std::chrono::seconds(30)).value_or(-1);
    }
    r.out = ReadFile(out);
    r.err = ReadFile(err);
    return r;
  }

  // Writes a pending job of kHash (2 samples x 2 layers) into the database before any scheduler
  // opens it: a job without a model or workers.
  void SeedPendingJob() {
    StatusOr<std::unique_ptr<store::Store>> db = store::OpenStore(cluster_->db().string());
    ASSERT_TRUE(db.ok()) << db.status();
    store::JobSpec spec;
    spec.model_path = (tmp_.path() / "absent.gguf").string();
    spec.model_hash = kHash;
    spec.params.samples = 2;
    spec.params.trials = 2;
    const std::vector<store::PlannedTask> tasks = {{.sample = 0, .layer = 0},
                                                   {.sample = 0, .layer = 1},
                                                   {.sample = 1, .layer = 0},
                                                   {.sample = 1, .layer = 1}};
    ASSERT_TRUE((*db)->CreateJob(spec, tasks).ok());
  }

  // The ids of the jobs `ripplekv jobs --json` lists.
  std::vector<std::string> JobIds() {
    const CliResult r = RunCli(tmp_.path(), "jobs",
                               {"jobs", "--scheduler", cluster_->address(), "--json"}, seconds(10));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::vector<std::string> ids;
    const nlohmann::json all = nlohmann::json::parse(r.out, nullptr, false);
    if (all.is_discarded() || !all.contains("jobs")) return ids;
    for (const auto& job : all["jobs"]) ids.push_back(job.value("job_id", ""));
    return ids;
  }

  TempDir tmp_;
  std::unique_ptr<LocalCluster> cluster_;
};

TEST_F(SchedulerAdminTest, HealthIsServingWhileTheSchedulerRunsAndFailsWithoutIt) {
  const CliResult closed = Health();  // nothing listens on the port yet
  EXPECT_EQ(closed.exit_code, 3) << closed.out << closed.err;
  EXPECT_EQ(closed.out, "");
  EXPECT_NE(closed.err.find("UNAVAILABLE"), std::string::npos) << closed.err;

  cluster_->StartScheduler();
  ASSERT_TRUE(cluster_->SchedulerAnswers(seconds(10))) << cluster_->Logs();
  const CliResult serving = Health();
  EXPECT_EQ(serving.exit_code, 0) << serving.err;
  EXPECT_EQ(serving.out, "SERVING\n");
  for (const char* service : {"ripplekv.v1.CalibrationService", "ripplekv.v1.WorkerService",
                              "ripplekv.v1.RolloutService", "ripplekv.v1.AdminService"}) {
    const CliResult one = Health({"--service", service});
    EXPECT_EQ(one.exit_code, 0) << service << one.err;
    EXPECT_EQ(one.out, "SERVING\n") << service;
  }
  const CliResult unknown = Health({"--service", "no.such.Service"});
  EXPECT_EQ(unknown.exit_code, 2) << unknown.out << unknown.err;
  EXPECT_NE(unknown.err.find("NOT_FOUND"), std::string::npos) << unknown.err;

  cluster_->scheduler().Kill();
  const CliResult gone = Health();
  EXPECT_EQ(gone.exit_code, 3) << gone.out << gone.err;
}

TEST_F(SchedulerAdminTest, OfflineCheckpointRefusesAHeldDatabaseAndWorksOnceItIsFree) {
  SeedPendingJob();
  cluster_->StartScheduler();
  ASSERT_TRUE(cluster_->SchedulerAnswers(seconds(10))) << cluster_->Logs();
  const std::vector<std::string> jobs = JobIds();
  ASSERT_EQ(jobs.size(), 1u);

  const fs::path checkpoint = tmp_.path() / "offline-checkpoint";
  const CliResult held = OfflineCheckpoint(cluster_->db(), checkpoint);
  EXPECT_EQ(held.exit_code, 1) << held.out << held.err;
  EXPECT_NE(held.err.find("another process holds the database"), std::string::npos) << held.err;
  EXPECT_FALSE(fs::exists(checkpoint));

  cluster_->scheduler().Stop(seconds(10));
  const CliResult made = OfflineCheckpoint(cluster_->db(), checkpoint);
  ASSERT_EQ(made.exit_code, 0) << made.out << made.err;
  EXPECT_TRUE(made.out.starts_with("checkpoint " + checkpoint.string() + " ")) << made.out;
  EXPECT_TRUE(fs::exists(checkpoint / "CURRENT"));
  // Once more into the same directory: refused, the path named.
  const CliResult again = OfflineCheckpoint(cluster_->db(), checkpoint);
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_NE(again.err.find(checkpoint.string()), std::string::npos) << again.err;
  // No database at all: refused without creating one.
  const CliResult none = OfflineCheckpoint(tmp_.path() / "no-db", tmp_.path() / "other");
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_FALSE(fs::exists(tmp_.path() / "no-db"));

  // Restore: a scheduler on the checkpoint serves the job.
  cluster_->StartScheduler(checkpoint);
  ASSERT_TRUE(cluster_->SchedulerAnswers(seconds(10))) << cluster_->Logs();
  EXPECT_EQ(JobIds(), jobs);
}

mode_t ModeOf(const fs::path& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

// Every regular file under `dir` has mode 0600 and every directory 0700; returns the file count.
size_t ExpectPrivate(const fs::path& dir) {
  EXPECT_EQ(ModeOf(dir), 0700u) << dir;
  size_t files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    const mode_t mode = ModeOf(entry.path());
    if (entry.is_directory()) EXPECT_EQ(mode, 0700u) << entry.path();
    if (entry.is_regular_file()) {
      ++files;
      EXPECT_EQ(mode, 0600u) << entry.path();
    }
  }
  return files;
}

TEST_F(SchedulerAdminTest, OnlineCheckpointWithoutCheckpointDirIsRefusedNamingTheFlag) {
  cluster_->StartScheduler();
  ASSERT_TRUE(cluster_->SchedulerAnswers(seconds(10))) << cluster_->Logs();
  const fs::path target = tmp_.path() / "online-checkpoint";
  const CliResult refused = RunCli(
      tmp_.path(), "checkpoint",
      {"admin", "checkpoint", "--scheduler", cluster_->address(), target.string()}, seconds(30));
  EXPECT_EQ(refused.exit_code, 2) << refused.err;
  EXPECT_NE(refused.err.find("FAILED_PRECONDITION"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("--checkpoint-dir"), std::string::npos) << refused.err;
  EXPECT_FALSE(fs::exists(target));
}

TEST_F(SchedulerAdminTest, OnlineCheckpointGoesOnlyUnderCheckpointDirAndIsPrivate) {
  const fs::path root = tmp_.path() / "backups";  // the scheduler creates it
  cluster_->StartScheduler({}, {"--checkpoint-dir", root.string()});
  ASSERT_TRUE(cluster_->SchedulerAnswers(seconds(10))) << cluster_->Logs();
  const auto checkpoint = [&](const std::string& dir) {
    return RunCli(tmp_.path(), "checkpoint",
                  {"admin", "checkpoint", "--scheduler", cluster_->address(), dir}, seconds(30));
  };
  const auto expect_refused = [&](const std::string& dir, const std::string& named) {
    const CliResult r = checkpoint(dir);
    EXPECT_EQ(r.exit_code, 2) << dir << ": " << r.err;
    EXPECT_NE(r.err.find("INVALID_ARGUMENT"), std::string::npos) << dir << ": " << r.err;
    EXPECT_NE(r.err.find(named), std::string::npos) << dir << ": " << r.err;
  };
  // Outside the root, a system directory included, and ".." out of it.
  expect_refused((tmp_.path() / "elsewhere").string(), root.string());
  expect_refused("/etc/ripplekv-checkpoint", "/etc/ripplekv-checkpoint");
  expect_refused((root / ".." / "escaped").string(), root.string());
  expect_refused("../escaped", root.string());
  EXPECT_FALSE(fs::exists(tmp_.path() / "elsewhere"));
  EXPECT_FALSE(fs::exists("/etc/ripplekv-checkpoint"));
  EXPECT_FALSE(fs::exists(tmp_.path() / "escaped"));
  // A symlink inside the root leading out.
  const fs::path outside = tmp_.path() / "outside";
  fs::create_directory(outside);
  fs::create_directory_symlink(outside, root / "door");
  expect_refused((root / "door" / "c").string(), outside.string());
  EXPECT_TRUE(fs::is_empty(outside));
  // A missing parent inside the root.
  const fs::path orphan = root / "missing" / "checkpoint";
  expect_refused(orphan.string(), orphan.string());
  EXPECT_FALSE(fs::exists(root / "missing"));

  const fs::path good = root / "online-checkpoint";
  const CliResult made = checkpoint(good.string());
  ASSERT_EQ(made.exit_code, 0) << made.err;
  EXPECT_TRUE(made.out.starts_with("checkpoint " + good.string() + " ")) << made.out;
  EXPECT_GE(ExpectPrivate(good), 3u);
  // Relative: under the root.
  const CliResult relative = checkpoint("relative-checkpoint");
  ASSERT_EQ(relative.exit_code, 0) << relative.err;
  EXPECT_TRUE(relative.out.starts_with("checkpoint " + (root / "relative-checkpoint").string()))
      << relative.out;
  EXPECT_GE(ExpectPrivate(root / "relative-checkpoint"), 3u);
  // The root and the live database are private too (umask 077 at the scheduler's start; the
  // checkpoint's table files are hard links of the database's).
  EXPECT_EQ(ModeOf(root), 0700u);
  EXPECT_GE(ExpectPrivate(cluster_->db()), 3u);
}

// deploy/local/make-tls into `dir`; true on success.
bool MakeTls(const fs::path& dir) {
  const std::string command = std::string(RIPPLEKV_SOURCE_DIR) + "/deploy/local/make-tls '" +
                              dir.string() + "' >/dev/null 2>&1";
  return std::system(command.c_str()) == 0;
}

TEST_F(SchedulerAdminTest, ATokenFileOthersMayReadStopsTheSchedulerUnlessAllowed) {
  const fs::path tls = tmp_.path() / "tls";
  ASSERT_TRUE(MakeTls(tls)) << "deploy/local/make-tls failed (openssl?)";
  const fs::path tokens = tls / "tokens";
  fs::permissions(tokens, fs::perms::group_read | fs::perms::others_read, fs::perm_options::add);
  const auto start = [&](const std::string& name, std::vector<std::string> extra) {
    std::vector<std::string> argv = {RIPPLEKV_SCHEDULER,
                                     "--listen",
                                     cluster_->address(),
                                     "--db",
                                     (tmp_.path() / "db").string(),
                                     "--insecure",
                                     "--token-file",
                                     tokens.string()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return std::make_unique<Process>(argv, tmp_.path() / (name + ".out"),
                                     tmp_.path() / (name + ".err"));
  };
  {
    auto refused = start("refused", {});
    EXPECT_EQ(refused->Wait(seconds(30)).value_or(-1), 1);
  }
  const std::string err = ReadFile(tmp_.path() / "refused.err");
  EXPECT_NE(err.find(tokens.string()), std::string::npos) << err;
  EXPECT_NE(err.find("0644"), std::string::npos) << err;
  EXPECT_NE(err.find("chmod 600"), std::string::npos) << err;
  EXPECT_NE(err.find("--allow-insecure-token-file"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(tmp_.path() / "db"));  // refused before the database

  auto allowed = start("allowed", {"--allow-insecure-token-file"});
  EXPECT_TRUE(WaitFor(
      [&] {
        return RunCli(tmp_.path(), "health",
                      {"health", "--scheduler", cluster_->address(), "--timeout-ms", "2000"},
                      seconds(10))
                   .exit_code == 0;
      },
      seconds(20), std::chrono::milliseconds(100)))
      << ReadFile(tmp_.path() / "allowed.err");
  EXPECT_NE(ReadFile(tmp_.path() / "allowed.err").find("warn"), std::string::npos);

  // The CLI warns about its own token file and goes on.
  const fs::path admin = tls / "token-admin";
  fs::permissions(admin, fs::perms::others_read, fs::perm_options::add);
  const CliResult jobs = RunCli(
      tmp_.path(), "jobs",
      {"jobs", "--scheduler", cluster_->address(), "--token-file", admin.string()}, seconds(10));
  EXPECT_EQ(jobs.exit_code, 0) << jobs.err;
  EXPECT_NE(jobs.err.find(admin.string() + ": mode 0604"), std::string::npos) << jobs.err;
  EXPECT_NE(jobs.err.find("chmod 600"), std::string::npos) << jobs.err;
}

TEST_F(SchedulerAdminTest, APlaintextCallToATlsSchedulerSuggestsTls) {
  const fs::path tls = tmp_.path() / "tls";
  ASSERT_TRUE(MakeTls(tls)) << "deploy/local/make-tls failed (openssl?)";
  Process scheduler(
      {RIPPLEKV_SCHEDULER, "--listen", cluster_->address(), "--db", (tmp_.path() / "db").string(),
       "--tls-cert", (tls / "server.pem").string(), "--tls-key", (tls / "server.key").string()},
      tmp_.path() / "tls-scheduler.out", tmp_.path() / "tls-scheduler.err");
  const std::vector<std::string> with_tls = {"--tls-ca", (tls / "ca.pem").string()};
  const auto health = [&](const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"health", "--scheduler", cluster_->address(), "--timeout-ms",
                                     "2000"};
    args.insert(args.end(), extra.begin(), extra.end());
    return RunCli(tmp_.path(), "health", args, seconds(10));
  };
  ASSERT_TRUE(WaitFor([&] { return health(with_tls).exit_code == 0; }, seconds(20),
                      std::chrono::milliseconds(100)))
      << ReadFile(tmp_.path() / "tls-scheduler.err");

  const CliResult plain = health({});
  EXPECT_EQ(plain.exit_code, 3) << plain.err;
  EXPECT_NE(plain.err.find("UNAVAILABLE"), std::string::npos) << plain.err;
  EXPECT_NE(plain.err.find("the scheduler may be serving TLS: pass --tls-ca"), std::string::npos)
      << plain.err;
  const CliResult jobs =
      RunCli(tmp_.path(), "jobs", {"jobs", "--scheduler", cluster_->address()}, seconds(10));
  EXPECT_EQ(jobs.exit_code, 3) << jobs.err;
  EXPECT_NE(jobs.err.find("--tls-ca"), std::string::npos) << jobs.err;
  std::cout << "plaintext to TLS: " << plain.err;

  // Nothing listening: no TLS hint (the connection is refused, not hung up on).
  scheduler.Kill();
  const CliResult closed = health({});
  EXPECT_EQ(closed.exit_code, 3) << closed.err;
  EXPECT_EQ(closed.err.find("--tls-ca"), std::string::npos) << closed.err;
}

// The same hint in ripplekv-worker's "register ... failed" warning (needs the model to start).
TEST_F(SchedulerAdminTest, APlaintextWorkerOfATlsSchedulerLogsTheHint) {
  const std::string model = TestModelPath();
  if (model.empty()) GTEST_SKIP() << "RIPPLEKV_SMOLLM2_GGUF is not set";
  const fs::path tls = tmp_.path() / "tls";
  ASSERT_TRUE(MakeTls(tls)) << "deploy/local/make-tls failed (openssl?)";
  Process scheduler(
      {RIPPLEKV_SCHEDULER, "--listen", cluster_->address(), "--db", (tmp_.path() / "db").string(),
       "--tls-cert", (tls / "server.pem").string(), "--tls-key", (tls / "server.key").string()},
      tmp_.path() / "tls-scheduler.out", tmp_.path() / "tls-scheduler.err");
  Process worker({RIPPLEKV_WORKER, "--scheduler", cluster_->address(), "--model", model,
                  "--threads", "1", "--id", "plain-worker"},
                 tmp_.path() / "worker.out", tmp_.path() / "worker.err");
  EXPECT_TRUE(WaitFor(
      [&] {
        return ReadFile(tmp_.path() / "worker.err").find("may be serving TLS: pass --tls-ca") !=
               std::string::npos;
      },
      seconds(60), std::chrono::milliseconds(100)))
      << ReadFile(tmp_.path() / "worker.err");
}

}  // namespace
}  // namespace ripplekv::testing
