// Faults and bad input against real processes on loopback (docs/SCHEDULER.md, "Failures"):
//   * kill -9 a worker mid-task: the job completes, the profile equals local calibrate bit for
//     bit, nothing is counted twice;
//   * kill -9 the scheduler mid-job and restart it on the same database: the job completes with
//     the same profile, and tasks whose trials were stored before the kill are not run again
//     (counted from the database and the workers' logs);
//   * bad requests get INVALID_ARGUMENT / NOT_FOUND naming the field, also through the CLI;
//   * a worker holding another model (another hash) is never given the job.
// Needs RIPPLEKV_SMOLLM2_GGUF; skipped without it.

#include <gtest/gtest.h>

#include <fstream>
#include <iostream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "grpcpp/grpcpp.h"
#include "nlohmann/json.hpp"
#include "ripplekv/v1/calibration.grpc.pb.h"
#include "store/store.h"
#include "tests/cli/cluster_expect.h"
#include "tests/cli/model_cluster_test.h"
#include "tests/cli/process_harness.h"

namespace ripplekv::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// 4 samples x 30 layers = 120 tasks of 2 trials: long enough to kill something mid-job.
const std::vector<std::string> kParams = {"--samples", "4",  "--context-len", "256",
                                          "--probe",   "16", "--trials",      "2",
                                          "--seed",    "11", "--alpha",       "0.5"};
constexpr int kSamples = 4, kLayers = 30, kTrials = 2;
constexpr int kTasks = kSamples * kLayers;

using TaskId = std::pair<int, int>;  // (sample, layer)

// Tasks a worker started, in order, from its "task ... (job J, sample S, layer L, ...)" lines at
// or after byte `from` of its log.
std::vector<TaskId> StartedTasks(const std::string& log, size_t from = 0) {
  static const std::regex line(R"(task \S+ \(job \d+, sample (\d+), layer (\d+),)");
  std::vector<TaskId> out;
  const std::string tail = from < log.size() ? log.substr(from) : std::string();
  for (std::sregex_iterator it(tail.begin(), tail.end(), line), end; it != end; ++it) {
    out.emplace_back(std::stoi((*it)[1]), std::stoi((*it)[2]));
  }
  return out;
}

class ClusterFaultTest : public ModelClusterTest {
 protected:
  void StartWorkers(const std::vector<std::string>& ids) {
    for (const std::string& id : ids) cluster_->StartWorker(id, model_);
    for (const std::string& id : ids) {
      ASSERT_TRUE(cluster_->Registered(id, seconds(60))) << id << cluster_->Logs();
    }
  }

  // Submits the job of kParams without waiting; returns its id.
  std::string Submit() {
    // Verification off: these tests count how often each task runs, and a verified task runs
    // twice by design (verification has its own tests: cluster_faulty_worker_test.cc).
    std::vector<std::string> args = {"submit", "--scheduler", cluster_->address(), "--model",
                                     model_,   "--verify",    "0"};
    args.insert(args.end(), kParams.begin(), kParams.end());
    const CliResult r = RunCli(tmp_.path(), "submit", args, seconds(60));
    EXPECT_EQ(r.exit_code, 0) << r.err << cluster_->Logs();
    std::string id = r.out;
    while (!id.empty() && (id.back() == '\n' || id.back() == ' ')) id.pop_back();
    return id;
  }


  void ExpectProfileEqualsLocalCalibrate() {
    const nlohmann::json local = LocalCalibrateJson(tmp_.path(), model_, kParams);
    ASSERT_FALSE(local.is_null());
    const nlohmann::json remote = FetchProfileJson(tmp_.path(), cluster_->address(),
                                                   local["model"]["hash"].get<std::string>());
    ASSERT_FALSE(remote.is_null()) << cluster_->Logs();
    ExpectSameProfile(remote, local, kLayers);
    for (const auto& layer : remote["layers"]) {
      EXPECT_EQ(layer["count"], kSamples * kTrials);  // every trial once, none twice
    }
  }
};

