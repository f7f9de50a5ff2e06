// TLS and bearer-token roles on a real SchedulerServer (docs/SECURITY.md): certificates and tokens
// made by deploy/local/make-tls in a temporary directory, a server on 127.0.0.1 with TLS, required
// client certificates and a token file, and clients built by proto/client_channel.h. Every RPC is
// called with no token, an unknown token and each role's token: exactly the allowed calls get past
// the check. Also: rejected calls change nothing, plaintext and foreign client certificates are
// refused, tokens never reach the log, and plaintext with tokens works on loopback only.

#include <fcntl.h>
#include <grpcpp/generic/generic_stub.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "grpc/health/v1/health.grpc.pb.h"
#include "base/file_io.h"
#include "proto/client_channel.h"
#include "ripplekv/v1/admin.grpc.pb.h"
#include "ripplekv/v1/calibration.grpc.pb.h"
#include "ripplekv/v1/rollout.grpc.pb.h"
#include "ripplekv/v1/worker.grpc.pb.h"
#include "scheduler/service/scheduler_server.h"
#include "spdlog/spdlog.h"
#include "tests/common/temp_dir.h"
#include "tests/scheduler/service/tls_fixture.h"

namespace ripplekv::scheduler::service {
namespace {

namespace fs = std::filesystem;
constexpr auto kCallTimeout = std::chrono::seconds(10);
const std::string kHash(64, 'a');
using ripplekv::testing::TempDir;

std::string Read(const fs::path& path) {
  StatusOr<std::string> text = ReadFileBounded(path.string(), 1 << 20);
  EXPECT_TRUE(text.ok()) << text.status();
  return text.value_or("");
}

// Every RPC of the scheduler's services, by full name.
const std::vector<std::string> kAllMethods = {
    "/ripplekv.v1.CalibrationService/GetJob",       "/ripplekv.v1.CalibrationService/ListJobs",
    "/ripplekv.v1.CalibrationService/WatchJob",     "/ripplekv.v1.CalibrationService/GetProfile",
    "/ripplekv.v1.CalibrationService/ListProfiles", "/ripplekv.v1.CalibrationService/GetBudgetMap",
    "/ripplekv.v1.CalibrationService/ListJobTasks", "/ripplekv.v1.CalibrationService/SubmitJob",
    "/ripplekv.v1.CalibrationService/CancelJob",
    "/ripplekv.v1.WorkerService/Register",          "/ripplekv.v1.WorkerService/Connect",
    "/ripplekv.v1.WorkerService/GetJobData",        "/ripplekv.v1.RolloutService/GetBudgetMap",
    "/ripplekv.v1.RolloutService/ListBudgetMaps",   "/ripplekv.v1.RolloutService/GetRollout",
    "/ripplekv.v1.RolloutService/ListRollouts",     "/ripplekv.v1.RolloutService/CreateBudgetMap",
    "/ripplekv.v1.RolloutService/CreateRollout",    "/ripplekv.v1.RolloutService/PauseRollout",
    "/ripplekv.v1.RolloutService/ResumeRollout",    "/ripplekv.v1.RolloutService/RollbackRollout",
    "/ripplekv.v1.RolloutService/WatchBudgets",     "/ripplekv.v1.RolloutService/ReportBudget",
    "/ripplekv.v1.AdminService/CreateCheckpoint",   "/ripplekv.v1.CalibrationService/ListWorkers",
    "/ripplekv.v1.AdminService/LiftQuarantine",
};

// The node id make-tls binds its agent token to.
const std::string kAgentNode = "local-node-1";

std::set<std::string> ReaderCalls() {
  std::set<std::string> calls(kAllMethods.begin(), kAllMethods.begin() + 7);
  calls.insert(
      {"/ripplekv.v1.RolloutService/GetBudgetMap", "/ripplekv.v1.RolloutService/ListBudgetMaps",
       "/ripplekv.v1.RolloutService/GetRollout", "/ripplekv.v1.RolloutService/ListRollouts",
       "/ripplekv.v1.CalibrationService/ListWorkers"});
  return calls;
}

// What each role may call, stated here independently of the server's table.
std::map<std::string, std::set<std::string>> Expected() {
  std::set<std::string> submitter = ReaderCalls();
  submitter.insert(
      {"/ripplekv.v1.CalibrationService/SubmitJob", "/ripplekv.v1.CalibrationService/CancelJob"});
  std::set<std::string> operator_calls = ReaderCalls();
  operator_calls.insert(
      {"/ripplekv.v1.RolloutService/CreateBudgetMap", "/ripplekv.v1.RolloutService/CreateRollout",
       "/ripplekv.v1.RolloutService/PauseRollout", "/ripplekv.v1.RolloutService/ResumeRollout",
       "/ripplekv.v1.RolloutService/RollbackRollout"});
  return {
      {"reader", ReaderCalls()},
      {"submitter", submitter},
      {"operator", operator_calls},
      {"worker",
       {"/ripplekv.v1.WorkerService/Register", "/ripplekv.v1.WorkerService/Connect",
        "/ripplekv.v1.WorkerService/GetJobData"}},
      {"agent",
       {"/ripplekv.v1.RolloutService/WatchBudgets", "/ripplekv.v1.RolloutService/ReportBudget"}},
      {"admin", {kAllMethods.begin(), kAllMethods.end()}},
  };
}

struct Stubs {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::CalibrationService::Stub> calibration;
  std::unique_ptr<v1::WorkerService::Stub> workers;
  std::unique_ptr<v1::RolloutService::Stub> rollouts;
  std::unique_ptr<v1::AdminService::Stub> admin;
};

Stubs MakeStubs(const std::string& address, const v1::ClientChannelOptions& options) {
  Stubs stubs;
  stubs.channel = v1::MakeClientChannel(address, options);
  stubs.calibration = v1::CalibrationService::NewStub(stubs.channel);
  stubs.workers = v1::WorkerService::NewStub(stubs.channel);
  stubs.rollouts = v1::RolloutService::NewStub(stubs.channel);
  stubs.admin = v1::AdminService::NewStub(stubs.channel);
  return stubs;
}

void SetDeadline(grpc::ClientContext& context) {
  context.set_deadline(std::chrono::system_clock::now() + kCallTimeout);
}

// Calls `method` with a request the handler rejects or answers harmlessly (unknown ids, empty
// specs): only the auth check can produce UNAUTHENTICATED or PERMISSION_DENIED.
grpc::Status Call(Stubs& s, const std::string& method) {
  grpc::ClientContext context;
  SetDeadline(context);
  const std::string name = method.substr(method.rfind('/') + 1);
  if (name == "GetJob") {
    v1::GetJobRequest request;
    request.set_job_id("no-such-job");
    v1::Job response;
    return s.calibration->GetJob(&context, request, &response);
  }
  if (name == "ListJobs") {
    v1::ListJobsResponse response;
    return s.calibration->ListJobs(&context, v1::ListJobsRequest(), &response);
  }
  if (name == "ListWorkers") {
    v1::ListWorkersResponse response;
    return s.calibration->ListWorkers(&context, v1::ListWorkersRequest(), &response);
  }
  if (name == "LiftQuarantine") {
    // No such quarantine: a call past the auth check is NOT_FOUND and changes nothing.
    v1::LiftQuarantineRequest request;
    request.set_worker_id("nobody");
    v1::LiftQuarantineResponse response;
    return s.admin->LiftQuarantine(&context, request, &response);
  }
  if (name == "ListJobTasks") {
    v1::ListJobTasksRequest request;
    request.set_job_id("no-such-job");
    v1::ListJobTasksResponse response;
    return s.calibration->ListJobTasks(&context, request, &response);
  }
  if (name == "WatchJob") {
    v1::WatchJobRequest request;
    request.set_job_id("no-such-job");
    auto reader = s.calibration->WatchJob(&context, request);
    v1::JobEvent event;
    while (reader->Read(&event)) {
    }
    return reader->Finish();
  }
  if (name == "GetProfile") {
    v1::GetProfileRequest request;
    request.set_model_hash(std::string(64, 'f'));
    v1::Profile response;
    return s.calibration->GetProfile(&context, request, &response);
  }
  if (name == "ListProfiles") {
    v1::ListProfilesResponse response;
    return s.calibration->ListProfiles(&context, v1::ListProfilesRequest(), &response);
  }
  if (name == "GetBudgetMap" && method.starts_with("/ripplekv.v1.CalibrationService/")) {
    v1::GetBudgetMapRequest request;
    request.set_model_hash(std::string(64, 'f'));
    v1::BudgetMap response;
    return s.calibration->GetBudgetMap(&context, request, &response);
  }
  if (name == "SubmitJob") {
    v1::SubmitJobResponse response;
    return s.calibration->SubmitJob(&context, v1::SubmitJobRequest(), &response);
  }
  if (name == "CancelJob") {
    v1::CancelJobRequest request;
    request.set_job_id("no-such-job");
    v1::Job response;
    return s.calibration->CancelJob(&context, request, &response);
  }
  if (name == "Register") {
    v1::RegisterResponse response;
    return s.workers->Register(&context, v1::RegisterRequest(), &response);
  }
  if (name == "Connect") {
    auto stream = s.workers->Connect(&context);
    stream->Write(v1::WorkerMessage());  // not hello: the handler ends the stream
    stream->WritesDone();
    v1::SchedulerMessage message;
    while (stream->Read(&message)) {
    }
    return stream->Finish();
  }
  if (name == "GetJobData") {
    v1::GetJobDataRequest request;
    request.set_job_id("no-such-job");
    v1::GetJobDataResponse response;
    return s.workers->GetJobData(&context, request, &response);
  }
  if (name == "GetBudgetMap") {  // RolloutService's
    v1::GetBudgetMapVersionRequest request;
    request.set_model_hash(std::string(64, 'f'));
    request.set_version("latest");
    v1::BudgetMapVersion response;
    return s.rollouts->GetBudgetMap(&context, request, &response);
  }
  if (name == "ListBudgetMaps") {
    v1::ListBudgetMapVersionsRequest request;
    request.set_model_hash(std::string(64, 'f'));
    v1::ListBudgetMapVersionsResponse response;
    return s.rollouts->ListBudgetMaps(&context, request, &response);
  }
  if (name == "GetRollout" || name == "PauseRollout" || name == "ResumeRollout" ||
      name == "RollbackRollout") {
    v1::Rollout response;
    if (name == "GetRollout") {
      v1::GetRolloutRequest request;
      request.set_rollout_id("r999");
      return s.rollouts->GetRollout(&context, request, &response);
    }
    if (name == "PauseRollout") {
      v1::PauseRolloutRequest request;
      request.set_rollout_id("r999");
      return s.rollouts->PauseRollout(&context, request, &response);
    }
    if (name == "ResumeRollout") {
      v1::ResumeRolloutRequest request;
      request.set_rollout_id("r999");
      return s.rollouts->ResumeRollout(&context, request, &response);
    }
    v1::RollbackRolloutRequest request;
    request.set_rollout_id("r999");
    return s.rollouts->RollbackRollout(&context, request, &response);
  }
  if (name == "ListRollouts") {
    v1::ListRolloutsResponse response;
    return s.rollouts->ListRollouts(&context, v1::ListRolloutsRequest(), &response);
  }
  if (name == "CreateBudgetMap") {
    v1::CreateBudgetMapResponse response;
    return s.rollouts->CreateBudgetMap(&context, v1::CreateBudgetMapRequest(), &response);
  }
  if (name == "CreateRollout") {
    v1::Rollout response;
    return s.rollouts->CreateRollout(&context, v1::CreateRolloutRequest(), &response);
  }
  if (name == "WatchBudgets") {
    // An invalid model hash: a call past the auth check ends at once with INVALID_ARGUMENT.
    v1::WatchBudgetsRequest request;
    request.set_node_id(kAgentNode);
    request.set_model_hash("not-a-hash");
    auto reader = s.rollouts->WatchBudgets(&context, request);
    v1::BudgetAssignment assignment;
    while (reader->Read(&assignment)) {
    }
    return reader->Finish();
  }
  if (name == "ReportBudget") {
    v1::ReportBudgetRequest request;
    request.set_node_id(kAgentNode);
    request.set_model_hash(std::string(64, 'f'));
    v1::ReportBudgetResponse response;
    return s.rollouts->ReportBudget(&context, request, &response);
  }
  if (name == "CreateCheckpoint") {
    // A server without --checkpoint-dir: a call past the auth check is FAILED_PRECONDITION and
    // writes nothing.
    v1::CreateCheckpointResponse response;
    return s.admin->CreateCheckpoint(&context, v1::CreateCheckpointRequest(), &response);
  }
  ADD_FAILURE() << "no call for " << method;
  return grpc::Status(grpc::StatusCode::INTERNAL, "test bug");
}

bool PassedAuth(const grpc::Status& status) {
  return status.error_code() != grpc::StatusCode::UNAUTHENTICATED &&
         status.error_code() != grpc::StatusCode::PERMISSION_DENIED;
}

class AuthTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    ok_ = MakeTls(dir_->File("a")) && MakeTls(dir_->File("b"));
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }

  void SetUp() override {
    ASSERT_TRUE(ok_) << kMakeTlsFailed;
    server_dir_ = std::make_unique<TempDir>();
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
  }

  fs::path A(const std::string& file) const { return dir_->File("a/" + file); }
  fs::path B(const std::string& file) const { return dir_->File("b/" + file); }

  // A server with TLS (CA a), client certificates of CA a required, and CA a's token file.
  void StartTls(const std::string& health_listen = "") {
    SchedulerServerOptions options;
    options.health_listen = health_listen;
    options.db_path = server_dir_->File("db");
    options.sync_writes = false;
    options.security.tls_cert_file = A("server.pem").string();
    options.security.tls_key_file = A("server.key").string();
    options.security.tls_client_ca_file = A("ca.pem").string();
    options.security.token_file = A("tokens").string();
    Start(options);
  }

  void Start(const SchedulerServerOptions& options) {
    StatusOr<std::unique_ptr<SchedulerServer>> server = SchedulerServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    address_ = "127.0.0.1:" + std::to_string(server_->port());
  }

  // TLS with CA a's client certificate and `role`'s token ("" none, "unknown" a made-up one).
  v1::ClientChannelOptions Tls(const std::string& role) const {
    v1::ClientChannelOptions options;
    options.tls_ca_pem = Read(A("ca.pem"));
    options.tls_cert_pem = Read(A("client.pem"));
    options.tls_key_pem = Read(A("client.key"));
    options.token = Token(role);
    return options;
  }

