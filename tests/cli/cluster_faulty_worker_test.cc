// One faulty worker beside genuine ones, against real processes on loopback (docs/SCHEDULER.md,
// "Faulty workers", "Verified results"): a real ripplekv-scheduler and ripplekv-worker processes,
// and a faulty worker speaking worker.proto from this test (FakeWorker on a thread of its own)
// that registers, connects and is handed the job's tasks BEFORE the genuine workers start:
//   1. it answers every task with NaN KLs;
//   2. it accepts tasks and heartbeats without listing them (a hung process): its leases expire;
//   3. it takes 64 tasks at once and keeps them, renewing their leases, past the task deadline;
//   4. it returns plausible wrong KLs (ten times the true ones) at `submit --verify 1`, beside two
//      genuine workers (a disagreement needs a third worker to decide).
// Each time the job succeeds with a profile equal to local `ripplekv calibrate` bit for bit, the
// faulty worker is never handed a task it failed again, `ripplekv workers --json` shows it
// quarantined, and it was told so on its stream, which then ended.
//   5. Two ripplekv-worker processes without --id on one host, sharing a --state-dir, register
//      under two distinct ids and run a job without replacing each other; a third process given
//      one of those ids exits 3 naming the live session.
// Needs RIPPLEKV_SMOLLM2_GGUF; skipped without it.

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "nlohmann/json.hpp"
#include "ripplekv/v1/worker.grpc.pb.h"
#include "tests/cli/cluster_expect.h"
#include "tests/cli/fake_worker.h"
#include "tests/cli/model_cluster_test.h"
#include "tests/cli/process_harness.h"
#include "tests/proto/worker_messages.h"

namespace ripplekv::testing {
namespace {

namespace pb = ::ripplekv::v1;
using ::ripplekv::worker_messages::TaskDoneWithResults;
using std::chrono::milliseconds;
using std::chrono::seconds;

// 2 samples x the model's 30 layers = 60 tasks of one trial each (about 2 s of one core).
const std::vector<std::string> kParams = {"--samples", "2", "--context-len", "64",
                                          "--probe",   "8", "--trials",      "1",
                                          "--seed",    "5", "--alpha",       "0.5"};
constexpr int kSamples = 2, kLayers = 30;
constexpr int kTasks = kSamples * kLayers;
constexpr int kQuarantineFailures = 3;  // the scheduler's default --quarantine-failures

// Short leases, so an abandoned one expires within seconds; the heartbeat timeout sets the
// genuine workers' heartbeat interval to 800 ms (a third of it), well inside the lease.
const std::vector<std::string> kShortLeases = {"--lease-ms", "2000", "--heartbeat-timeout-ms",
                                               "2400"};

using TaskKey = std::pair<int, int>;  // (sample, layer)

class ClusterFaultyWorkerTest : public ModelClusterTest {
 protected:
  // `ripplekv calibrate` of kParams, computed once per test process.
  const nlohmann::json& Local() {
    static const nlohmann::json* local = nullptr;
    if (local == nullptr) {
      TempDir dir;
      local = new nlohmann::json(LocalCalibrateJson(dir.path(), model_, kParams));
    }
    return *local;
  }

  void StartScheduler(const std::vector<std::string>& extra = {}) {
    cluster_->StartScheduler({}, extra);
    ASSERT_TRUE(cluster_->SchedulerAnswers(seconds(10))) << cluster_->Logs();
  }

  // A faulty worker of the genuine model, registered and connected (its stream lives at most
  // 150 s).
  std::unique_ptr<FakeWorker> ConnectFaulty(const std::string& id, const FakeRegistration& how) {
    auto fake = std::make_unique<FakeWorker>(cluster_->address(), id);
    const grpc::Status registered = fake->Register(ModelOf(Local()["model"]), how);
    EXPECT_TRUE(registered.ok()) << registered.error_message();
    if (!registered.ok() || !fake->Connect(seconds(150))) return nullptr;
    return fake;
  }

