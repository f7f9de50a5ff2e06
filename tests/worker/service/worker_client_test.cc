// The worker's gRPC client against a fake in-process WorkerService on loopback.
#include "worker/service/worker_client.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include "grpcpp/grpcpp.h"
#include "ripplekv/v1/worker.grpc.pb.h"
#include "tests/worker/engine/tiny_model.h"
#include "tests/worker/tokenizer/test_vocab.h"

namespace ripplekv::worker {
namespace {

namespace pb = ::ripplekv::v1;
using namespace std::chrono_literals;
using ::testing::HasSubstr;

const std::string kHash(64, 'a');

std::string Text(size_t n) {
  std::mt19937 rng(5);
  std::string s;
  for (size_t i = 0; i < n; ++i) s.push_back(static_cast<char>('a' + rng() % 26));
  return s;
}

// Hands `assignment` (when set) to the first stream, records everything a worker sends.
class FakeScheduler final : public pb::WorkerService::Service {
 public:
  grpc::Status Register(grpc::ServerContext*, const pb::RegisterRequest* req,
                        pb::RegisterResponse* resp) override {
    std::lock_guard<std::mutex> lock(mu_);
    registers_.push_back(*req);
    cv_.notify_all();
    if (!register_errors_.empty()) {
      const grpc::Status error = register_errors_.front();
      register_errors_.pop_front();
      return error;
    }
    ++registrations_;
    last_register_ = *req;
    resp->set_session_id("session-" + std::to_string(registrations_));
    resp->mutable_heartbeat_interval()->set_nanos(50'000'000);
    resp->mutable_lease_timeout()->set_seconds(1);
    cv_.notify_all();
    return grpc::Status::OK;
  }

  grpc::Status Connect(
      grpc::ServerContext*,
      grpc::ServerReaderWriter<pb::SchedulerMessage, pb::WorkerMessage>* stream) override {
    pb::WorkerMessage msg;
    if (!stream->Read(&msg) || !msg.has_hello()) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "hello first");
    }
    std::optional<grpc::Status> end;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++connects_;
      cv_.notify_all();
      if (!stream_ends_.empty()) {
        end = stream_ends_.front();
        stream_ends_.pop_front();
      }
    }
    if (end) return *end;
    std::vector<pb::TaskAssignment> assignments;
    {
      std::lock_guard<std::mutex> lock(mu_);
      std::swap(assignments, assignments_);
    }
    for (const pb::TaskAssignment& assignment : assignments) {
      pb::SchedulerMessage out;
      *out.mutable_task_assignment() = assignment;
      stream->Write(out);
    }
    std::optional<pb::Quarantined> quarantine;
    {
      std::lock_guard<std::mutex> lock(mu_);
      std::swap(quarantine, quarantine_);
    }
    if (quarantine) {  // as the scheduler does: the message, then the end of the stream
      pb::SchedulerMessage out;
      *out.mutable_quarantined() = *quarantine;
      stream->Write(out);
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "quarantined");
    }
    while (stream->Read(&msg)) {
      std::lock_guard<std::mutex> lock(mu_);
      if (msg.has_heartbeat()) {
        last_heartbeat_ = msg.heartbeat();
        ++heartbeats_;
      } else {
        received_.push_back(msg);
      }
      cv_.notify_all();
    }
    return grpc::Status::OK;
  }

  grpc::Status GetJobData(grpc::ServerContext*, const pb::GetJobDataRequest* req,
                          pb::GetJobDataResponse* resp) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++job_data_calls_;
    if (req->job_id() != "job1") return grpc::Status(grpc::StatusCode::NOT_FOUND, "no job");
    if (data_) {
      *resp->mutable_data() = *data_;
    } else {
      resp->mutable_data()->set_text(Text(200));
    }
    return grpc::Status::OK;
  }

  // The data GetJobData answers for job1 (default: inline text).
  void SetData(pb::CalibrationData data) {
    std::lock_guard<std::mutex> lock(mu_);
    data_ = std::move(data);
  }

  // Sent (in the order set) when the next stream connects.
  void SetAssignment(pb::TaskAssignment a) {
    std::lock_guard<std::mutex> lock(mu_);
    assignments_.push_back(std::move(a));
  }
  // Waits up to `timeout` for `pred` (called with the lock held).
  bool WaitFor(std::chrono::milliseconds timeout, const std::function<bool()>& pred) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, pred);
  }

  std::mutex mu_;
  std::condition_variable cv_;
  int registrations_ = 0;
  int connects_ = 0;
  int heartbeats_ = 0;
  int job_data_calls_ = 0;
  pb::RegisterRequest last_register_;
  std::vector<pb::RegisterRequest> registers_;  // every Register, refused ones included
  std::deque<grpc::Status> register_errors_;    // answered to the next Registers, in order
  std::deque<grpc::Status> stream_ends_;        // the next streams end with these after hello
  std::optional<pb::Quarantined> quarantine_;   // sent on the next stream, which then ends
  pb::Heartbeat last_heartbeat_;
  std::vector<pb::WorkerMessage> received_;
  std::vector<pb::TaskAssignment> assignments_;
  std::optional<pb::CalibrationData> data_;
};

