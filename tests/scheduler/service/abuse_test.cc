// Abuse of a real scheduler on loopback (docs/API.md, "Limits"):
//   * oversized requests are refused early with RESOURCE_EXHAUSTED or INVALID_ARGUMENT naming the
//     limit: a huge layers list, a huge path, a huge model layer count, a huge request to a
//     method other than SubmitJob, inline data over the limit; nothing is stored;
//   * parallel SubmitJobs with the most inline data all succeed, and the process's memory grows
//     by a bounded amount (measured and printed);
//   * 1,000 WatchJob clients that never read cost the scheduler no thread each (measured and
//     printed), the watcher limit refuses one more with RESOURCE_EXHAUSTED, and the streams end
//     when the job does; its worker is told the job ended.

#include <atomic>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "scheduler/service/convert.h"
#include "tests/scheduler/service/service_fixture.h"

namespace ripplekv::scheduler::service {
namespace {

// A field of /proc/self/status ("Threads", "VmRSS" in kB), or -1.
int64_t ProcStatus(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stoll(line.substr(field.size() + 1));
  }
  return -1;
}

class AbuseTest : public ServiceFixture {
 protected:
  void Configure(SchedulerServerOptions& options) override { options.max_watchers = 1'000; }

  size_t JobCount() {
    v1::ListJobsRequest request;
    request.set_page_size(1000);
    v1::ListJobsResponse response;
    grpc::ClientContext context;
    SetDeadline(&context);
    EXPECT_TRUE(calibration_->ListJobs(&context, request, &response).ok());
    return static_cast<size_t>(response.jobs_size());
  }
};

TEST_F(AbuseTest, OversizedRequestsAreRefusedEarlyNamingTheLimit) {
  Register("w1");
  auto expect = [&](const v1::SubmitJobRequest& request, grpc::StatusCode code,
                    const std::string& names) {
    v1::SubmitJobResponse response;
    const grpc::Status status = Submit(request, &response);
    EXPECT_EQ(status.error_code(), code) << status.error_message();
    EXPECT_NE(status.error_message().find(names), std::string::npos) << status.error_message();
  };
  v1::SubmitJobRequest layers = OneSampleJob();
  for (int i = 0; i < 100'000; ++i) layers.mutable_spec()->mutable_params()->add_layers(i % 2);
  expect(layers, grpc::StatusCode::RESOURCE_EXHAUSTED, "spec.params.layers: 100000 entries");
  v1::SubmitJobRequest path = OneSampleJob();
  std::string huge_path(1 << 20, 'p');
  huge_path[0] = '/';
  path.mutable_spec()->mutable_data()->set_path(huge_path);
  expect(path, grpc::StatusCode::RESOURCE_EXHAUSTED, "spec.data.path");
  v1::SubmitJobRequest n_layers = OneSampleJob();
  n_layers.mutable_spec()->mutable_model()->set_n_layers(1 << 30);
  expect(n_layers, grpc::StatusCode::INVALID_ARGUMENT, "spec.model.n_layers");
  v1::SubmitJobRequest too_much = OneSampleJob();
  too_much.mutable_spec()->mutable_data()->set_text(std::string(kMaxInlineDataBytes + 1, 'x'));
  expect(too_much, grpc::StatusCode::RESOURCE_EXHAUSTED, "inline data");
  v1::SubmitJobRequest over_the_wire = OneSampleJob();
  over_the_wire.mutable_spec()->mutable_data()->set_text(std::string(kMaxSubmitBytes, 'x'));
  v1::SubmitJobResponse ignored;
  EXPECT_EQ(Submit(over_the_wire, &ignored).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);

  v1::GetJobRequest get;
  get.set_job_id(std::string(kMaxRequestBytes + 1, '7'));
  v1::Job job;
  grpc::ClientContext context;
  SetDeadline(&context);
  const grpc::Status status = calibration_->GetJob(&context, get, &job);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(status.error_message().find("GetJob"), std::string::npos) << status.error_message();
  EXPECT_EQ(JobCount(), 0u) << "nothing refused was stored";
}

TEST_F(AbuseTest, ParallelMaximalSubmitsSucceedWithBoundedMemory) {
  Register("w1");
  constexpr int kThreads = 4, kEach = 2;
  const std::string data(kMaxInlineDataBytes, 'd');
  const int64_t rss_before_kb = ProcStatus("VmRSS");
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kEach; ++i) {
        v1::SubmitJobRequest request = OneSampleJob();
        request.mutable_spec()->mutable_data()->set_text(data);
        v1::SubmitJobResponse response;
        grpc::ClientContext context;
        context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
        if (calibration_->SubmitJob(&context, request, &response).ok()) ++ok;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const int64_t rss_after_kb = ProcStatus("VmRSS");
  EXPECT_EQ(ok, kThreads * kEach);
  EXPECT_EQ(JobCount(), static_cast<size_t>(kThreads * kEach));
  // Client and server share this process: each call holds its request on both sides (and the
  // store's write buffer); what matters is that nothing grows with the number of jobs stored.
  const double growth_mib = (rss_after_kb - rss_before_kb) / 1024.0;
  std::printf("[ measured ] %d parallel 32 MiB submits: RSS grew by %.0f MiB\n", kThreads * kEach,
              growth_mib);
  EXPECT_LT(growth_mib, 2048.0);
}

TEST_F(AbuseTest, AThousandWatchersThatNeverReadCostNoThreadEach) {
  FakeWorker worker(workers_.get(), "w1", Register("w1", 2, 1));
  const std::string job_id = SubmitOne();
  worker.Heartbeat(1);  // the job may have come after hello: a heartbeat fills the worker
  // Several connections: one carries at most max_streams_per_connection calls.
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  std::vector<std::unique_ptr<v1::CalibrationService::Stub>> stubs;
  for (int c = 0; c < 5; ++c) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    channels.push_back(grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", server_->port()),
                                                 grpc::InsecureChannelCredentials(), args));
    stubs.push_back(v1::CalibrationService::NewStub(channels.back()));
  }
  const int64_t threads_before = ProcStatus("Threads");
  struct Watch {
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReader<v1::JobEvent>> reader;
  };
  std::vector<std::unique_ptr<Watch>> watches;
  v1::WatchJobRequest request;
  request.set_job_id(job_id);
  for (int i = 0; i < 1'000; ++i) {
    auto watch = std::make_unique<Watch>();
    SetDeadline(&watch->context, std::chrono::seconds(60));
    watch->reader = stubs[i % stubs.size()]->WatchJob(&watch->context, request);
    watches.push_back(std::move(watch));
  }
  // Every stream is open once the server counts it (bounded wait).
  for (int i = 0; i < 200 && server_->open_watchers() < 1'000; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(server_->open_watchers(), 1'000u);
  const int64_t threads_after = ProcStatus("Threads");
  std::printf("[ measured ] 1000 open watchers: %lld -> %lld threads in the process\n",
              static_cast<long long>(threads_before), static_cast<long long>(threads_after));
  EXPECT_LT(threads_after - threads_before, 50) << "no thread per watcher";