TEST_F(ClusterFaultTest, WorkerKilledMidTaskJobCompletesWithTheSameProfile) {
  cluster_->StartScheduler();
  ASSERT_TRUE(cluster_->SchedulerAnswers(seconds(10))) << cluster_->Logs();
  StartWorkers({"worker-a", "worker-b"});
  const std::string job = Submit();
  ASSERT_FALSE(job.empty());

  // kill -9 worker-a as soon as it has started its 5th task: it is then inside that task.
  ASSERT_TRUE(WaitFor([&] { return StartedTasks(cluster_->WorkerLog("worker-a")).size() >= 5; },
                      seconds(120), milliseconds(2)))
      << cluster_->Logs();
  cluster_->worker("worker-a").Kill();
  const std::vector<TaskId> by_a = StartedTasks(cluster_->WorkerLog("worker-a"));
  ASSERT_FALSE(by_a.empty());

  ASSERT_EQ(Watch(job), 0);
  const std::vector<TaskId> by_b = StartedTasks(cluster_->WorkerLog("worker-b"));
  std::map<TaskId, int> runs;
  for (const TaskId& t : by_a) ++runs[t];
  for (const TaskId& t : by_b) ++runs[t];
  EXPECT_EQ(runs.size(), static_cast<size_t>(kTasks));
  // Only the task worker-a died in may have run twice (when it had not finished it).
  for (const auto& [task, count] : runs) {
    if (count > 1) {
      EXPECT_EQ(task, by_a.back())
          << "task (" << task.first << ", " << task.second << ") ran " << count << " times";
      EXPECT_EQ(count, 2);
    }
  }
  std::cout << "worker-a started " << by_a.size() << " tasks before kill -9, worker-b "
            << by_b.size() << "; tasks run twice: " << by_a.size() + by_b.size() - kTasks << "\n";
  const std::string scheduler_log =
      ReadFile(tmp_.path() / "scheduler-0.out") + ReadFile(tmp_.path() / "scheduler-0.err");
  // The scheduler saw the stream break (and returned the lease at once, not at its deadline).
  EXPECT_TRUE(scheduler_log.find("worker worker-a gone") != std::string::npos ||
              scheduler_log.find("worker worker-a disconnected") != std::string::npos)
      << scheduler_log;

  const nlohmann::json final_job = Job(job);
  ASSERT_FALSE(final_job.is_null());
  EXPECT_EQ(JsonInt(final_job, {"progress", "trials_done"}), kTasks * kTrials);
  EXPECT_EQ(JsonInt(final_job, {"progress", "trials_total"}), kTasks * kTrials);
  ExpectProfileEqualsLocalCalibrate();
}

TEST_F(ClusterFaultTest, SchedulerKilledMidJobRestartsAndDoesNotRerunStoredTrials) {
  cluster_->StartScheduler();
  ASSERT_TRUE(cluster_->SchedulerAnswers(seconds(10))) << cluster_->Logs();
  StartWorkers({"worker-a", "worker-b"});
  const std::string job = Submit();
  ASSERT_FALSE(job.empty());

  // kill -9 the scheduler once a quarter of the tasks are done.
  ASSERT_TRUE(WaitFor(
      [&] {
        const nlohmann::json j = Job(job);
        return !j.is_null() && JsonInt(j, {"progress", "tasks_done"}) >= kTasks / 4;
      },
      seconds(180), milliseconds(20)))
      << cluster_->Logs();
  cluster_->scheduler().Kill();
  std::map<std::string, size_t> log_at_kill;
  for (const char* w : {"worker-a", "worker-b"}) log_at_kill[w] = cluster_->WorkerLog(w).size();

  // What the database holds after the crash.
  std::set<TaskId> stored;
  size_t stored_trials = 0;
  {
    auto db = store::OpenStore(cluster_->db().string(), {});
    ASSERT_TRUE(db.ok()) << db.status();
    auto tasks = (*db)->ListTasks(std::stoull(job));
    ASSERT_TRUE(tasks.ok()) << tasks.status();
    for (const store::Task& t : *tasks) {
      if (t.state == store::TaskState::kDone) {
        stored.emplace(static_cast<int>(t.key.sample), static_cast<int>(t.key.layer));
      }
      EXPECT_NE(t.state, store::TaskState::kLeased);  // leases return to pending on open
    }
    auto results = (*db)->ListResults(std::stoull(job));
    ASSERT_TRUE(results.ok()) << results.status();
    stored_trials = results->size();
  }
  ASSERT_GE(stored.size(), static_cast<size_t>(kTasks / 4));
  ASSERT_LT(stored.size(), static_cast<size_t>(kTasks)) << "the job finished before the kill";

  cluster_->StartScheduler();  // same port, same database
  ASSERT_EQ(Watch(job), 0);

  // Tasks started after the workers registered with the new scheduler.
  std::map<TaskId, int> rerun;
  for (const char* w : {"worker-a", "worker-b"}) {
    const std::string log = cluster_->WorkerLog(w);
    const size_t again = log.find("registered with", log_at_kill[w]);
    ASSERT_NE(again, std::string::npos) << w << " did not register again" << cluster_->Logs();
    for (const TaskId& t : StartedTasks(log, again)) ++rerun[t];
  }
  size_t stored_and_rerun = 0;
  for (const auto& [task, count] : rerun) {
    EXPECT_EQ(count, 1) << "task (" << task.first << ", " << task.second << ") ran twice";
    if (stored.contains(task)) ++stored_and_rerun;
  }
  EXPECT_EQ(stored_and_rerun, 0u);
  EXPECT_EQ(rerun.size() + stored.size(), static_cast<size_t>(kTasks));
  std::cout << "before kill -9: " << stored.size() << " tasks done, " << stored_trials
            << " trials stored; after restart: " << rerun.size()
            << " tasks run, of which already stored: " << stored_and_rerun << "\n";
  ExpectProfileEqualsLocalCalibrate();
}