struct RunningServer {
  std::unique_ptr<grpc::Server> server;
  int port = 0;
  RunningServer() = default;
  RunningServer(RunningServer&&) = default;
  void Stop() {
    if (server) server->Shutdown(std::chrono::system_clock::now() + 500ms);
    server.reset();
  }
  ~RunningServer() { Stop(); }
};

RunningServer Start(FakeScheduler* service, int port) {
  RunningServer r;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:" + std::to_string(port), grpc::InsecureServerCredentials(),
                           &r.port);
  builder.RegisterService(service);
  r.server = builder.BuildAndStart();
  return r;
}

struct Worker {
  Model model;
  std::unique_ptr<Transformer> transformer;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<TaskRunner> runner;
  std::unique_ptr<WorkerClient> client;
  std::thread thread;
  Status result;

  // memory_limit_bytes: the worker's limit (0: none), also reported at registration.
  // data_dirs: where path data may be read (none: path data refused).
  // prefetch: WorkerClientOptions::prefetch.
  // configure: changes the client's options last.
  explicit Worker(int port, int64_t memory_limit_bytes = 0, DataDirs data_dirs = DataDirs(),
                  int prefetch = 1,
                  const std::function<void(WorkerClientOptions&)>& configure = nullptr) {
    model = testing::MakeTinyModel({.n_layers = 3, .vocab = 256});
    transformer = std::make_unique<Transformer>(Transformer::Create(model, {}).value());
    tokenizer = CreateTokenizer(testing::ByteLevelSpec({})).value();
    runner = std::make_unique<TaskRunner>(
        *transformer, tokenizer.get(), kHash,
        TaskRunnerOptions{.memory_limit_bytes = memory_limit_bytes, .data_dirs = data_dirs});
    WorkerClientOptions options;
    options.memory.limit_bytes = memory_limit_bytes;
    options.memory.weight_bytes = WeightBytes(model);
    options.scheduler_address = "127.0.0.1:" + std::to_string(port);
    options.worker_id = "test-worker";
    options.prefetch = prefetch;
    options.register_deadline = 2000ms;
    options.job_data_deadline = 2000ms;
    if (configure) configure(options);
    WorkerModelInfo info{.hash = kHash, .architecture = "llama", .n_layers = 3};
    client = std::make_unique<WorkerClient>(options, info, runner.get());
    thread = std::thread([this] { result = client->Run(); });
  }
  void Drain() {
    client->RequestDrain();
    if (thread.joinable()) thread.join();
  }
  ~Worker() { Drain(); }
};

pb::TaskAssignment Assignment(const std::string& hash) {
  pb::TaskAssignment a;
  a.set_task_id("task-1");
  a.set_job_id("job1");
  a.set_model_hash(hash);
  a.set_sample(1);
  a.set_layer(2);
  pb::CalibrationParams* p = a.mutable_params();
  p->set_mode(pb::PERTURB_MODE_CACHE);
  p->set_alpha(0.5f);
  p->set_trials(3);
  p->set_seed(11);
  p->set_samples(2);
  p->set_context_len(24);
  p->set_probe_len(6);
  return a;
}