  std::string Token(const std::string& role) const {
    if (role.empty()) return "";
    if (role == "unknown") return kUnknownToken;
    StatusOr<std::string> token = v1::ReadTokenFile(A("token-" + role).string());
    EXPECT_TRUE(token.ok()) << token.status();
    return token.value_or("");
  }

  static constexpr const char* kUnknownToken = "not-a-token-7f3a9c2e51d84b06a1e5";
  static TempDir* dir_;
  static bool ok_;
  std::unique_ptr<TempDir> server_dir_;
  std::unique_ptr<SchedulerServer> server_;
  std::string address_;
};

TempDir* AuthTest::dir_ = nullptr;
bool AuthTest::ok_ = false;

TEST_F(AuthTest, EachRoleMayMakeExactlyItsCalls) {
  StartTls();
  for (const auto& [role, allowed] : Expected()) {
    Stubs stubs = MakeStubs(address_, Tls(role));
    for (const std::string& method : kAllMethods) {
      const grpc::Status status = Call(stubs, method);
      if (allowed.contains(method)) {
        EXPECT_TRUE(PassedAuth(status)) << role << " " << method << ": " << status.error_code()
                                        << " " << status.error_message();
      } else {
        EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED)
            << role << " " << method << ": " << status.error_message();
      }
    }
  }
}