class Stub {
 public:
  explicit Stub(const std::string& address)
      : stub_(v1::CalibrationService::NewStub(
            grpc::CreateChannel(address, grpc::InsecureChannelCredentials()))) {}

  template <typename Request, typename Response, typename Method>
  grpc::Status Call(Method call, const Request& request, Response* response) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + seconds(10));
    return ((*stub_).*call)(&context, request, response);
  }

 private:
  std::unique_ptr<v1::CalibrationService::Stub> stub_;
};

void ExpectError(const grpc::Status& status, grpc::StatusCode code, const std::string& field) {
  EXPECT_EQ(status.error_code(), code) << status.error_message();
  EXPECT_NE(status.error_message().find(field), std::string::npos)
      << "message \"" << status.error_message() << "\" does not name " << field;
}

TEST_F(ClusterFaultTest, BadRequestsToTheRunningSchedulerNameTheField) {
  cluster_->StartScheduler();
  ASSERT_TRUE(cluster_->SchedulerAnswers(seconds(10))) << cluster_->Logs();
  Stub stub(cluster_->address());
  using S = v1::CalibrationService::Stub;
  const std::string hash(64, 'a');

  v1::SubmitJobRequest good;
  good.mutable_spec()->mutable_model()->set_model_hash(hash);
  good.mutable_spec()->mutable_model()->set_n_layers(30);
  v1::SubmitJobResponse submitted;

  v1::SubmitJobRequest r = good;
  r.clear_spec();
  ExpectError(stub.Call(&S::SubmitJob, r, &submitted), grpc::StatusCode::INVALID_ARGUMENT, "spec");
  r = good;
  r.mutable_spec()->mutable_model()->clear_model_hash();
  ExpectError(stub.Call(&S::SubmitJob, r, &submitted), grpc::StatusCode::INVALID_ARGUMENT,
              "spec.model.model_hash");
  r = good;
  r.mutable_spec()->mutable_params()->set_alpha(-0.5f);
  ExpectError(stub.Call(&S::SubmitJob, r, &submitted), grpc::StatusCode::INVALID_ARGUMENT,
              "spec.params.alpha");
  r = good;
  r.mutable_spec()->mutable_params()->set_probe_len(600);
  ExpectError(stub.Call(&S::SubmitJob, r, &submitted), grpc::StatusCode::INVALID_ARGUMENT,
              "spec.params.probe_len");
  r = good;
  r.mutable_spec()->mutable_model()->clear_n_layers();  // and no worker holds the model
  ExpectError(stub.Call(&S::SubmitJob, r, &submitted), grpc::StatusCode::INVALID_ARGUMENT,
              "model.n_layers");

  v1::Profile profile;
  v1::GetProfileRequest unknown_model;
  unknown_model.set_model_hash(hash);
  ExpectError(stub.Call(&S::GetProfile, unknown_model, &profile), grpc::StatusCode::NOT_FOUND,
              hash);
  v1::BudgetMap map;
  v1::GetBudgetMapRequest budgets;
  budgets.set_model_hash(hash);
  budgets.mutable_params()->set_average_tokens(128);
  budgets.mutable_params()->set_ratio(4);
  ExpectError(stub.Call(&S::GetBudgetMap, budgets, &map), grpc::StatusCode::NOT_FOUND, hash);
  v1::Job job;
  v1::GetJobRequest unknown_job;
  unknown_job.set_job_id("424242");
  ExpectError(stub.Call(&S::GetJob, unknown_job, &job), grpc::StatusCode::NOT_FOUND, "424242");
  v1::CancelJobRequest cancel;
  cancel.set_job_id("424242");
  ExpectError(stub.Call(&S::CancelJob, cancel, &job), grpc::StatusCode::NOT_FOUND, "424242");
  v1::GetJobRequest no_id;
  ExpectError(stub.Call(&S::GetJob, no_id, &job), grpc::StatusCode::INVALID_ARGUMENT, "job_id");

  // Through the CLI: one line on stderr, exit code 2 (bad input).
  const CliResult alpha =
      RunCli(tmp_.path(), "bad-alpha",
             {"submit", "--scheduler", cluster_->address(), "--model", model_, "--alpha", "-1"},
             seconds(60));
  EXPECT_EQ(alpha.exit_code, 2) << alpha.err;
  // The rule of method/calibration_params.h (the CLI checks it before it connects).
  EXPECT_NE(alpha.err.find("params.alpha: must be finite and > 0, got -1"), std::string::npos)
      << alpha.err;
  size_t error_lines = 0;
  for (size_t at = alpha.err.find("ripplekv: error:"); at != std::string::npos;
       at = alpha.err.find("ripplekv: error:", at + 1)) {
    ++error_lines;
  }
  EXPECT_EQ(error_lines, 1u) << alpha.err;
  const CliResult watch =
      RunCli(tmp_.path(), "bad-watch", {"watch", "--scheduler", cluster_->address(), "424242"},
             seconds(20));
  EXPECT_EQ(watch.exit_code, 2) << watch.err;
  EXPECT_NE(watch.err.find("424242"), std::string::npos) << watch.err;
}