TEST(WorkerClientTest, RunsAnAssignedTaskAndReportsItsTrialsInTaskDoneThenDrains) {
  FakeScheduler service;
  service.SetAssignment(Assignment(kHash));
  RunningServer server = Start(&service, 0);
  ASSERT_GT(server.port, 0);
  Worker worker(server.port);

  auto done = [&] {
    for (const auto& m : service.received_)
      if (m.has_task_done()) return true;
    return false;
  };
  ASSERT_TRUE(service.WaitFor(20s, done)) << "no task_done within 20 s";

  // Expected values: the same task run directly by the core.
  TaskRunner reference(*worker.transformer, worker.tokenizer.get(), kHash, {});
  TaskSpec spec{.task_id = "x", .job_id = "job1", .model_hash = kHash, .sample = 1, .layer = 2};
  spec.params = {
      .alpha = 0.5, .trials = 3, .seed = 11, .samples = 2, .context_len = 24, .probe_len = 6};
  JobData data;
  data.source = JobData::Source::kText;
  data.text = Text(200);
  ASSERT_TRUE(reference.LoadJob("job1", data, DataOptionsOf(spec.params)).ok());
  auto want = reference.Run(spec);
  ASSERT_TRUE(want.ok()) << want.status();

  {
    std::lock_guard<std::mutex> lock(service.mu_);
    EXPECT_EQ(service.last_register_.model().model_hash(), kHash);
    EXPECT_EQ(service.job_data_calls_, 1);
    EXPECT_EQ(service.last_register_.capacity(), 2);  // the running task and one queued
    ASSERT_EQ(service.received_.size(), 2u);          // accepted, done carrying the 3 trials
    EXPECT_EQ(service.received_[0].task_accepted().task_id(), "task-1");
    const pb::TaskDone& d = service.received_[1].task_done();
    EXPECT_FALSE(d.has_error()) << d.error().message();
    EXPECT_EQ(d.task_id(), "task-1");
    ASSERT_EQ(d.results_size(), 3);
    for (int t = 0; t < 3; ++t) {
      const pb::TrialResult& r = d.results(t);
      EXPECT_EQ(r.task_id(), "task-1");
      EXPECT_EQ(r.job_id(), "job1");
      EXPECT_EQ(r.trial(), t);
      EXPECT_EQ(r.layer(), 2);
      EXPECT_EQ(r.sample(), 1);
      EXPECT_EQ(r.kl(), want->kl[t]) << "trial " << t;
    }
  }
  // Heartbeats now advertise the prepared sample.
  ASSERT_TRUE(service.WaitFor(5s, [&] {
    return service.last_heartbeat_.cached_samples_size() == 1 &&
           service.last_heartbeat_.cached_samples(0).sample() == 1;
  }));

  worker.Drain();
  EXPECT_TRUE(worker.result.ok()) << worker.result;
  std::lock_guard<std::mutex> lock(service.mu_);
  EXPECT_TRUE(service.received_.back().has_draining());
}

TEST(WorkerClientTest, QueuedTasksRunInTheOrderTheyCameAndCapacityCountsThem) {
  FakeScheduler service;
  pb::TaskAssignment first = Assignment(kHash);
  pb::TaskAssignment second = Assignment(kHash);
  second.set_task_id("task-2");
  second.set_layer(1);
  service.SetAssignment(first);
  service.SetAssignment(second);  // arrives while the first runs: queued
  RunningServer server = Start(&service, 0);
  ASSERT_GT(server.port, 0);
  Worker worker(server.port, 0, DataDirs(), /*prefetch=*/3);
  std::vector<std::string> done;
  ASSERT_TRUE(service.WaitFor(20s, [&] {
    done.clear();
    for (const auto& m : service.received_) {
      if (m.has_task_done()) done.push_back(m.task_done().task_id());
    }
    return done.size() == 2;
  }));
  EXPECT_EQ(done, (std::vector<std::string>{"task-1", "task-2"}));
  std::lock_guard<std::mutex> lock(service.mu_);
  EXPECT_EQ(service.last_register_.capacity(), 4);
  EXPECT_EQ(service.job_data_calls_, 1);  // the job's data once, for both
}