TEST_F(AuthTest, AnAgentActsOnlyForItsOwnNode) {
  StartTls();
  Stubs agent = MakeStubs(address_, Tls("agent"));
  for (const std::string& node : {std::string("local-node-2"), std::string("other")}) {
    grpc::ClientContext watch_context;
    SetDeadline(watch_context);
    v1::WatchBudgetsRequest watch;
    watch.set_node_id(node);
    watch.set_model_hash(kHash);
    auto reader = agent.rollouts->WatchBudgets(&watch_context, watch);
    v1::BudgetAssignment assignment;
    EXPECT_FALSE(reader->Read(&assignment)) << node;
    const grpc::Status watched = reader->Finish();
    EXPECT_EQ(watched.error_code(), grpc::StatusCode::PERMISSION_DENIED) << node;
    EXPECT_NE(watched.error_message().find(kAgentNode), std::string::npos)
        << watched.error_message();

    grpc::ClientContext report_context;
    SetDeadline(report_context);
    v1::ReportBudgetRequest report;
    report.set_node_id(node);
    report.set_model_hash(kHash);
    report.set_ok(true);
    v1::ReportBudgetResponse response;
    EXPECT_EQ(agent.rollouts->ReportBudget(&report_context, report, &response).error_code(),
              grpc::StatusCode::PERMISSION_DENIED)
        << node;
  }
  // Its own node: the call passes the auth check and reaches the engine, which knows nothing of
  // the model (no profile here): NOT_FOUND naming it, not PERMISSION_DENIED.
  grpc::ClientContext context;
  SetDeadline(context);
  v1::WatchBudgetsRequest own;
  own.set_node_id(kAgentNode);
  own.set_model_hash(kHash);
  auto reader = agent.rollouts->WatchBudgets(&context, own);
  v1::BudgetAssignment assignment;
  EXPECT_FALSE(reader->Read(&assignment));
  const grpc::Status own_watch = reader->Finish();
  EXPECT_EQ(own_watch.error_code(), grpc::StatusCode::NOT_FOUND) << own_watch.error_message();
  EXPECT_NE(own_watch.error_message().find(kHash), std::string::npos) << own_watch.error_message();
  // An admin may act for any node (e.g. to repair a node's record).
  Stubs admin = MakeStubs(address_, Tls("admin"));
  grpc::ClientContext report_context;
  SetDeadline(report_context);
  v1::ReportBudgetRequest report;
  report.set_node_id("local-node-2");
  report.set_model_hash(kHash);
  report.set_ok(true);
  v1::ReportBudgetResponse response;
  const grpc::Status reported = admin.rollouts->ReportBudget(&report_context, report, &response);
  EXPECT_EQ(reported.error_code(), grpc::StatusCode::FAILED_PRECONDITION)  // never watched
      << reported.error_message();
}

