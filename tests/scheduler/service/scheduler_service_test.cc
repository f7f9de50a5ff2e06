// The scheduler's gRPC services end to end in one process: a SchedulerServer on 127.0.0.1:0 over
// a real RocksDB in a temporary directory, called through real stubs. Every call has a deadline.

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <latch>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "method/calibration_params.h"
#include "proto/calibration_params.h"
#include "ripplekv/v1/calibration.grpc.pb.h"
#include "ripplekv/v1/worker.grpc.pb.h"
#include "scheduler/service/convert.h"
#include "scheduler/service/scheduler_server.h"
#include "tests/scheduler/service/service_fixture.h"

namespace ripplekv::scheduler::service {
namespace {

class SchedulerServiceTest : public ServiceFixture {};

TEST_F(SchedulerServiceTest, SubmitGetListAndCancelAJob) {
  Register("w1");
  v1::SubmitJobResponse first;
  ASSERT_TRUE(Submit(OneSampleJob(), &first).ok());
  EXPECT_FALSE(first.job().job_id().empty());
  EXPECT_EQ(first.job().state(), v1::JOB_STATE_PENDING);
  EXPECT_EQ(first.job().progress().tasks_total(), 2);  // 1 sample x 2 layers
  EXPECT_EQ(first.job().progress().trials_total(), 4);
  EXPECT_EQ(first.job().spec().params().samples(), 1);
  EXPECT_EQ(first.job().spec().data().builtin(), "mixed");  // no data: the default set
  EXPECT_FALSE(first.existing());

  v1::SubmitJobResponse second;
  ASSERT_TRUE(Submit(OneSampleJob(), &second).ok());
  EXPECT_NE(second.job().job_id(), first.job().job_id());

  v1::Job got;
  ASSERT_TRUE(GetJob(first.job().job_id(), &got).ok());
  EXPECT_EQ(got.job_id(), first.job().job_id());
  EXPECT_EQ(got.spec().params().alpha(), 0.5f);

  v1::ListJobsRequest list_request;
  v1::ListJobsResponse list;
  {
    grpc::ClientContext context;
    SetDeadline(&context);
    ASSERT_TRUE(calibration_->ListJobs(&context, list_request, &list).ok());
  }
  ASSERT_EQ(list.jobs_size(), 2);
  EXPECT_EQ(list.jobs(0).job_id(), second.job().job_id());  // newest first
  EXPECT_EQ(list.jobs(1).job_id(), first.job().job_id());

  list_request.set_page_size(1);
  {
    grpc::ClientContext context;
    SetDeadline(&context);
    ASSERT_TRUE(calibration_->ListJobs(&context, list_request, &list).ok());
  }
  ASSERT_EQ(list.jobs_size(), 1);
  EXPECT_EQ(list.jobs(0).job_id(), second.job().job_id());
  ASSERT_FALSE(list.next_page_token().empty());
  list_request.set_page_token(list.next_page_token());
  {
    grpc::ClientContext context;
    SetDeadline(&context);
    ASSERT_TRUE(calibration_->ListJobs(&context, list_request, &list).ok());
  }
  ASSERT_EQ(list.jobs_size(), 1);
  EXPECT_EQ(list.jobs(0).job_id(), first.job().job_id());
  EXPECT_TRUE(list.next_page_token().empty()) << "the last page";

  v1::Job cancelled;
  ASSERT_TRUE(Cancel(first.job().job_id(), &cancelled).ok());
  EXPECT_EQ(cancelled.state(), v1::JOB_STATE_CANCELLED);
  ASSERT_TRUE(Cancel(first.job().job_id(), &cancelled).ok()) << "cancelling twice is a no-op";
  EXPECT_EQ(cancelled.state(), v1::JOB_STATE_CANCELLED);

  list_request.Clear();
  list_request.add_states(v1::JOB_STATE_CANCELLED);
  {
    grpc::ClientContext context;
    SetDeadline(&context);
    ASSERT_TRUE(calibration_->ListJobs(&context, list_request, &list).ok());
  }
  ASSERT_EQ(list.jobs_size(), 1);
  EXPECT_EQ(list.jobs(0).job_id(), first.job().job_id());
}

TEST_F(SchedulerServiceTest, IdempotencyKeyReturnsTheFirstJob) {
  Register("w1");
  v1::SubmitJobRequest request = OneSampleJob();
  request.set_idempotency_key("key-1");
  v1::SubmitJobResponse first, again, other;
  ASSERT_TRUE(Submit(request, &first).ok());
  ASSERT_TRUE(Submit(request, &again).ok());
  EXPECT_TRUE(again.existing());
  EXPECT_EQ(again.job().job_id(), first.job().job_id());
  request.mutable_spec()->mutable_params()->set_trials(3);
  EXPECT_EQ(Submit(request, &other).error_code(), grpc::StatusCode::ALREADY_EXISTS);
}

// Clients racing to submit one job (a retried request arriving on several connections): the
// core decides `created` in the store write, so exactly one answer says created and one job
// exists. A server of its own with fsynced writes, the daemon's default: the slower each write,
// the wider the window a lookup outside that write would leave open. Each client has its own
// channel and connection, connected before the start; several rounds, one key each.
TEST_F(SchedulerServiceTest, ConcurrentSubmitsOfOneIdempotencyKeyCreateOneJob) {
  constexpr int kClients = 16;
  constexpr int kRounds = 4;
  TempDir dir;
  SchedulerServerOptions options;
  options.db_path = dir.path() + "/db";
  options.sync_writes = true;
  StatusOr<std::unique_ptr<SchedulerServer>> server = SchedulerServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string target = "127.0.0.1:" + std::to_string((*server)->port());
  std::vector<std::unique_ptr<v1::CalibrationService::Stub>> stubs;
  for (int i = 0; i < kClients; ++i) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection of its own
    auto channel = grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
    ASSERT_TRUE(channel->WaitForConnected(std::chrono::system_clock::now() + kCallTimeout));
    stubs.push_back(v1::CalibrationService::NewStub(channel));
  }