  // Submits the job of kParams (and `extra` flags) without waiting; returns its id.
  std::string Submit(const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {"submit", "--scheduler", cluster_->address(), "--model",
                                     model_};
    args.insert(args.end(), kParams.begin(), kParams.end());
    args.insert(args.end(), extra.begin(), extra.end());
    const CliResult r = RunCli(tmp_.path(), "submit", args, seconds(60));
    EXPECT_EQ(r.exit_code, 0) << r.err << cluster_->Logs();
    std::string id = r.out;
    while (!id.empty() && (id.back() == '\n' || id.back() == ' ')) id.pop_back();
    return id;
  }

  void StartGenuine(const std::vector<std::string>& ids) {
    for (const std::string& id : ids) cluster_->StartWorker(id, model_);
    for (const std::string& id : ids) {
      ASSERT_TRUE(cluster_->Registered(id, seconds(60))) << id << cluster_->Logs();
    }
  }


  // `ripplekv workers --json`, by worker id.
  std::map<std::string, nlohmann::json> Workers() {
    const CliResult r =
        RunCli(tmp_.path(), "workers", {"workers", "--scheduler", cluster_->address(), "--json"},
               seconds(10));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::map<std::string, nlohmann::json> out;
    const nlohmann::json all = nlohmann::json::parse(r.out, nullptr, false);
    EXPECT_FALSE(all.is_discarded()) << r.out;
    if (all.is_discarded() || !all.contains("workers")) return out;
    for (const auto& w : all["workers"]) out[w.value("worker_id", "")] = w;
    return out;
  }

  // The scheduler lists `id` as quarantined, for a reason that contains `why`.
  void ExpectListedQuarantined(const std::string& id, const std::string& why) {
    const std::map<std::string, nlohmann::json> workers = Workers();
    const auto it = workers.find(id);
    ASSERT_TRUE(it != workers.end()) << id << " is not listed";
    const nlohmann::json& w = it->second;
    EXPECT_TRUE(w.value("quarantined", false)) << w.dump();
    EXPECT_FALSE(w.value("connected", false)) << w.dump();  // its stream ended
    EXPECT_NE(w.value("quarantine_reason", "").find(why), std::string::npos) << w.dump();
    EXPECT_TRUE(w.contains("quarantined_until")) << w.dump();
    for (const std::string genuine : {"genuine-a", "genuine-b"}) {
      if (const auto g = workers.find(genuine); g != workers.end()) {
        EXPECT_FALSE(g->second.value("quarantined", false)) << g->second.dump();
        EXPECT_TRUE(g->second.value("connected", false)) << g->second.dump();
      }
    }
  }

  // The faulty worker was told it is quarantined, then its stream ended (FAILED_PRECONDITION),
  // and it never got a task twice (a task it failed goes to the genuine workers). Returns what it
  // saw.
  FakeServed ExpectToldQuarantined(FakeWorker& fake) {
    EXPECT_TRUE(WaitFor([&] { return fake.ended(); }, seconds(30))) << cluster_->Logs();
    if (!fake.ended()) fake.Stop();
    FakeServed served = fake.Join();
    EXPECT_TRUE(served.quarantined.has_value()) << served.status.error_message();
    if (served.quarantined) {
      std::cout << fake.id() << " quarantined after " << served.assigned.size()
                << " tasks: " << served.quarantined->reason() << "\n";
      EXPECT_FALSE(served.quarantined->reason().empty());
      EXPECT_GT(served.quarantined->until().seconds(), 0);
    }
    EXPECT_FALSE(served.after_quarantined) << "the stream went on after the quarantine";
    EXPECT_EQ(served.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION)
        << served.status.error_message();
    std::set<TaskKey> seen;
    for (const pb::TaskAssignment& task : served.assigned) {
      EXPECT_TRUE(seen.emplace(task.sample(), task.layer()).second)
          << "task (sample " << task.sample() << ", layer " << task.layer()
          << ") was handed to the faulty worker twice";
    }
    return served;
  }

  // The published profile of the model; null on error.
  nlohmann::json RemoteProfile() {
    return FetchProfileJson(tmp_.path(), cluster_->address(),
                            Local()["model"]["hash"].get<std::string>());
  }

  void ExpectProfileEqualsLocalCalibrate() {
    const nlohmann::json remote = RemoteProfile();
    ASSERT_FALSE(remote.is_null()) << cluster_->Logs();
    ExpectSameProfile(remote, Local(), kLayers);
    for (const auto& layer : remote["layers"]) EXPECT_EQ(layer["count"], kSamples);
  }