TEST_F(AuthTest, NoTokenOrUnknownTokenIsUnauthenticated) {
  StartTls();
  for (const std::string& who : {std::string(""), std::string("unknown")}) {
    Stubs stubs = MakeStubs(address_, Tls(who));
    for (const std::string& method : kAllMethods) {
      EXPECT_EQ(Call(stubs, method).error_code(), grpc::StatusCode::UNAUTHENTICATED)
          << (who.empty() ? "no token" : "unknown token") << " " << method;
    }
  }
}

TEST_F(AuthTest, HealthNeedsNoToken) {
  StartTls();
  Stubs stubs = MakeStubs(address_, Tls(""));
  grpc::ClientContext context;
  SetDeadline(context);
  // grpc.health.v1.HealthCheckRequest{service: ""} encodes as zero bytes.
  grpc::Slice empty("");
  const grpc::ByteBuffer request(&empty, 1);
  grpc::ByteBuffer response;
  grpc::GenericStub generic(stubs.channel);
  grpc::CompletionQueue cq;
  auto call = generic.PrepareUnaryCall(&context, "/grpc.health.v1.Health/Check", request, &cq);
  call->StartCall();
  grpc::Status status;
  call->Finish(&response, &status, reinterpret_cast<void*>(1));
  void* tag = nullptr;
  bool ok = false;
  ASSERT_TRUE(cq.Next(&tag, &ok));
  EXPECT_TRUE(status.ok()) << status.error_code() << " " << status.error_message();
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
}

