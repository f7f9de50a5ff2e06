// A worker that lies, and workers that hang or crash, against a real scheduler on loopback
// (docs/DESIGN.md §3.3, "Fencing and liveness"):
//   * a hostile worker sends NaN, Inf, negative and 1e308 KL values, results and task_done for
//     tasks it was never given, a forged task_done with INVALID_ARGUMENT for another job's task,
//     a task_done with trials missing, results of a stale attempt, and task_done messages carrying
//     a bad value or another task's result: each is rejected and
//     counted, the task is leased again at once, the other job is untouched, and the published
//     profiles hold exactly the honest worker's values;
//   * a computation that hangs while its worker keeps heartbeating loses its lease at the task
//     deadline (the worker is told), and the task is leased again;
//   * a task whose every holder crashes fails its job after max_attempts, naming the reason.
// The honest worker reports deterministic values, so the expected profile is their aggregate;
// that a real worker's values equal local `ripplekv calibrate` is cluster_e2e_test's subject.

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "method/profile_aggregate.h"
#include "ripplekv/v1/admin.grpc.pb.h"
#include "tests/scheduler/service/service_fixture.h"

namespace ripplekv::scheduler::service {
namespace {

// The honest worker's KL of (sample, layer, trial).
double HonestKl(int32_t sample, int32_t layer, int32_t trial) {
  return 0.125 + 0.5 * layer + 0.03125 * trial + 0.0625 * sample;
}

// A task the stream was never given: same job, another layer, an attempt never handed out.
v1::TaskAssignment Forged(const std::string& job_id, int32_t layer) {
  v1::TaskAssignment task;
  task.set_job_id(job_id);
  task.set_sample(0);
  task.set_layer(layer);
  task.set_task_id(absl::StrCat(job_id, "-0-", layer, "-7"));
  return task;
}

// Reads until the next assignment; true when a cancellation of `task_id` came before it.
bool CancelledThenReassigned(FakeWorker& worker, const std::string& task_id,
                             v1::TaskAssignment* next) {
  bool cancelled = false;
  v1::SchedulerMessage message;
  while (worker.Read(&message)) {
    if (message.has_task_cancellation() && message.task_cancellation().task_id() == task_id) {
      cancelled = true;
    }
    if (message.has_task_assignment()) {
      *next = message.task_assignment();
      return cancelled;
    }
  }
  ADD_FAILURE() << "the stream ended before a new assignment";
  return false;
}

class HostileWorkerTest : public ServiceFixture {
 protected:
  void Configure(SchedulerServerOptions& options) override {
    options.max_attempts = 100;  // the attempt limit has its own test below
    // One hostile worker alone, on purpose: no quarantine, and it may take a task it failed back
    // at once (quarantine and exclusion have tests of their own: worker_faults_test.cc).
    options.faults.quarantine_failures = 1'000;
    options.faults.exclusion_grace_ms = 0;
  }
};

TEST_F(HostileWorkerTest, LiesAreRejectedAndTheProfilesHoldOnlyHonestValues) {
  const std::string bad_session = Register("bad", /*n_layers=*/2, /*capacity=*/1);
  const std::string job_a = SubmitOne();
  const std::string job_b = SubmitOne();
  FakeWorker bad(workers_.get(), "bad", bad_session);
  std::vector<v1::TaskAssignment> first = bad.ReadAssignments(1);
  ASSERT_EQ(first.size(), 1u);
  v1::TaskAssignment task = first[0];
  ASSERT_EQ(task.job_id(), job_a);

  // Messages about tasks this stream does not hold change nothing.
  const v1::TaskAssignment never_leased = Forged(job_a, 1 - task.layer());
  ASSERT_TRUE(bad.Send(TrialResultMessage(never_leased, 0, 0.5)));
  ASSERT_TRUE(bad.Send(TaskDoneMessage(never_leased)));
  v1::WorkerMessage forged_failure = TaskDoneMessage(Forged(job_b, 0));
  forged_failure.mutable_task_done()->mutable_error()->set_code(
      static_cast<int32_t>(absl::StatusCode::kInvalidArgument));
  forged_failure.mutable_task_done()->mutable_error()->set_message("\x1b[31mfail job B\n");
  ASSERT_TRUE(bad.Send(forged_failure));

  // Each invalid value fails its attempt: the worker is told to stop, the task is leased again.
  const double kBad[] = {std::numeric_limits<double>::quiet_NaN(),
                         std::numeric_limits<double>::infinity(), -1.0, 1e308};
  std::vector<v1::TaskAssignment> stale;
  for (double kl : kBad) {
    ASSERT_TRUE(bad.Send(TrialResultMessage(task, 0, kl)));
    v1::TaskAssignment next;
    EXPECT_TRUE(CancelledThenReassigned(bad, task.task_id(), &next)) << "KL " << kl;
    EXPECT_EQ(next.job_id(), job_a);
    EXPECT_NE(next.task_id(), task.task_id()) << "a new lease has a new attempt number";
    stale.push_back(task);
    task = next;
  }
  // A result of a stale attempt is rejected.
  ASSERT_TRUE(bad.Send(TrialResultMessage(stale[0], 0, HonestKl(0, stale[0].layer(), 0))));
  ASSERT_TRUE(bad.Send(TrialResultMessage(stale[0], 1, HonestKl(0, stale[0].layer(), 1))));
  ASSERT_TRUE(bad.Send(TaskDoneMessage(stale[0])));
  // A task_done with a trial missing fails the attempt.
  ASSERT_TRUE(bad.Send(TrialResultMessage(task, 0, HonestKl(0, task.layer(), 0))));
  ASSERT_TRUE(bad.Send(TaskDoneMessage(task)));
  v1::TaskAssignment after_missing = bad.ReadAssignments(1).at(0);
  EXPECT_EQ(after_missing.job_id(), job_a);
  EXPECT_NE(after_missing.task_id(), task.task_id());
  // Results carried in task_done are checked the same way: a bad value, or a result naming
  // another task, fails the attempt.
  task = after_missing;
  ASSERT_TRUE(bad.Send(TaskDoneWithResults(task, {HonestKl(0, task.layer(), 0), -0.5})));
  v1::TaskAssignment next;
  EXPECT_TRUE(CancelledThenReassigned(bad, task.task_id(), &next));
  task = next;
  v1::WorkerMessage elsewhere =
      TaskDoneWithResults(task, {HonestKl(0, task.layer(), 0), HonestKl(0, task.layer(), 1)});
  elsewhere.mutable_task_done()->mutable_results(1)->set_task_id(stale[1].task_id());
  ASSERT_TRUE(bad.Send(elsewhere));
  EXPECT_TRUE(CancelledThenReassigned(bad, task.task_id(), &next));
  EXPECT_EQ(next.job_id(), job_a);
  EXPECT_TRUE(bad.End().ok());

  const WorkerServiceStats stats = server_->worker_service().Stats();
  EXPECT_EQ(stats.rejected_messages, 3u + 3u) << "forged result, forged done, forged failure, "
                                                 "stale result x2, stale done";
  EXPECT_EQ(stats.invalid_results, 4u + 1u + 2u)
      << "four bad values, one incomplete task, two bad task_done results";
  v1::Job a;
  ASSERT_TRUE(GetJob(job_a, &a).ok());
  EXPECT_EQ(a.state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(a.progress().trials_done(), 0) << "nothing the hostile worker sent was stored";
  v1::Job b;
  ASSERT_TRUE(GetJob(job_b, &b).ok());
  EXPECT_EQ(b.state(), v1::JOB_STATE_PENDING) << "the forged failure did not touch job B";

  // An honest worker finishes both jobs.
  FakeWorker good(workers_.get(), "good", Register("good", 2, 1));
  for (int done = 0; done < 4; ++done) {
    std::vector<v1::TaskAssignment> next = good.ReadAssignments(1);
    ASSERT_EQ(next.size(), 1u);
    const v1::TaskAssignment& t = next[0];
    if (done % 2 == 0) {  // results as their own messages
      for (int32_t trial = 0; trial < 2; ++trial) {
        ASSERT_TRUE(
            good.Send(TrialResultMessage(t, trial, HonestKl(t.sample(), t.layer(), trial))));
      }
      ASSERT_TRUE(good.Send(TaskDoneMessage(t)));
    } else {  // results carried in task_done
      ASSERT_TRUE(good.Send(TaskDoneWithResults(
          t, {HonestKl(t.sample(), t.layer(), 0), HonestKl(t.sample(), t.layer(), 1)})));
    }
  }
  EXPECT_EQ(AwaitState(job_a, v1::JOB_STATE_SUCCEEDED).state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(AwaitState(job_b, v1::JOB_STATE_SUCCEEDED).state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_TRUE(good.End().ok());

  std::vector<method::TrialKl> honest;
  for (int32_t layer = 0; layer < 2; ++layer) {
    for (int32_t trial = 0; trial < 2; ++trial) {
      honest.push_back({0, layer, trial, HonestKl(0, layer, trial)});
    }
  }
  StatusOr<std::vector<method::LayerSensitivity>> expected = method::AggregateProfile(honest);
  ASSERT_TRUE(expected.ok()) << expected.status();
  for (uint32_t version : {1u, 2u}) {
    v1::GetProfileRequest request;
    request.set_model_hash(kHash);
    request.set_version(version);
    v1::Profile profile;
    grpc::ClientContext context;
    SetDeadline(&context);
    ASSERT_TRUE(calibration_->GetProfile(&context, request, &profile).ok());
    ASSERT_EQ(profile.layers_size(), static_cast<int>(expected->size()));
    for (size_t l = 0; l < expected->size(); ++l) {
      const v1::LayerSensitivity& layer = profile.layers(static_cast<int>(l));
      EXPECT_EQ(layer.mean_kl(), (*expected)[l].mean_kl) << "version " << version;
      EXPECT_EQ(layer.count(), (*expected)[l].count) << "version " << version;
    }
  }
}

class LivenessTest : public HostileWorkerTest {
 protected:
  void Configure(SchedulerServerOptions& options) override {
    options.task_deadline_ms = 1'500;
    options.max_attempts = 3;
    options.faults.exclusion_grace_ms = 0;  // the hung worker is alone: it gets its task back
  }
};

TEST_F(LivenessTest, AHungTaskLosesItsLeaseAtTheDeadlineWhileItsWorkerHeartbeats) {
  FakeWorker hung(workers_.get(), "hung", Register("hung", 2, 1));
  const std::string job = SubmitOne();
  hung.Heartbeat(1);  // the job came after hello: a heartbeat fills the worker
  std::vector<v1::TaskAssignment> first = hung.ReadAssignments(1);
  ASSERT_EQ(first.size(), 1u);
  // Heartbeat every 200 ms, listing the task, until the scheduler takes it back. A renewal that
  // ignored the task deadline would keep the lease for the whole 30 s stream.
  std::atomic<bool> stop{false};
  std::thread beats([&] {
    for (uint64_t seq = 2; !stop; ++seq) {
      v1::WorkerMessage message;
      message.mutable_heartbeat()->set_sequence(seq);
      message.mutable_heartbeat()->add_task_ids(first[0].task_id());
      if (!hung.Send(message)) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  });
  v1::TaskAssignment again;
  const bool cancelled = CancelledThenReassigned(hung, first[0].task_id(), &again);
  stop = true;
  beats.join();
  EXPECT_TRUE(cancelled) << "the worker is told its lease is gone";
  EXPECT_EQ(again.job_id(), job);
  EXPECT_EQ(again.layer(), first[0].layer());
  EXPECT_NE(again.task_id(), first[0].task_id()) << "leased again, as a new attempt";
  EXPECT_TRUE(hung.End().ok());
}

TEST_F(LivenessTest, ATaskThatCrashesEveryWorkerFailsItsJobAfterMaxAttempts) {
  std::string session = Register("crash0", 2, 1);  // makes the model known to SubmitJob
  const std::string job = SubmitOne();
  for (int i = 0; i < 3; ++i) {
    const std::string id = absl::StrCat("crash", i);
    if (i > 0) session = Register(id, 2, 1);
    auto worker = std::make_unique<FakeWorker>(workers_.get(), id, session);
    std::vector<v1::TaskAssignment> task = worker->ReadAssignments(1);
    ASSERT_EQ(task.size(), 1u) << "attempt " << i + 1;
    EXPECT_EQ(task[0].layer(), 0) << "the same task each time";
    worker->Crash();
    // The server notices the broken stream on its own threads: wait (bounded) until the worker
    // is gone and its lease back, so the next worker is offered the same task.
    for (int wait = 0; wait < 300; ++wait) {
      const std::vector<std::string> ids = server_->scheduler().Workers();
      if (std::find(ids.begin(), ids.end(), id) == ids.end()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  v1::Job failed = AwaitState(job, v1::JOB_STATE_FAILED);
  ASSERT_EQ(failed.state(), v1::JOB_STATE_FAILED);
  const std::string& error = failed.error().message();
  EXPECT_NE(error.find("failed 3 attempts"), std::string::npos) << error;
  EXPECT_NE(error.find("crash2 disconnected"), std::string::npos) << error;
}

// Quarantine over gRPC (docs/SCHEDULER.md, "Faulty workers"): the default rules, but a task the
// worker failed may go back to it at once (it is alone), so three NaN answers are three failures.
class QuarantineTest : public HostileWorkerTest {
 protected:
  void Configure(SchedulerServerOptions& options) override {
    options.faults.exclusion_grace_ms = 0;
  }

  grpc::Status ListWorkers(v1::ListWorkersResponse* response) {
    grpc::ClientContext context;
    SetDeadline(&context);
    return calibration_->ListWorkers(&context, v1::ListWorkersRequest(), response);
  }
};

TEST_F(QuarantineTest, AWorkerIsToldListedRefusedAndLetBackByAnAdmin) {
  const std::string session = Register("bad", /*n_layers=*/2, /*capacity=*/1);
  SubmitOne();
  FakeWorker bad(workers_.get(), "bad", session);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::optional<v1::SchedulerMessage::KindCase> last;
  std::string reason;
  for (int answered = 0; answered < 3;) {
    v1::SchedulerMessage message;
    ASSERT_TRUE(bad.Read(&message)) << "the stream ended after " << answered << " answers";
    if (message.has_task_assignment()) {
      ASSERT_TRUE(bad.Send(TaskDoneWithResults(message.task_assignment(), {nan, nan})));
      ++answered;
    }
  }
  // The third failure quarantines it: told on its stream, which then ends.
  v1::SchedulerMessage message;
  while (bad.Read(&message)) {
    last = message.kind_case();
    if (message.has_quarantined()) reason = message.quarantined().reason();
  }
  EXPECT_NE(reason.find("3 failed attempts"), std::string::npos) << reason;
  EXPECT_EQ(last, v1::SchedulerMessage::kQuarantined) << "nothing after the notice";
  const grpc::Status ended = bad.End();
  EXPECT_EQ(ended.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << ended.error_message();

  v1::ListWorkersResponse listed;
  ASSERT_TRUE(ListWorkers(&listed).ok());
  ASSERT_EQ(listed.workers_size(), 1);
  EXPECT_EQ(listed.workers(0).worker_id(), "bad");
  EXPECT_TRUE(listed.workers(0).quarantined());
  EXPECT_FALSE(listed.workers(0).connected());
  EXPECT_GT(listed.workers(0).quarantined_until().seconds(), 0);

  {
    v1::RegisterRequest request;
    request.set_worker_id("bad");
    *request.mutable_model() = Model(2);
    request.set_capacity(1);
    v1::RegisterResponse response;
    grpc::ClientContext context;
    SetDeadline(&context);
    const grpc::Status refused = workers_->Register(&context, request, &response);
    EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_NE(refused.error_message().find("quarantined until"), std::string::npos)
        << refused.error_message();
  }

  auto admin = v1::AdminService::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string(server_->port()), grpc::InsecureChannelCredentials()));
  v1::LiftQuarantineRequest lift;
  lift.set_worker_id("bad");
  v1::LiftQuarantineResponse lifted;
  {
    grpc::ClientContext context;
    SetDeadline(&context);
    ASSERT_TRUE(admin->LiftQuarantine(&context, lift, &lifted).ok());
  }
  EXPECT_NE(lifted.reason().find("KL nan"), std::string::npos) << lifted.reason();
  {
    grpc::ClientContext context;
    SetDeadline(&context);
    EXPECT_EQ(admin->LiftQuarantine(&context, lift, &lifted).error_code(),
              grpc::StatusCode::NOT_FOUND);
  }
  Register("bad", /*n_layers=*/2, /*capacity=*/1);  // expects OK
}

}  // namespace
}  // namespace ripplekv::scheduler::service