TEST(WorkerClientTest, ADeviceFaultFailsTheTaskHandsBackTheQueueAndEndsRun) {
  FakeScheduler service;
  pb::TaskAssignment first = Assignment(kHash);
  pb::TaskAssignment second = Assignment(kHash);
  second.set_task_id("task-2");
  service.SetAssignment(first);
  service.SetAssignment(second);
  RunningServer server = Start(&service, 0);
  ASSERT_GT(server.port, 0);
  // The device faults during the first task (as kernels::DeviceFault would then report).
  Worker worker(server.port, 0, DataDirs(), /*prefetch=*/3, [](WorkerClientOptions& o) {
    o.device_fault = [] { return std::string("CausalAttention: an illegal memory access"); };
  });
  worker.thread.join();  // Run ends by itself
  EXPECT_TRUE(IsDeviceFaultEnd(worker.result)) << worker.result;
  EXPECT_FALSE(IsSchedulerRefusal(worker.result));
  EXPECT_THAT(worker.result.message(), HasSubstr("an illegal memory access"));
  std::lock_guard<std::mutex> lock(service.mu_);
  int done = 0;
  for (const pb::WorkerMessage& m : service.received_) {
    if (m.has_task_done()) {  // failed as retryable elsewhere: Unavailable, no results
      ++done;
      EXPECT_EQ(m.task_done().task_id(), "task-1");
      EXPECT_EQ(m.task_done().error().code(), static_cast<int>(absl::StatusCode::kUnavailable));
      EXPECT_THAT(m.task_done().error().message(), HasSubstr("device fault"));
      EXPECT_EQ(m.task_done().results_size(), 0);
    }
    if (m.has_task_refused()) {  // the queued task goes back
      EXPECT_EQ(m.task_refused().task_id(), "task-2");
      EXPECT_EQ(m.task_refused().reason(), pb::REFUSAL_REASON_DRAINING);
    }
  }
  EXPECT_EQ(done, 1);
  EXPECT_TRUE(std::any_of(service.received_.begin(), service.received_.end(),
                          [](const pb::WorkerMessage& m) { return m.has_draining(); }));
}

TEST(WorkerClientTest, PrefetchOutsideItsRangeIsRefusedBeforeConnecting) {
  FakeScheduler service;
  RunningServer server = Start(&service, 0);
  ASSERT_GT(server.port, 0);
  Worker worker(server.port, 0, DataDirs(), /*prefetch=*/kMaxPrefetch + 1);
  worker.Drain();
  EXPECT_TRUE(absl::IsInvalidArgument(worker.result)) << worker.result;
  EXPECT_NE(worker.result.message().find("prefetch 64 is outside 0..63"), std::string::npos)
      << worker.result;
  std::lock_guard<std::mutex> lock(service.mu_);
  EXPECT_EQ(service.registrations_, 0);
}

TEST(WorkerClientTest, RefusesATaskForAnotherModel) {
  FakeScheduler service;
  service.SetAssignment(Assignment(std::string(64, 'b')));
  RunningServer server = Start(&service, 0);
  Worker worker(server.port);
  ASSERT_TRUE(service.WaitFor(10s, [&] { return !service.received_.empty(); }));
  std::lock_guard<std::mutex> lock(service.mu_);
  ASSERT_TRUE(service.received_[0].has_task_refused());
  EXPECT_EQ(service.received_[0].task_refused().reason(), pb::REFUSAL_REASON_MODEL_HASH_MISMATCH);
  EXPECT_EQ(service.job_data_calls_, 0);
}