TEST_F(AuthTest, HealthPortServesOnlyHealthInPlaintextWithoutToken) {
  StartTls("127.0.0.1:0");
  ASSERT_GT(server_->health_port(), 0);
  ASSERT_NE(server_->health_port(), server_->port());
  const std::shared_ptr<grpc::Channel> plain = grpc::CreateChannel(
      "127.0.0.1:" + std::to_string(server_->health_port()), grpc::InsecureChannelCredentials());
  auto health = grpc::health::v1::Health::NewStub(plain);
  for (const std::string& service : {std::string(""), std::string("ripplekv.v1.WorkerService")}) {
    grpc::ClientContext context;
    SetDeadline(context);
    grpc::health::v1::HealthCheckRequest request;
    request.set_service(service);
    grpc::health::v1::HealthCheckResponse response;
    const grpc::Status status = health->Check(&context, request, &response);
    ASSERT_TRUE(status.ok()) << service << ": " << status.error_message();
    EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::SERVING) << service;
  }
  // Nothing else is served there.
  Stubs stubs = MakeStubs("127.0.0.1:" + std::to_string(server_->health_port()), {});
  for (const std::string& method : kAllMethods) {
    EXPECT_EQ(Call(stubs, method).error_code(), grpc::StatusCode::UNIMPLEMENTED) << method;
  }
}