  std::set<std::string> all_jobs;
  for (int round = 0; round < kRounds; ++round) {
    v1::SubmitJobRequest request = OneSampleJob();
    request.mutable_spec()->mutable_model()->set_n_layers(2);
    request.set_idempotency_key("retried-submit-" + std::to_string(round));
    std::latch start(kClients);
    std::vector<grpc::Status> statuses(kClients);
    std::vector<v1::SubmitJobResponse> responses(kClients);
    std::vector<std::thread> clients;
    for (int i = 0; i < kClients; ++i) {
      clients.emplace_back([&, i] {
        grpc::ClientContext context;
        SetDeadline(&context);
        start.arrive_and_wait();
        statuses[i] = stubs[i]->SubmitJob(&context, request, &responses[i]);
      });
    }
    for (std::thread& client : clients) client.join();

    int created = 0;
    std::set<std::string> job_ids;
    for (int i = 0; i < kClients; ++i) {
      ASSERT_TRUE(statuses[i].ok()) << i << ": " << statuses[i].error_message();
      if (!responses[i].existing()) ++created;
      job_ids.insert(responses[i].job().job_id());
    }
    EXPECT_EQ(created, 1) << "round " << round << ": exactly one submit creates the job";
    EXPECT_EQ(job_ids.size(), 1u) << "round " << round;
    all_jobs.insert(job_ids.begin(), job_ids.end());
  }