  {  // The limit: one more is refused at once.
    grpc::ClientContext context;
    SetDeadline(&context);
    auto reader = calibration_->WatchJob(&context, request);
    v1::JobEvent event;
    EXPECT_FALSE(reader->Read(&event));
    const grpc::Status status = reader->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
    EXPECT_NE(status.error_message().find("1000 watch streams"), std::string::npos)
        << status.error_message();
  }

  // The job ends (the worker fails it): every stream, read now, ends with the state change.
  std::vector<v1::TaskAssignment> task = worker.ReadAssignments(1);
  ASSERT_EQ(task.size(), 1u);
  v1::WorkerMessage failed;
  failed.mutable_task_done()->set_task_id(task[0].task_id());
  failed.mutable_task_done()->mutable_error()->set_code(
      static_cast<int32_t>(absl::StatusCode::kInvalidArgument));
  failed.mutable_task_done()->mutable_error()->set_message("bad task");
  ASSERT_TRUE(worker.Send(failed));
  // The worker is told the job ended, so it can drop the job's data.
  bool told = false;
  v1::SchedulerMessage message;
  while (!told && worker.Read(&message)) {
    told = message.has_task_cancellation() && message.task_cancellation().job_id() == job_id;
  }
  EXPECT_TRUE(told) << "no job-level task_cancellation";
  int ended_with_failure = 0;
  for (std::unique_ptr<Watch>& watch : watches) {
    v1::JobEvent event;
    v1::JobState last = v1::JOB_STATE_UNSPECIFIED;
    while (watch->reader->Read(&event)) {
      if (event.has_snapshot()) last = event.snapshot().state();
      if (event.has_state_change()) last = event.state_change().current();
    }
    if (watch->reader->Finish().ok() && last == v1::JOB_STATE_FAILED) ++ended_with_failure;
  }
  EXPECT_EQ(ended_with_failure, 1'000);
  EXPECT_TRUE(worker.End().ok());
}

}  // namespace
}  // namespace ripplekv::scheduler::service