TEST_F(AuthTest, RejectedCallsChangeNothing) {
  StartTls();
  Stubs worker = MakeStubs(address_, Tls("worker"));
  Stubs submitter = MakeStubs(address_, Tls("submitter"));
  Stubs reader = MakeStubs(address_, Tls("reader"));
  Stubs anonymous = MakeStubs(address_, Tls(""));
  {
    v1::RegisterRequest request;
    request.set_worker_id("w1");
    v1::ModelInfo* model = request.mutable_model();
    model->set_model_hash(kHash);
    model->set_architecture("llama");
    model->set_name("test-model");
    model->set_n_layers(2);
    model->set_n_kv_heads(3);
    model->set_head_dim(64);
    model->set_d_model(576);
    model->set_vocab_size(49152);
    request.set_capacity(1);
    v1::RegisterResponse response;
    grpc::ClientContext context;
    SetDeadline(context);
    const grpc::Status status = worker.workers->Register(&context, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  v1::SubmitJobRequest submit;
  submit.mutable_spec()->mutable_model()->set_model_hash(kHash);
  v1::CalibrationParams* params = submit.mutable_spec()->mutable_params();
  params->set_alpha(0.5f);
  params->set_trials(2);
  params->set_samples(1);
  params->set_context_len(16);
  params->set_probe_len(4);
  std::string job_id;
  {
    v1::SubmitJobResponse response;
    grpc::ClientContext context;
    SetDeadline(context);
    const grpc::Status status = submitter.calibration->SubmitJob(&context, submit, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    job_id = response.job().job_id();
  }
  // A reader and an anonymous caller try to cancel the job and to submit another.
  for (Stubs* stubs : {&reader, &anonymous}) {
    v1::CancelJobRequest cancel;
    cancel.set_job_id(job_id);
    v1::Job job;
    grpc::ClientContext cancel_context;
    SetDeadline(cancel_context);
    EXPECT_FALSE(stubs->calibration->CancelJob(&cancel_context, cancel, &job).ok());
    v1::SubmitJobRequest again = submit;
    again.set_idempotency_key("another");
    v1::SubmitJobResponse response;
    grpc::ClientContext submit_context;
    SetDeadline(submit_context);
    EXPECT_FALSE(stubs->calibration->SubmitJob(&submit_context, again, &response).ok());
  }
  v1::GetJobRequest get;
  get.set_job_id(job_id);
  v1::Job job;
  grpc::ClientContext get_context;
  SetDeadline(get_context);
  ASSERT_TRUE(reader.calibration->GetJob(&get_context, get, &job).ok());
  EXPECT_NE(job.state(), v1::JOB_STATE_CANCELLED);
  v1::ListJobsResponse jobs;
  grpc::ClientContext list_context;
  SetDeadline(list_context);
  ASSERT_TRUE(reader.calibration->ListJobs(&list_context, v1::ListJobsRequest(), &jobs).ok());
  EXPECT_EQ(jobs.jobs_size(), 1);
}

TEST_F(AuthTest, PlaintextClientToTlsPortFails) {
  StartTls();
  v1::ClientChannelOptions plaintext;
  Stubs stubs = MakeStubs(address_, plaintext);
  const grpc::Status status = Call(stubs, "/ripplekv.v1.CalibrationService/ListJobs");
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
}

TEST_F(AuthTest, ClientCertificateFromAnotherCaFails) {
  StartTls();
  v1::ClientChannelOptions options = Tls("admin");
  options.tls_cert_pem = Read(B("client.pem"));
  options.tls_key_pem = Read(B("client.key"));
  Stubs stubs = MakeStubs(address_, options);
  EXPECT_EQ(Call(stubs, "/ripplekv.v1.CalibrationService/ListJobs").error_code(),
            grpc::StatusCode::UNAVAILABLE);
  // And none at all, when the server requires one.
  options.tls_cert_pem.clear();
  options.tls_key_pem.clear();
  Stubs without = MakeStubs(address_, options);
  EXPECT_EQ(Call(without, "/ripplekv.v1.CalibrationService/ListJobs").error_code(),
            grpc::StatusCode::UNAVAILABLE);
}

TEST_F(AuthTest, ServerFromAnotherCaIsNotTrusted) {
  StartTls();
  v1::ClientChannelOptions options = Tls("admin");
  options.tls_ca_pem = Read(B("ca.pem"));
  Stubs stubs = MakeStubs(address_, options);
  EXPECT_EQ(Call(stubs, "/ripplekv.v1.CalibrationService/ListJobs").error_code(),
            grpc::StatusCode::UNAVAILABLE);
}

// Sends stdout and stderr (spdlog's default sink, gRPC's own log) to a file while alive.
class OutputCapture {
 public:
  explicit OutputCapture(const fs::path& path) : path_(path) {
    std::fflush(stdout);
    std::fflush(stderr);
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    for (int i = 0; i < 2; ++i) {
      saved_[i] = ::dup(i + 1);
      ::dup2(fd, i + 1);
    }
    ::close(fd);
  }
  ~OutputCapture() { Restore(); }
  std::string Restore() {
    if (saved_[0] >= 0) {
      spdlog::default_logger()->flush();
      std::fflush(stdout);
      std::fflush(stderr);
      for (int i = 0; i < 2; ++i) {
        ::dup2(saved_[i], i + 1);
        ::close(saved_[i]);
        saved_[i] = -1;
      }
    }
    return Read(path_);
  }

 private:
  fs::path path_;
  int saved_[2] = {-1, -1};
};

TEST_F(AuthTest, TokensNeverReachTheLog) {
  StartTls();
  std::string log;
  {
    OutputCapture capture(server_dir_->File("output.log"));
    Stubs unknown = MakeStubs(address_, Tls("unknown"));
    EXPECT_EQ(Call(unknown, "/ripplekv.v1.CalibrationService/SubmitJob").error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    Stubs reader = MakeStubs(address_, Tls("reader"));
    EXPECT_EQ(Call(reader, "/ripplekv.v1.CalibrationService/CancelJob").error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
    server_->Shutdown();
    log = capture.Restore();
  }
  // The rejections were logged (so the check below looks at real log lines) ...
  EXPECT_NE(log.find("rejected call to /ripplekv.v1.CalibrationService/SubmitJob"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("local-reader"), std::string::npos) << log;  // the token's label
  // ... and no token, known or not, is in them.
  EXPECT_EQ(log.find(kUnknownToken), std::string::npos) << log;
  for (const char* role : {"reader", "submitter", "operator", "worker", "admin", "agent"}) {
    EXPECT_EQ(log.find(Token(role)), std::string::npos) << role;
  }
}

TEST_F(AuthTest, PlaintextWithTokensChecksRolesOnLoopback) {
  SchedulerServerOptions options;
  options.db_path = server_dir_->File("db");
  options.sync_writes = false;
  options.security.token_file = A("tokens").string();
  Start(options);
  v1::ClientChannelOptions reader;
  reader.token = Token("reader");
  Stubs stubs = MakeStubs(address_, reader);
  EXPECT_TRUE(Call(stubs, "/ripplekv.v1.CalibrationService/ListJobs").ok());
  EXPECT_EQ(Call(stubs, "/ripplekv.v1.CalibrationService/SubmitJob").error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  Stubs anonymous = MakeStubs(address_, v1::ClientChannelOptions());
  EXPECT_EQ(Call(anonymous, "/ripplekv.v1.CalibrationService/ListJobs").error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
}

TEST_F(AuthTest, PlaintextRefusesNonLoopbackAddresses) {
  SchedulerServerOptions options;
  options.db_path = server_dir_->File("db");
  options.listen = "0.0.0.0:0";
  StatusOr<std::unique_ptr<SchedulerServer>> server = SchedulerServer::Start(options);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(server.status().message().find("loopback"), std::string::npos);
  EXPECT_FALSE(fs::exists(options.db_path));  // refused before the store was opened
}

// ripplekv-scheduler itself: no security choice, or --insecure off loopback, is refused with a
// one-line error naming what to pass.
int RunScheduler(const std::vector<std::string>& args, const fs::path& err) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int fd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(fd, 2);
    ::dup2(fd, 1);
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(RIPPLEKV_SCHEDULER));
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST_F(AuthTest, SchedulerBinaryDemandsAnExplicitChoice) {
  const fs::path err = server_dir_->File("err");
  const std::string db = server_dir_->File("db");
  EXPECT_EQ(RunScheduler({"--listen", "127.0.0.1:0", "--db", db}, err), 2);
  std::string text = Read(err);
  EXPECT_NE(text.find("--tls-cert"), std::string::npos) << text;
  EXPECT_NE(text.find("--insecure"), std::string::npos) << text;
  EXPECT_EQ(RunScheduler({"--listen", "0.0.0.0:0", "--db", db, "--insecure"}, err), 2);
  text = Read(err);
  EXPECT_NE(text.find("loopback"), std::string::npos) << text;
  EXPECT_FALSE(fs::exists(db));
}

}  // namespace
}  // namespace ripplekv::scheduler::service