  v1::ListJobsRequest list_request;
  list_request.set_page_size(1000);
  v1::ListJobsResponse list;
  grpc::ClientContext context;
  SetDeadline(&context);
  ASSERT_TRUE(stubs[0]->ListJobs(&context, list_request, &list).ok());
  EXPECT_EQ(list.jobs_size(), kRounds) << "one job per key";
  std::set<std::string> listed;
  for (const v1::Job& job : list.jobs()) listed.insert(job.job_id());
  EXPECT_EQ(listed, all_jobs);
  EXPECT_TRUE(list.next_page_token().empty());
  (*server)->Shutdown();
}

// Every rule of the method's parameters refuses a submission before anything is stored, with
// the message of method::ValidateCalibrationParams for the same values (the CLI's and a worker's),
// the field named by its path in the request.
TEST_F(SchedulerServiceTest, EveryInvalidParameterIsRefusedWithTheMethodsMessage) {
  Register("w1");  // a worker of a 2-layer model: the model's layer count is known
  struct Edge {
    const char* name;
    void (*edit)(v1::CalibrationParams*);
  };
  const std::vector<Edge> edges = {
      {"alpha 0", [](v1::CalibrationParams* p) { p->set_alpha(0); }},
      {"alpha -1", [](v1::CalibrationParams* p) { p->set_alpha(-1); }},
      {"alpha NaN", [](v1::CalibrationParams* p) { p->set_alpha(std::nanf("")); }},
      {"alpha inf", [](v1::CalibrationParams* p) { p->set_alpha(HUGE_VALF); }},
      {"trials 0", [](v1::CalibrationParams* p) { p->set_trials(0); }},
      {"samples 0", [](v1::CalibrationParams* p) { p->set_samples(0); }},
      {"context_len 0", [](v1::CalibrationParams* p) { p->set_context_len(0); }},
      {"probe_len 0", [](v1::CalibrationParams* p) { p->set_probe_len(0); }},
      {"probe_len = context_len", [](v1::CalibrationParams* p) { p->set_probe_len(16); }},
      {"negative layer", [](v1::CalibrationParams* p) { p->add_layers(-1); }},
      {"until_stable, rounds of 1", [](v1::CalibrationParams* p) { p->set_until_stable(true); }},
      {"until_stable, cap below a round",
       [](v1::CalibrationParams* p) {
         p->set_samples(4);
         p->set_until_stable(true);
         p->set_max_samples(2);
       }},
  };
  for (const Edge& edge : edges) {
    v1::SubmitJobRequest request = OneSampleJob();
    edge.edit(request.mutable_spec()->mutable_params());
    StatusOr<method::CalibrationParams> params =
        v1::CalibrationParamsFromProto(request.spec().params(), "spec.params");
    ASSERT_TRUE(params.ok()) << edge.name << ": " << params.status();
    const Status rule = method::ValidateCalibrationParams(*params, /*n_layers=*/0);
    ASSERT_FALSE(rule.ok()) << edge.name;
    v1::SubmitJobResponse response;
    const grpc::Status status = Submit(request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << edge.name;
    EXPECT_EQ(status.error_message(), absl::StrCat("spec.", rule.message())) << edge.name;
  }
  v1::SubmitJobRequest zero_alpha = OneSampleJob();
  zero_alpha.mutable_spec()->mutable_params()->set_alpha(0);
  v1::SubmitJobResponse response;
  EXPECT_EQ(Submit(zero_alpha, &response).error_message(),
            "spec.params.alpha: must be finite and > 0, got 0");
  // The layer range needs the model's layer count: the core's planner checks it, same rule.
  v1::SubmitJobRequest out_of_range = OneSampleJob();
  out_of_range.mutable_spec()->mutable_params()->add_layers(2);  // the model has layers 0 and 1
  const grpc::Status layer = Submit(out_of_range, &response);
  EXPECT_EQ(layer.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(layer.error_message(),
            "job spec field params.layers[0]: layer 2 is out of range: the model has 2 layers");

  v1::ListJobsResponse list;
  grpc::ClientContext context;
  SetDeadline(&context);
  ASSERT_TRUE(calibration_->ListJobs(&context, v1::ListJobsRequest(), &list).ok());
  EXPECT_EQ(list.jobs_size(), 0);  // nothing was stored
}

TEST_F(SchedulerServiceTest, BadRequestsNameTheField) {
  v1::SubmitJobResponse response;
  // No worker holds the model yet: the layer count is unknown.
  grpc::Status status = Submit(OneSampleJob(), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("model.n_layers"), std::string::npos)
      << status.error_message();

  Register("w1");
  v1::SubmitJobRequest no_spec;
  status = Submit(no_spec, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("spec"), std::string::npos);

  v1::SubmitJobRequest no_model = OneSampleJob();
  no_model.mutable_spec()->clear_model();
  status = Submit(no_model, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("spec.model"), std::string::npos) << status.error_message();

  v1::SubmitJobRequest empty_hash = OneSampleJob();
  empty_hash.mutable_spec()->mutable_model()->clear_model_hash();
  status = Submit(empty_hash, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("spec.model.model_hash"), std::string::npos)
      << status.error_message();

  v1::SubmitJobRequest negative_alpha = OneSampleJob();
  negative_alpha.mutable_spec()->mutable_params()->set_alpha(-1.0f);
  status = Submit(negative_alpha, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  // The rule of method/calibration_params.h, with the field's path in the request.
  EXPECT_NE(status.error_message().find("spec.params.alpha: must be finite and > 0, got -1"),
            std::string::npos)
      << status.error_message();

  v1::SubmitJobRequest zero_trials = OneSampleJob();
  zero_trials.mutable_spec()->mutable_params()->set_trials(0);
  status = Submit(zero_trials, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("spec.params.trials"), std::string::npos);

  v1::SubmitJobRequest bad_layer = OneSampleJob();
  bad_layer.mutable_spec()->mutable_params()->add_layers(7);  // the model has 2
  status = Submit(bad_layer, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("layers"), std::string::npos) << status.error_message();

  v1::Job job;
  status = GetJob("12345", &job);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND) << status.error_message();
  status = GetJob("", &job);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("job_id"), std::string::npos);
  status = Cancel("12345", &job);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);

  v1::Profile profile;
  status = GetProfile(std::string(64, 'b'), &profile);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND) << status.error_message();
  status = GetProfile("not-a-hash", &profile);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("model_hash"), std::string::npos);

  for (const std::string token : {"not-a-token", "-3"}) {
    v1::ListJobsRequest list_request;
    list_request.set_page_token(token);
    v1::ListJobsResponse list;
    grpc::ClientContext list_context;
    SetDeadline(&list_context);
    status = calibration_->ListJobs(&list_context, list_request, &list);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << token;
    EXPECT_NE(status.error_message().find("page_token"), std::string::npos);
  }
  {
    v1::ListProfilesRequest list_request;
    list_request.set_page_size(-1);
    v1::ListProfilesResponse list;
    grpc::ClientContext list_context;
    SetDeadline(&list_context);
    status = calibration_->ListProfiles(&list_context, list_request, &list);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(status.error_message().find("page_size"), std::string::npos);
  }

  v1::RegisterRequest bad_worker;
  bad_worker.set_worker_id("w2");
  *bad_worker.mutable_model() = Model(2);
  bad_worker.set_capacity(0);
  v1::RegisterResponse registered;
  grpc::ClientContext context;
  SetDeadline(&context);
  status = workers_->Register(&context, bad_worker, &registered);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("capacity"), std::string::npos);

  // A worker cannot hoard a job's tasks: capacity is bounded.
  bad_worker.set_capacity(kMaxWorkerCapacity + 1);
  grpc::ClientContext hoarder;
  SetDeadline(&hoarder);
  status = workers_->Register(&hoarder, bad_worker, &registered);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("capacity: 65 is outside 1..64"), std::string::npos)
      << status.error_message();
}