// A job whose estimate exceeds the worker's limit is refused before its data is fetched, with a
// message naming the estimate, its terms and the limit; the registration reports the limit.
TEST(WorkerClientTest, RefusesAJobWhoseEstimatedMemoryExceedsTheLimit) {
  FakeScheduler service;
  service.SetAssignment(Assignment(kHash));
  RunningServer server = Start(&service, 0);
  const int64_t limit = int64_t{10} << 20;  // below the process share alone (kProcessBytes)
  Worker worker(server.port, limit);
  ASSERT_TRUE(service.WaitFor(10s, [&] { return !service.received_.empty(); }));
  std::lock_guard<std::mutex> lock(service.mu_);
  ASSERT_TRUE(service.received_[0].has_task_refused());
  const pb::TaskRefused& r = service.received_[0].task_refused();
  EXPECT_EQ(r.reason(), pb::REFUSAL_REASON_INSUFFICIENT_MEMORY);
  EXPECT_NE(r.message().find("job job1 needs an estimated "), std::string::npos) << r.message();
  for (const char* part : {"weights ", "KV cache ", "calibration scratch ", "process 22.0 MiB",
                           "but this worker's limit is 10.0 MiB"}) {
    EXPECT_NE(r.message().find(part), std::string::npos) << part << " in " << r.message();
  }
  EXPECT_EQ(service.job_data_calls_, 0);
  EXPECT_EQ(service.last_register_.worker_memory_limit_bytes(), limit);
  EXPECT_GT(service.last_register_.weight_bytes(), 0);
}

// A job whose data path lies outside the worker's data directories is refused as
// DATA_UNAVAILABLE with the generic message: a client reading the job's error learns nothing
// about the file (its existence, type or size), and a path inside is read.
TEST(WorkerClientTest, RefusesPathDataOutsideItsDataDirectoriesWithAGenericMessage) {
  std::string templ =
      (std::filesystem::temp_directory_path() / "ripplekv_worker_client_XXXXXX").string();
  ASSERT_NE(::mkdtemp(templ.data()), nullptr);
  const std::filesystem::path root = std::filesystem::canonical(templ);
  std::filesystem::create_directories(root / "data");
  std::filesystem::create_directories(root / "outside");
  const std::string secret = (root / "outside" / "secret.txt").string();
  std::ofstream(secret) << Text(200);
  const std::string inside = (root / "data" / "calib.txt").string();
  std::ofstream(inside) << Text(200);

  auto run = [&](const std::string& path) {
    FakeScheduler service;
    service.SetAssignment(Assignment(kHash));
    pb::CalibrationData data;
    data.set_path(path);
    service.SetData(data);
    RunningServer server = Start(&service, 0);
    Worker worker(server.port, 0, DataDirs::Open({(root / "data").string()}).value());
    EXPECT_TRUE(service.WaitFor(20s, [&] {
      for (const auto& m : service.received_) {
        if (m.has_task_refused() || m.has_task_done()) return true;
      }
      return false;
    }));
    worker.Drain();
    std::lock_guard<std::mutex> lock(service.mu_);
    return service.received_;
  };

  const std::vector<pb::WorkerMessage> refused = run(secret);
  ASSERT_FALSE(refused.empty());
  ASSERT_TRUE(refused[0].has_task_refused());
  const pb::TaskRefused& r = refused[0].task_refused();
  EXPECT_EQ(r.reason(), pb::REFUSAL_REASON_DATA_UNAVAILABLE);
  EXPECT_EQ(r.message(), "job job1 data: " + std::string(kDataPathRefused));
  for (const std::string& detail : {secret, std::string("secret"), std::string("200"),
                                    std::string("outside"), std::string("regular")}) {
    EXPECT_EQ(r.message().find(detail), std::string::npos) << detail << " in " << r.message();
  }

  const std::vector<pb::WorkerMessage> accepted = run(inside);
  ASSERT_FALSE(accepted.empty());
  EXPECT_TRUE(accepted[0].has_task_accepted());
  bool done = false;
  for (const auto& m : accepted) done = done || (m.has_task_done() && !m.task_done().has_error());
  EXPECT_TRUE(done);
  std::error_code ec;
  std::filesystem::remove_all(root, ec);
}