TEST_F(ClusterFaultTest, WorkerWithAnotherModelHashIsNotGivenTheJob) {
  // The same model with one byte of its name changed: it loads, and its hash differs.
  const fs::path other = tmp_.path() / "other-model.gguf";
  {
    std::string bytes = ReadFile(model_);
    const size_t at = bytes.find("Smollm2 135M");
    ASSERT_NE(at, std::string::npos);
    bytes[at + 9] = '6';  // "Smollm2 136M"
    std::ofstream(other, std::ios::binary) << bytes;
  }
  cluster_->StartScheduler();
  ASSERT_TRUE(cluster_->SchedulerAnswers(seconds(10))) << cluster_->Logs();
  cluster_->StartWorker("worker-other", other.string());
  ASSERT_TRUE(cluster_->Registered("worker-other", seconds(60))) << cluster_->Logs();
  const std::string job = Submit();  // the layer count comes from the submitted model's header
  ASSERT_FALSE(job.empty());

  // Heartbeats come every 2 s; after a few of them the job must still wait, untouched.
  std::this_thread::sleep_for(seconds(5));
  const nlohmann::json waiting = Job(job);
  ASSERT_FALSE(waiting.is_null());
  EXPECT_EQ(waiting["state"], "JOB_STATE_PENDING");
  EXPECT_EQ(JsonInt(waiting, {"progress", "trials_done"}), 0);
  EXPECT_TRUE(StartedTasks(cluster_->WorkerLog("worker-other")).empty())
      << cluster_->WorkerLog("worker-other");

  // A worker with the job's model takes it to the end.
  StartWorkers({"worker-right"});
  ASSERT_EQ(Watch(job), 0);
  EXPECT_TRUE(StartedTasks(cluster_->WorkerLog("worker-other")).empty());
  EXPECT_EQ(StartedTasks(cluster_->WorkerLog("worker-right")).size(), static_cast<size_t>(kTasks));
}

}  // namespace
}  // namespace ripplekv::testing