TEST_F(SchedulerServiceTest, StreamWithoutHelloIsRefused) {
  grpc::ClientContext context;
  SetDeadline(&context);
  auto stream = workers_->Connect(&context);
  v1::WorkerMessage heartbeat;
  heartbeat.mutable_heartbeat()->set_sequence(1);
  stream->Write(heartbeat);
  stream->WritesDone();
  v1::SchedulerMessage ignored;
  while (stream->Read(&ignored)) {
  }
  const grpc::Status status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << status.error_message();
}

TEST_F(SchedulerServiceTest, FakeWorkerCompletesAJobAndTheProfileIsServed) {
  const std::string session = Register("w1", /*n_layers=*/2, /*capacity=*/2);
  v1::SubmitJobResponse submitted;
  ASSERT_TRUE(Submit(OneSampleJob(), &submitted).ok());
  const std::string job_id = submitted.job().job_id();

  // A watcher from the start: snapshot first, a terminal state change last, then OK.
  std::vector<v1::JobEvent> events;
  grpc::Status watch_status;
  std::thread watcher([&] {
    grpc::ClientContext context;
    SetDeadline(&context, kStreamTimeout);
    v1::WatchJobRequest request;
    request.set_job_id(job_id);
    auto reader = calibration_->WatchJob(&context, request);
    v1::JobEvent event;
    while (reader->Read(&event)) events.push_back(event);
    watch_status = reader->Finish();
  });

  FakeWorker worker(workers_.get(), "w1", session);
  std::vector<v1::TaskAssignment> tasks = worker.ReadAssignments(2);
  ASSERT_EQ(tasks.size(), 2u);

  {
    v1::GetJobDataRequest request;
    request.set_job_id(job_id);
    request.set_worker_id("w1");
    v1::GetJobDataResponse data;
    grpc::ClientContext context;
    SetDeadline(&context);
    ASSERT_TRUE(workers_->GetJobData(&context, request, &data).ok());
    EXPECT_EQ(data.data().builtin(), "mixed");
    // Only a worker holding a task of the job reads its data.
    request.set_worker_id("w2");
    grpc::ClientContext other;
    SetDeadline(&other);
    EXPECT_NE(workers_->GetJobData(&other, request, &data).error_code(), grpc::StatusCode::OK);
  }

  std::map<int32_t, double> kl_of_layer = {{0, 0.25}, {1, 1.5}};
  for (const v1::TaskAssignment& task : tasks) {
    EXPECT_EQ(task.job_id(), job_id);
    EXPECT_EQ(task.model_hash(), kHash);
    EXPECT_EQ(task.sample(), 0);
    EXPECT_EQ(task.params().trials(), 2);
    v1::WorkerMessage accepted;
    accepted.mutable_task_accepted()->set_task_id(task.task_id());
    ASSERT_TRUE(worker.Send(accepted));
    for (int trial = 0; trial < 2; ++trial) {
      ASSERT_TRUE(
          worker.Send(TrialResultMessage(task, trial, kl_of_layer[task.layer()] * (trial + 1))));
    }
    ASSERT_TRUE(worker.Send(TaskDoneMessage(task)));
  }

  const v1::Job job = WaitForState(job_id, v1::JOB_STATE_SUCCEEDED);
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.DebugString();
  EXPECT_EQ(job.profile_version(), 1);
  EXPECT_EQ(job.progress().tasks_done(), 2);
  EXPECT_EQ(job.progress().trials_done(), 4);

  watcher.join();
  EXPECT_TRUE(watch_status.ok()) << watch_status.error_message();
  ASSERT_GE(events.size(), 1u);
  EXPECT_TRUE(events.front().has_snapshot());
  if (events.size() == 1) {
    // The job finished before the watcher's first read: the snapshot itself is terminal.
    EXPECT_EQ(events.front().snapshot().state(), v1::JOB_STATE_SUCCEEDED);
  } else {
    ASSERT_TRUE(events.back().has_state_change());
    EXPECT_EQ(events.back().state_change().current(), v1::JOB_STATE_SUCCEEDED);
  }

  v1::Profile profile;
  ASSERT_TRUE(GetProfile(kHash, &profile).ok());
  EXPECT_EQ(profile.version(), 1);
  EXPECT_EQ(profile.job_id(), job_id);
  EXPECT_EQ(profile.model().n_layers(), 2);
  ASSERT_EQ(profile.layers_size(), 2);
  EXPECT_EQ(profile.layers(0).layer(), 0);
  EXPECT_DOUBLE_EQ(profile.layers(0).mean_kl(), 0.375);  // (0.25 + 0.5) / 2
  EXPECT_DOUBLE_EQ(profile.layers(1).mean_kl(), 2.25);   // (1.5 + 3) / 2
  EXPECT_EQ(profile.layers(1).count(), 2);

  v1::GetBudgetMapRequest budget_request;
  budget_request.set_model_hash(kHash);
  budget_request.mutable_params()->set_average_tokens(100);
  v1::BudgetMap budget;
  {
    grpc::ClientContext context;
    SetDeadline(&context);
    const grpc::Status status = calibration_->GetBudgetMap(&context, budget_request, &budget);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  ASSERT_EQ(budget.tokens_size(), 2);
  EXPECT_EQ(budget.tokens(0) + budget.tokens(1), 200);
  EXPECT_LT(budget.tokens(0), budget.tokens(1)) << "layer 1 is the more sensitive";
  EXPECT_EQ(budget.profile_version(), 1);
  EXPECT_FALSE(budget.formatted_json().empty());

  v1::ListProfilesResponse profiles;
  {
    grpc::ClientContext context;
    SetDeadline(&context);
    ASSERT_TRUE(calibration_->ListProfiles(&context, v1::ListProfilesRequest(), &profiles).ok());
  }
  ASSERT_EQ(profiles.profiles_size(), 1);
  EXPECT_EQ(profiles.profiles(0).layers_size(), 0);

  EXPECT_TRUE(worker.End().ok());
}

TEST_F(SchedulerServiceTest, ListJobTasksShowsLeasesThenTheWorkerAndVersionThatCompletedEach) {
  const std::string version = "ripplekv 9.8.7 (abcdefabcdef)";
  const std::string session = Register("w1", /*n_layers=*/2, /*capacity=*/2, version);
  const std::string job_id = SubmitOne();
  auto list = [&](const std::string& id, int32_t page_size, const std::string& token,
                  v1::ListJobTasksResponse* out) {
    v1::ListJobTasksRequest request;
    request.set_job_id(id);
    request.set_page_size(page_size);
    request.set_page_token(token);
    grpc::ClientContext context;
    SetDeadline(&context);
    out->Clear();
    return calibration_->ListJobTasks(&context, request, out);
  };

  FakeWorker worker(workers_.get(), "w1", session);
  std::vector<v1::TaskAssignment> tasks = worker.ReadAssignments(2);
  ASSERT_EQ(tasks.size(), 2u);
  v1::ListJobTasksResponse page;
  ASSERT_TRUE(list(job_id, 0, "", &page).ok());
  ASSERT_EQ(page.tasks_size(), 2);
  EXPECT_TRUE(page.next_page_token().empty());
  for (int i = 0; i < 2; ++i) {
    const v1::JobTask& t = page.tasks(i);
    EXPECT_EQ(t.sample(), 0);
    EXPECT_EQ(t.layer(), i) << "in (sample, layer) order";
    EXPECT_EQ(t.state(), v1::TASK_STATE_LEASED);
    EXPECT_EQ(t.lease_owner(), "w1");
    EXPECT_GT(t.lease_deadline().seconds(), 0);
    EXPECT_EQ(t.attempts(), 1);
    EXPECT_TRUE(t.completed_by().empty());
  }

  for (const v1::TaskAssignment& task : tasks) {
    for (int trial = 0; trial < 2; ++trial) {
      ASSERT_TRUE(worker.Send(TrialResultMessage(task, trial, 0.5 + task.layer())));
    }
    ASSERT_TRUE(worker.Send(TaskDoneMessage(task)));
  }
  const v1::Job job = WaitForState(job_id, v1::JOB_STATE_SUCCEEDED);
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.DebugString();

  // One task a page: two pages, then the end.
  std::string token;
  for (int layer = 0; layer < 2; ++layer) {
    ASSERT_TRUE(list(job_id, 1, token, &page).ok());
    ASSERT_EQ(page.tasks_size(), 1);
    const v1::JobTask& t = page.tasks(0);
    EXPECT_EQ(t.layer(), layer);
    EXPECT_EQ(t.state(), v1::TASK_STATE_DONE);
    EXPECT_TRUE(t.lease_owner().empty());
    EXPECT_FALSE(t.has_lease_deadline());
    EXPECT_EQ(t.attempts(), 1);
    EXPECT_EQ(t.completed_by(), "w1");
    EXPECT_EQ(t.completed_by_version(), version);
    token = page.next_page_token();
    EXPECT_EQ(token.empty(), layer == 1);
  }

  EXPECT_EQ(list("", 0, "", &page).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(list("999999", 0, "", &page).error_code(), grpc::StatusCode::NOT_FOUND);
  const grpc::Status bad_token = list(job_id, 0, "x1", &page);
  EXPECT_EQ(bad_token.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(bad_token.error_message().find("page_token"), std::string::npos)
      << bad_token.error_message();
  EXPECT_TRUE(worker.End().ok());
}

TEST_F(SchedulerServiceTest, BudgetMapOfAProfileMissingALayerIsFailedPrecondition) {
  const std::string session = Register("w1", /*n_layers=*/2, /*capacity=*/1);
  v1::SubmitJobRequest request = OneSampleJob();
  request.mutable_spec()->mutable_params()->add_layers(1);  // layer 0 is never measured
  v1::SubmitJobResponse submitted;
  ASSERT_TRUE(Submit(request, &submitted).ok());
  FakeWorker worker(workers_.get(), "w1", session);
  std::vector<v1::TaskAssignment> tasks = worker.ReadAssignments(1);
  ASSERT_EQ(tasks.size(), 1u);
  for (int trial = 0; trial < 2; ++trial) {
    v1::WorkerMessage result;
    v1::TrialResult* r = result.mutable_trial_result();
    r->set_task_id(tasks[0].task_id());
    r->set_job_id(tasks[0].job_id());
    r->set_sample(tasks[0].sample());
    r->set_layer(tasks[0].layer());
    r->set_trial(trial);
    r->set_kl(0.5);
    ASSERT_TRUE(worker.Send(result));
  }
  v1::WorkerMessage done;
  done.mutable_task_done()->set_task_id(tasks[0].task_id());
  ASSERT_TRUE(worker.Send(done));
  v1::Job job;
  for (int i = 0; i < 500; ++i) {
    ASSERT_TRUE(GetJob(submitted.job().job_id(), &job).ok());
    if (job.state() == v1::JOB_STATE_SUCCEEDED) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.DebugString();

  v1::GetBudgetMapRequest budget_request;
  budget_request.set_model_hash(kHash);
  budget_request.mutable_params()->set_average_tokens(100);
  v1::BudgetMap budget;
  grpc::ClientContext context;
  SetDeadline(&context);
  const grpc::Status status = calibration_->GetBudgetMap(&context, budget_request, &budget);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << status.error_message();
  EXPECT_NE(status.error_message().find("layer 0"), std::string::npos) << status.error_message();
  EXPECT_TRUE(worker.End().ok());
}

TEST_F(SchedulerServiceTest, CancelSendsTheWorkerATaskCancellation) {
  const std::string session = Register("w1", /*n_layers=*/2, /*capacity=*/1);
  v1::SubmitJobResponse submitted;
  ASSERT_TRUE(Submit(OneSampleJob(), &submitted).ok());
  FakeWorker worker(workers_.get(), "w1", session);
  std::vector<v1::TaskAssignment> tasks = worker.ReadAssignments(1);
  ASSERT_EQ(tasks.size(), 1u);

  v1::Job cancelled;
  ASSERT_TRUE(Cancel(submitted.job().job_id(), &cancelled).ok());
  v1::SchedulerMessage message;
  bool got = false;
  while (!got && worker.Read(&message)) {
    if (message.has_task_cancellation()) {
      EXPECT_EQ(message.task_cancellation().task_id(), tasks[0].task_id());
      got = true;
    }
  }
  EXPECT_TRUE(got);
  EXPECT_TRUE(worker.End().ok());
}

TEST_F(SchedulerServiceTest, DataSourceFormatAndStrictReachWorkersAsSubmitted) {
  Register("w0");  // makes the model's layer count known for the submits
  // A worker gets a job's data only while it holds one of its tasks: each call registers a new
  // worker that takes every pending task, then asks.
  int workers = 0;
  auto job_data = [&](const std::string& job_id) {
    const std::string worker_id = absl::StrCat("w", ++workers);
    FakeWorker worker(workers_.get(), worker_id,
                      Register(worker_id, 2, /*capacity=*/kMaxWorkerCapacity));
    EXPECT_EQ(worker.ReadAssignments(2).size(), 2u);
    v1::GetJobDataRequest request;
    request.set_job_id(job_id);
    request.set_worker_id(worker_id);
    v1::GetJobDataResponse data;
    grpc::ClientContext context;
    SetDeadline(&context);
    EXPECT_TRUE(workers_->GetJobData(&context, request, &data).ok());
    EXPECT_TRUE(worker.End().ok());
    return data.data();
  };
  v1::SubmitJobRequest by_path = OneSampleJob();
  by_path.mutable_spec()->mutable_data()->set_path("/data/calibration.txt");
  by_path.mutable_spec()->mutable_data()->set_format(v1::DATA_FORMAT_JSONL);
  by_path.mutable_spec()->mutable_data()->set_strict(true);
  v1::SubmitJobResponse submitted;
  ASSERT_TRUE(Submit(by_path, &submitted).ok());
  v1::CalibrationData data = job_data(submitted.job().job_id());
  EXPECT_EQ(data.path(), "/data/calibration.txt");
  EXPECT_EQ(data.format(), v1::DATA_FORMAT_JSONL);
  EXPECT_TRUE(data.strict());

  v1::SubmitJobRequest inline_text = OneSampleJob();
  inline_text.mutable_spec()->mutable_data()->set_text("{not JSON, just prose}");
  ASSERT_TRUE(Submit(inline_text, &submitted).ok());
  data = job_data(submitted.job().job_id());
  EXPECT_EQ(data.source_case(),
            v1::CalibrationData::kText);  // kept as text, whatever it starts with
  EXPECT_EQ(data.text(), "{not JSON, just prose}");
  EXPECT_FALSE(data.strict());

  for (const char* name : {"tom-sawyer", "sherlock-holmes", "code", "docs", "mixed"}) {
    v1::SubmitJobRequest named = OneSampleJob();
    named.mutable_spec()->mutable_data()->set_builtin(name);
    ASSERT_TRUE(Submit(named, &submitted).ok()) << name;
    EXPECT_EQ(job_data(submitted.job().job_id()).builtin(), name);
  }

  v1::SubmitJobRequest unknown_corpus = OneSampleJob();
  unknown_corpus.mutable_spec()->mutable_data()->set_builtin("moby-dick");
  const grpc::Status status = Submit(unknown_corpus, &submitted);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("spec.data.builtin"), std::string::npos);
  EXPECT_NE(status.error_message().find("(mixed, sherlock-holmes, tom-sawyer, code, docs)"),
            std::string::npos)
      << status.error_message();
}

TEST_F(SchedulerServiceTest, JobFailsWhenItsOnlyWorkerCannotReadItsData) {
  const std::string session = Register("w1", /*n_layers=*/2, /*capacity=*/1);
  v1::SubmitJobResponse submitted;
  ASSERT_TRUE(Submit(OneSampleJob(), &submitted).ok());
  FakeWorker worker(workers_.get(), "w1", session);
  std::vector<v1::TaskAssignment> tasks = worker.ReadAssignments(1);
  ASSERT_EQ(tasks.size(), 1u);
  v1::WorkerMessage refusal;
  refusal.mutable_task_refused()->set_task_id(tasks[0].task_id());
  refusal.mutable_task_refused()->set_reason(v1::REFUSAL_REASON_DATA_UNAVAILABLE);
  refusal.mutable_task_refused()->set_message("/data/x.jsonl: no such file");
  ASSERT_TRUE(worker.Send(refusal));
  v1::Job job;
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(GetJob(submitted.job().job_id(), &job).ok());
    if (job.state() == v1::JOB_STATE_FAILED) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(job.state(), v1::JOB_STATE_FAILED);
  EXPECT_NE(job.error().message().find("no such file"), std::string::npos) << job.error().message();
  EXPECT_TRUE(worker.End().ok());
}

TEST_F(SchedulerServiceTest, WatchOfAnUnknownJobIsNotFound) {
  grpc::ClientContext context;
  SetDeadline(&context);
  v1::WatchJobRequest request;
  request.set_job_id("999");
  auto reader = calibration_->WatchJob(&context, request);
  v1::JobEvent event;
  EXPECT_FALSE(reader->Read(&event));
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(SchedulerServiceTest, HealthServiceAnswersServing) {
  // grpc.health.v1.HealthCheckRequest{service: "ripplekv.v1.CalibrationService"} by hand: the
  // health messages are not in our generated code.
  const std::string service = "ripplekv.v1.CalibrationService";
  std::string request = std::string(1, '\x0a') + static_cast<char>(service.size()) + service;
  grpc::GenericStub stub(grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->port()),
                                             grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  SetDeadline(&context);
  grpc::CompletionQueue queue;
  grpc::Slice slice(request);
  grpc::ByteBuffer buffer(&slice, 1);
  auto call = stub.PrepareUnaryCall(&context, "/grpc.health.v1.Health/Check", buffer, &queue);
  call->StartCall();
  grpc::ByteBuffer reply;
  grpc::Status status;
  call->Finish(&reply, &status, reinterpret_cast<void*>(1));
  void* tag = nullptr;
  bool ok = false;
  ASSERT_EQ(queue.AsyncNext(&tag, &ok, std::chrono::system_clock::now() + kCallTimeout),
            grpc::CompletionQueue::GOT_EVENT);
  ASSERT_TRUE(status.ok()) << status.error_message();
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(reply.Dump(&slices).ok());
  std::string bytes;
  for (const grpc::Slice& s : slices)
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  EXPECT_EQ(bytes, std::string("\x08\x01"));  // status: SERVING
}

TEST(ConvertTest, StatusCodesMapOneToOne) {
  for (int code = 0; code <= 16; ++code) {
    const Status status(static_cast<absl::StatusCode>(code), code == 0 ? "" : "why");
    const grpc::Status grpc_status = ToGrpcStatus(status);
    EXPECT_EQ(static_cast<int>(grpc_status.error_code()), code);
    EXPECT_EQ(FromGrpcStatus(grpc_status), status);
  }
}

TEST(ConvertTest, TaskIdsRoundTrip) {
  const LeaseId lease{.key = {42, 3, 17}, .attempt = 5};
  EXPECT_EQ(FormatTaskId(lease), "42-3-17-5");
  StatusOr<LeaseId> parsed = ParseTaskId(FormatTaskId(lease), "task_id");
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(*parsed, lease);
  EXPECT_FALSE(ParseTaskId("42-3", "task_id").ok());
  EXPECT_FALSE(ParseTaskId("a-b-c-d", "task_id").ok());
}

TEST(ConvertTest, AlphaIsCarriedBitForBit) {
  v1::SubmitJobRequest request = OneSampleJob();
  request.mutable_spec()->mutable_params()->set_alpha(0.1f);
  StatusOr<SubmitRequest> submit = SubmitRequestFromProto(request);
  ASSERT_TRUE(submit.ok()) << submit.status();
  EXPECT_EQ(submit->spec.params.alpha, static_cast<double>(0.1f));
  v1::CalibrationParams back;
  v1::CalibrationParamsToProto(submit->spec.params, &back);
  EXPECT_EQ(back.alpha(), 0.1f);
}

}  // namespace
}  // namespace ripplekv::scheduler::service