TEST(WorkerClientTest, RegistersAgainAfterTheSchedulerRestarts) {
  FakeScheduler first;
  RunningServer server = Start(&first, 0);
  const int port = server.port;
  Worker worker(port);
  ASSERT_TRUE(first.WaitFor(10s, [&] { return first.connects_ == 1 && first.heartbeats_ > 0; }));
  server.Stop();

  FakeScheduler second;
  RunningServer restarted = Start(&second, port);
  ASSERT_EQ(restarted.port, port);
  ASSERT_TRUE(second.WaitFor(15s, [&] { return second.connects_ >= 1 && second.heartbeats_ > 0; }))
      << "the worker did not reconnect within 15 s";
  EXPECT_GE(second.registrations_, 1);
  EXPECT_GE(worker.client->stats().registrations, 2);
  worker.Drain();
  EXPECT_TRUE(worker.result.ok()) << worker.result;
}

TEST(WorkerClientTest, AnIdHeldByAnotherLiveSessionEndsRunAtOnceNamingTheWayOut) {
  FakeScheduler service;
  service.register_errors_.push_back(grpc::Status(
      grpc::StatusCode::ALREADY_EXISTS, "worker test-worker is held by a live session on host b"));
  RunningServer server = Start(&service, 0);
  Worker worker(server.port);
  worker.thread.join();  // Run returns by itself: no drain
  EXPECT_TRUE(absl::IsAlreadyExists(worker.result)) << worker.result;
  EXPECT_TRUE(IsSchedulerRefusal(worker.result));
  EXPECT_NE(worker.result.message().find("live session on host b"), std::string::npos);
  EXPECT_NE(worker.result.message().find("--id"), std::string::npos);
  EXPECT_NE(worker.result.message().find("--replace"), std::string::npos);
  std::lock_guard<std::mutex> lock(service.mu_);
  EXPECT_EQ(service.registers_.size(), 1u) << "a refused id is not retried";
  EXPECT_EQ(service.connects_, 0);
}

TEST(WorkerClientTest, ARefusedRegistrationEndsRunWithTheSchedulersReason) {
  FakeScheduler service;
  service.register_errors_.push_back(
      grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                   "worker test-worker is quarantined until 2026-12-03T08:40:00Z: 3 failures"));
  RunningServer server = Start(&service, 0);
  Worker worker(server.port);
  worker.thread.join();
  EXPECT_TRUE(absl::IsFailedPrecondition(worker.result)) << worker.result;
  EXPECT_TRUE(IsSchedulerRefusal(worker.result));
  EXPECT_NE(worker.result.message().find("quarantined until 2026-12-03T08:40:00Z: 3 failures"),
            std::string::npos)
      << worker.result;
}

TEST(WorkerClientTest, AnUnavailableSchedulerIsRetriedUntilItAnswers) {
  FakeScheduler service;
  service.register_errors_.push_back(grpc::Status(grpc::StatusCode::UNAVAILABLE, "starting"));
  service.register_errors_.push_back(grpc::Status(grpc::StatusCode::UNAVAILABLE, "starting"));
  RunningServer server = Start(&service, 0);
  Worker worker(server.port, 0, DataDirs(), 1,
                [](WorkerClientOptions& o) { o.initial_backoff = 10ms; });
  ASSERT_TRUE(service.WaitFor(10s, [&] { return service.connects_ == 1; }));
  {
    std::lock_guard<std::mutex> lock(service.mu_);
    EXPECT_EQ(service.registers_.size(), 3u);
  }
  worker.Drain();
  EXPECT_TRUE(worker.result.ok()) << worker.result;
}