  void Report(const char* what, SteadyClock::time_point start) {
    std::cout << what << ": "
              << std::chrono::duration_cast<milliseconds>(SteadyClock::now() - start).count()
              << " ms from submit to the end of the checks\n";
  }
};

TEST_F(ClusterFaultyWorkerTest, NanWorkerIsQuarantinedAndTheJobSucceeds) {
  ASSERT_FALSE(Local().is_null());
  StartScheduler();
  std::unique_ptr<FakeWorker> nan = ConnectFaulty("nan-worker", {});
  ASSERT_NE(nan, nullptr);
  nan->ServeInBackground(
      [](const pb::TaskAssignment& task) {
        const std::vector<double> kl(task.params().trials(),
                                     std::numeric_limits<double>::quiet_NaN());
        return std::optional<std::vector<pb::WorkerMessage>>({TaskDoneWithResults(task, kl)});
      },
      /*list_held=*/false);
  const auto start = SteadyClock::now();
  const std::string job = Submit();
  ASSERT_FALSE(job.empty());
  ASSERT_TRUE(WaitFor([&] { return nan->assignments() >= 1; }, seconds(20))) << cluster_->Logs();
  StartGenuine({"genuine-a", "genuine-b"});

  ASSERT_EQ(Watch(job), 0);
  const FakeServed served = ExpectToldQuarantined(*nan);
  // Each NaN answer is charged to it; the third quarantines it: it runs no fourth task.
  EXPECT_EQ(served.assigned.size(), static_cast<size_t>(kQuarantineFailures));
  ExpectListedQuarantined("nan-worker", "invalid result");
  ExpectProfileEqualsLocalCalibrate();
  Report("NaN worker", start);
}

TEST_F(ClusterFaultyWorkerTest, HungWorkerIsQuarantinedAfterThreeExpiredLeases) {
  ASSERT_FALSE(Local().is_null());
  StartScheduler(kShortLeases);
  std::unique_ptr<FakeWorker> hung = ConnectFaulty("hung-worker", {});
  ASSERT_NE(hung, nullptr);
  // Accepts, then never answers and never lists the task: its lease expires after 2 s.
  hung->ServeInBackground(
      [](const pb::TaskAssignment&) { return std::optional<std::vector<pb::WorkerMessage>>(); },
      /*list_held=*/false);
  const auto start = SteadyClock::now();
  const std::string job = Submit();
  ASSERT_FALSE(job.empty());
  // Alone, it is handed another task after each expiry (never the one it let expire); the
  // genuine workers start while it holds its third, so the job cannot end before that lease
  // expires and quarantines it.
  ASSERT_TRUE(WaitFor([&] { return hung->assignments() >= kQuarantineFailures; }, seconds(30)))
      << cluster_->Logs();
  EXPECT_FALSE(hung->quarantined());
  StartGenuine({"genuine-a", "genuine-b"});

  ASSERT_EQ(Watch(job), 0);
  const FakeServed served = ExpectToldQuarantined(*hung);
  EXPECT_EQ(served.assigned.size(), static_cast<size_t>(kQuarantineFailures));
  ExpectListedQuarantined("hung-worker", "stopped renewing its lease");
  ExpectProfileEqualsLocalCalibrate();
  Report("hung worker", start);
}

TEST_F(ClusterFaultyWorkerTest, HoarderPastTheTaskDeadlineIsQuarantined) {
  ASSERT_FALSE(Local().is_null());
  std::vector<std::string> flags = kShortLeases;
  flags.insert(flags.end(), {"--task-deadline-ms", "4000"});
  StartScheduler(flags);
  std::unique_ptr<FakeWorker> hoarder = ConnectFaulty("hoarder", {.capacity = 64});
  ASSERT_NE(hoarder, nullptr);
  // Keeps every task, listing them all in its heartbeats: the leases are renewed up to the task
  // deadline, then all expire at once.
  hoarder->ServeInBackground(
      [](const pb::TaskAssignment&) { return std::optional<std::vector<pb::WorkerMessage>>(); },
      /*list_held=*/true);
  const auto start = SteadyClock::now();
  const std::string job = Submit();
  ASSERT_FALSE(job.empty());
  // It holds the whole job before the genuine workers start.
  ASSERT_TRUE(WaitFor([&] { return hoarder->assignments() >= kTasks; }, seconds(20)))
      << hoarder->assignments() << cluster_->Logs();
  StartGenuine({"genuine-a", "genuine-b"});

  ASSERT_EQ(Watch(job), 0);
  const FakeServed served = ExpectToldQuarantined(*hoarder);
  EXPECT_EQ(served.assigned.size(), static_cast<size_t>(kTasks));
  ExpectListedQuarantined("hoarder", "passed the task deadline");
  ExpectProfileEqualsLocalCalibrate();
  Report("hoarder", start);
}

TEST_F(ClusterFaultyWorkerTest, WrongValuesAreOutvotedAndEveryTaskOfTheWorkerIsRecomputed) {
  const nlohmann::json& local = Local();
  ASSERT_FALSE(local.is_null());
  // The true KL of each task (one trial: its sample's mean), which the liar multiplies by ten:
  // plausible values, inside the accepted range.
  std::map<TaskKey, double> truth;
  for (const auto& layer : local["layers"]) {
    for (int s = 0; s < kSamples; ++s) {
      truth[{s, layer["layer"].get<int>()}] = layer["per_sample_mean"][s].get<double>();
    }
  }
  // Alone, the liar answers kCompleted tasks, which complete unverified after the scheduler's
  // verify wait (1 s here); it keeps the next one until `genuine_up`, then answers everything.
  constexpr int kCompleted = 4;
  std::atomic<int> answered{0};
  std::atomic<bool> genuine_up{false};
  StartScheduler();
  std::unique_ptr<FakeWorker> liar =
      ConnectFaulty("liar", {.numerics = "cpu-fp32/ripplekv (another build)"});
  ASSERT_NE(liar, nullptr);
  liar->ServeInBackground(
      [&](const pb::TaskAssignment& task) -> std::optional<std::vector<pb::WorkerMessage>> {
        if (answered >= kCompleted && !genuine_up) return std::nullopt;
        ++answered;
        const std::vector<double> kl(task.params().trials(),
                                     10 * truth.at({task.sample(), task.layer()}));
        return std::vector<pb::WorkerMessage>{TaskDoneWithResults(task, kl)};
      },
      /*list_held=*/true);
  const auto start = SteadyClock::now();
  const std::string job = Submit({"--verify", "1"});
  ASSERT_FALSE(job.empty());
  ASSERT_TRUE(WaitFor(
      [&] {
        const nlohmann::json j = Job(job);
        return !j.is_null() && JsonInt(j, {"progress", "tasks_done"}) >= kCompleted;
      },
      seconds(30), milliseconds(100)))
      << cluster_->Logs();
  ASSERT_EQ(answered.load(), kCompleted);
  StartGenuine({"genuine-a", "genuine-b"});
  genuine_up = true;

  ASSERT_EQ(Watch(job), 0);
  const FakeServed served = ExpectToldQuarantined(*liar);
  EXPECT_GT(served.assigned.size(), static_cast<size_t>(kCompleted));
  ExpectListedQuarantined("liar", "outvoted");
  ExpectProfileEqualsLocalCalibrate();

  const nlohmann::json remote = RemoteProfile();
  ASSERT_TRUE(remote.contains("verification")) << remote.dump();
  const nlohmann::json& v = remote["verification"];
  std::cout << "verification: " << v.dump() << "\n";
  EXPECT_EQ(v["fraction"].get<double>(), 1.0) << v.dump();
  // Every task's published results are two genuine workers' agreeing runs.
  EXPECT_EQ(v["tasks_verified"].get<int64_t>(), kTasks) << v.dump();
  EXPECT_EQ(v["tasks_unverified"].get<int64_t>(), kCompleted) << v.dump();
  EXPECT_EQ(v["tasks_recomputed"].get<int64_t>(), kCompleted) << v.dump();
  ASSERT_FALSE(v["disagreements"].empty()) << v.dump();
  for (const auto& d : v["disagreements"]) {
    EXPECT_EQ(d["outvoted_worker"], "liar") << d.dump();
    EXPECT_EQ(d["agreeing_workers"].get<std::set<std::string>>(),
              (std::set<std::string>{"genuine-a", "genuine-b"}))
        << d.dump();
  }
  Report("wrong-value worker at --verify 1", start);
}

// The id a ripplekv-worker log says it registered as ("registered with ADDR as ID (session");
// empty when it has not.
std::string RegisteredId(const std::string& log) {
  static const std::regex line(R"(registered with \S+ as (\S+) \(session)");
  std::smatch m;
  return std::regex_search(log, m, line) ? m[1].str() : std::string();
}

TEST_F(ClusterFaultyWorkerTest, TwoWorkersWithDefaultIdsOnOneHostRegisterApart) {
  ASSERT_FALSE(Local().is_null());
  StartScheduler();
  const std::string state = (tmp_.path() / "worker-state").string();
  const std::vector<std::string> names = {"worker-default-a", "worker-default-b"};
  for (const std::string& name : names) {
    cluster_->StartWorkerNamed(name, model_, {"--state-dir", state});
  }
  std::vector<std::string> ids;
  for (const std::string& name : names) {
    ASSERT_TRUE(cluster_->Registered(name, seconds(60))) << name << cluster_->Logs();
    ids.push_back(RegisteredId(cluster_->WorkerLog(name)));
    ASSERT_FALSE(ids.back().empty()) << cluster_->WorkerLog(name);
  }
  EXPECT_NE(ids[0], ids[1]);
  for (const std::string& id : ids) {
    EXPECT_NE(id.find("-cpu-"), std::string::npos) << id;  // HOST-DEVICE-N
  }
  const std::map<std::string, nlohmann::json> workers = Workers();
  for (const std::string& id : ids) {
    ASSERT_TRUE(workers.contains(id)) << id;
    EXPECT_TRUE(workers.at(id).value("connected", false)) << workers.at(id).dump();
  }

  const auto start = SteadyClock::now();
  const std::string job = Submit();
  ASSERT_FALSE(job.empty());
  ASSERT_EQ(Watch(job), 0);
  ExpectProfileEqualsLocalCalibrate();
  for (const std::string& name : names) {
    const std::string log = cluster_->WorkerLog(name);
    EXPECT_EQ(log.find("CANCELLED"), std::string::npos) << name << ":\n" << log;
    EXPECT_EQ(log.find("superseded"), std::string::npos) << name << ":\n" << log;
    // One registration each: neither replaced the other, nor registered again.
    const std::string line = "registered with";
    EXPECT_EQ(log.find(line), log.rfind(line)) << name << ":\n" << log;
  }

  // A third process given a live id explicitly is refused (exit 3), naming the live session.
  Process& third = cluster_->StartWorkerNamed("worker-same-id", model_, {"--id", ids[0]});
  const std::optional<int> code = third.Wait(seconds(60));
  ASSERT_TRUE(code.has_value()) << cluster_->Logs();
  EXPECT_EQ(*code, 3) << cluster_->WorkerLog("worker-same-id");
  const std::string refused = cluster_->WorkerLog("worker-same-id");
  EXPECT_TRUE(refused.find("ALREADY_EXISTS") != std::string::npos ||
              refused.find("live session") != std::string::npos)
      << refused;
  EXPECT_NE(refused.find(ids[0]), std::string::npos) << refused;
  // It names the live session's host (the default id's prefix), as an operator needs to find it.
  const std::string host = ids[0].substr(0, ids[0].rfind("-cpu-"));
  EXPECT_NE(refused.find("host " + host), std::string::npos) << refused;
  std::cout << "default ids " << ids[0] << ", " << ids[1] << "; --id " << ids[0] << ": "
            << refused.substr(refused.rfind('\n', refused.size() - 2) + 1);
  // The session it would have taken is untouched.
  const std::map<std::string, nlohmann::json> after = Workers();
  ASSERT_TRUE(after.contains(ids[0]));
  EXPECT_TRUE(after.at(ids[0]).value("connected", false)) << after.at(ids[0]).dump();
  const std::string log = cluster_->WorkerLog(names[0]);
  EXPECT_EQ(log.find("registered with"), log.rfind("registered with")) << log;
  Report("two workers with default ids", start);
}

}  // namespace
}  // namespace ripplekv::testing