TEST(WorkerClientTest, AQuarantineOnTheStreamEndsRunWithItsReasonAndEnd) {
  FakeScheduler service;
  pb::Quarantined q;
  q.set_reason("3 failed attempts in 600 s");
  q.mutable_until()->set_seconds(1796287200);  // 2026-12-03T08:40:00Z
  service.quarantine_ = q;
  RunningServer server = Start(&service, 0);
  Worker worker(server.port);
  worker.thread.join();
  EXPECT_TRUE(absl::IsFailedPrecondition(worker.result)) << worker.result;
  EXPECT_TRUE(IsSchedulerRefusal(worker.result));
  EXPECT_NE(worker.result.message().find("until 2026-12-03T08:40:00Z: 3 failed attempts in 600 s"),
            std::string::npos)
      << worker.result;
  std::lock_guard<std::mutex> lock(service.mu_);
  EXPECT_EQ(service.registers_.size(), 1u) << "a quarantined worker does not register again";
}

TEST(WorkerClientTest, ReplaceIsAskedFirstAndAfterABrokenConnectionButNotAfterATakeover) {
  FakeScheduler service;
  // Stream 1 ends as a takeover by another process would; stream 2 as a broken connection.
  service.stream_ends_.push_back(grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                                              "session superseded by a newer Register"));
  service.stream_ends_.push_back(grpc::Status(grpc::StatusCode::UNAVAILABLE, "connection lost"));
  RunningServer server = Start(&service, 0);
  Worker worker(server.port, 0, DataDirs(), 1, [](WorkerClientOptions& o) {
    o.replace = true;
    o.numerics = "cpu-fp32/ripplekv test x86-64-v3 openblas-test";
    o.initial_backoff = 10ms;
  });
  ASSERT_TRUE(service.WaitFor(10s, [&] { return service.connects_ == 3; }));
  worker.Drain();
  EXPECT_TRUE(worker.result.ok()) << worker.result;
  std::lock_guard<std::mutex> lock(service.mu_);
  ASSERT_GE(service.registers_.size(), 3u);
  EXPECT_TRUE(service.registers_[0].replace()) << "--replace asks on the first Register";
  EXPECT_FALSE(service.registers_[1].replace()) << "never taken back after a takeover";
  EXPECT_TRUE(service.registers_[2].replace()) << "its own session may still look alive";
  for (const pb::RegisterRequest& r : service.registers_) {
    EXPECT_EQ(r.numerics(), "cpu-fp32/ripplekv test x86-64-v3 openblas-test");
  }
}

TEST(WorkerClientTest, ASchedulerThatEndsEverySessionAtOnceIsNotHammered) {
  FakeScheduler service;
  for (int i = 0; i < 200; ++i) service.stream_ends_.push_back(grpc::Status::OK);
  RunningServer server = Start(&service, 0);
  Worker worker(server.port, 0, DataDirs(), 1, [](WorkerClientOptions& o) {
    o.initial_backoff = 100ms;
    o.max_backoff = 2000ms;
  });
  std::this_thread::sleep_for(3s);
  worker.Drain();
  std::lock_guard<std::mutex> lock(service.mu_);
  // The backoff grows across sessions that end at once: delays drawn from [0, 100], [0, 200],
  // [0, 400] ... [0, 2000] ms add up to about 3 s after 7 registrations. Resetting it after
  // every successful Register, as before, made 30 in 3 s; 16 needs ten 2 s-capped draws
  // to sum under 2.5 s (probability about 3e-6).
  EXPECT_GE(service.registrations_, 2) << "it does come back";
  EXPECT_LE(service.registrations_, 15);
}

TEST(WorkerClientTest, WithoutReplaceTheFirstRegisterDoesNotAskToTakeOver) {
  FakeScheduler service;
  RunningServer server = Start(&service, 0);
  Worker worker(server.port);
  ASSERT_TRUE(service.WaitFor(10s, [&] { return service.connects_ == 1; }));
  worker.Drain();
  std::lock_guard<std::mutex> lock(service.mu_);
  ASSERT_EQ(service.registers_.size(), 1u);
  EXPECT_FALSE(service.registers_[0].replace());
}

}  // namespace
}  // namespace ripplekv::worker
