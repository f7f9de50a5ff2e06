// The generated ripplekv.v1 API: messages survive the wire format, the schema keeps the shape
// docs/API.md promises, and a real gRPC server on loopback (callback API, health service,
// reflection) is reachable through the generated stubs. Every call has a deadline of a few
// seconds, so a broken server fails the test instead of hanging it.

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <iterator>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "google/protobuf/descriptor.h"
#include "google/protobuf/descriptor.pb.h"
#include "google/protobuf/unknown_field_set.h"
#include "google/protobuf/util/message_differencer.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "gtest/gtest.h"
#include "ripplekv/v1/admin.grpc.pb.h"
#include "ripplekv/v1/calibration.grpc.pb.h"
#include "ripplekv/v1/calibration.pb.h"
#include "ripplekv/v1/rollout.pb.h"
#include "ripplekv/v1/worker.grpc.pb.h"
#include "ripplekv/v1/worker.pb.h"

namespace ripplekv {
namespace {

using google::protobuf::Message;
using google::protobuf::UnknownField;
using google::protobuf::UnknownFieldSet;
using google::protobuf::util::MessageDifferencer;

constexpr auto kCallTimeout = std::chrono::seconds(5);

std::chrono::system_clock::time_point Deadline() {
  return std::chrono::system_clock::now() + kCallTimeout;
}

// Serializes `in` and parses the bytes into a fresh message of the same type.
template <typename M>
M RoundTrip(const M& in) {
  std::string bytes;
  EXPECT_TRUE(in.SerializeToString(&bytes));
  M out;
  EXPECT_TRUE(out.ParseFromString(bytes));
  return out;
}

v1::SubmitJobRequest FullSubmitJobRequest() {
  v1::SubmitJobRequest request;
  request.set_idempotency_key("7c1e2f3a-submit-1");
  v1::JobSpec* spec = request.mutable_spec();
  spec->set_priority(-7);
  spec->mutable_model()->set_model_hash(std::string(64, 'a'));
  spec->mutable_model()->set_path("/models/SmolLM2-135M-Instruct.Q4_1.gguf");
  spec->mutable_model()->set_name("SmolLM2-135M-Instruct");
  v1::JsonlLines* lines = spec->mutable_data()->mutable_jsonl();
  lines->add_lines(R"({"text": "The quick brown fox"})");
  lines->add_lines(R"({"context": "Once upon", "continuation": " a time"})");
  spec->mutable_data()->set_strict(true);
  v1::CalibrationParams* params = spec->mutable_params();
  params->set_mode(v1::PERTURB_MODE_PREFILL);
  params->set_alpha(0.3f);
  params->set_trials(4);
  params->set_seed(0xFFFF'FFFF'FFFF'FFFFull);  // the whole uint64 range survives
  params->set_samples(16);
  params->set_context_len(1024);
  params->set_probe_len(32);
  params->add_layers(0);
  params->add_layers(29);
  return request;
}

TEST(ProtoMessagesTest, SubmitJobRequestRoundTripsThroughTheWireFormat) {
  const v1::SubmitJobRequest in = FullSubmitJobRequest();
  const v1::SubmitJobRequest out = RoundTrip(in);
  std::string diff;
  MessageDifferencer differencer;
  differencer.ReportDifferencesToString(&diff);
  EXPECT_TRUE(differencer.Compare(in, out)) << diff;
  EXPECT_EQ(out.spec().data().source_case(), v1::CalibrationData::kJsonl);
  EXPECT_EQ(out.spec().params().alpha(), 0.3f);  // exact: carried as a float
  EXPECT_EQ(out.spec().params().seed(), 0xFFFF'FFFF'FFFF'FFFFull);
}

TEST(ProtoMessagesTest, UnsetOptionalParamsStayDistinguishableFromZero) {
  v1::CalibrationParams params;
  params.set_trials(0);  // explicitly zero: the server must reject it, not default it
  const v1::CalibrationParams out = RoundTrip(params);
  EXPECT_TRUE(out.has_trials());
  EXPECT_EQ(out.trials(), 0);
  EXPECT_FALSE(out.has_alpha());
  EXPECT_FALSE(out.has_samples());
  EXPECT_FALSE(out.has_context_len());
  EXPECT_FALSE(out.has_probe_len());

  v1::BudgetParams budget;
  budget.set_average_tokens(128);
  const v1::BudgetParams budget_out = RoundTrip(budget);
  EXPECT_EQ(budget_out.total_case(), v1::BudgetParams::kAverageTokens);
  EXPECT_FALSE(budget_out.has_max_tokens());
  EXPECT_FALSE(budget_out.has_context_len());
}

TEST(ProtoMessagesTest, EmptyInlineTextKeepsItsSourceCase) {
  // Responses clear inline content but keep the case; an empty string must not read as "unset".
  v1::CalibrationData data;
  data.set_text("");
  data.set_inline_bytes(12345);
  const v1::CalibrationData out = RoundTrip(data);
  EXPECT_EQ(out.source_case(), v1::CalibrationData::kText);
  EXPECT_EQ(out.inline_bytes(), 12345);
}

TEST(ProtoMessagesTest, EveryWorkerStreamMessageKeepsItsOneofCase) {
  std::vector<v1::WorkerMessage> messages(7);
  messages[0].mutable_hello()->set_worker_id("host-a/gpu0");
  messages[0].mutable_hello()->set_session_id("s-1");
  v1::Heartbeat* heartbeat = messages[1].mutable_heartbeat();
  heartbeat->set_sequence(42);
  heartbeat->set_active_tasks(2);
  heartbeat->set_memory_used_bytes(int64_t{3} << 30);
  heartbeat->add_cached_samples()->set_job_id("j-1");
  messages[2].mutable_task_accepted()->set_task_id("t-9");
  messages[3].mutable_task_refused()->set_task_id("t-9");
  messages[3].mutable_task_refused()->set_reason(v1::REFUSAL_REASON_MODEL_HASH_MISMATCH);
  messages[3].mutable_task_refused()->set_message("model hash aaaa loaded, job wants bbbb");
  v1::TrialResult* result = messages[4].mutable_trial_result();
  result->set_job_id("j-1");
  result->set_sample(3);
  result->set_layer(17);
  result->set_trial(1);
  result->set_kl(0.1234567890123456789);  // every bit of the double survives
  messages[5].mutable_task_done()->set_task_id("t-9");
  messages[5].mutable_task_done()->mutable_error()->set_code(14);
  messages[5].mutable_task_done()->mutable_elapsed()->set_nanos(5'000'000);
  messages[6].mutable_draining();  // an empty message still selects its case
  for (const v1::WorkerMessage& in : messages) {
    const v1::WorkerMessage out = RoundTrip(in);
    EXPECT_NE(in.kind_case(), v1::WorkerMessage::KIND_NOT_SET);
    EXPECT_EQ(out.kind_case(), in.kind_case());
    EXPECT_TRUE(MessageDifferencer::Equals(in, out)) << in.ShortDebugString();
  }
  EXPECT_EQ(RoundTrip(messages[4]).trial_result().kl(), 0.1234567890123456789);
}

TEST(ProtoMessagesTest, EverySchedulerStreamMessageKeepsItsOneofCase) {
  std::vector<v1::SchedulerMessage> messages(3);
  v1::TaskAssignment* task = messages[0].mutable_task_assignment();
  task->set_task_id("t-1");
  task->set_job_id("j-1");
  task->set_model_hash(std::string(64, 'f'));
  task->set_sample(7);
  task->set_layer(29);
  task->mutable_params()->set_trials(2);
  messages[1].mutable_task_cancellation()->set_job_id("j-1");
  messages[1].mutable_task_cancellation()->set_reason("job cancelled");
  messages[2].mutable_heartbeat_ack()->set_sequence(42);
  for (const v1::SchedulerMessage& in : messages) {
    const v1::SchedulerMessage out = RoundTrip(in);
    EXPECT_EQ(out.kind_case(), in.kind_case());
    EXPECT_TRUE(MessageDifferencer::Equals(in, out)) << in.ShortDebugString();
  }
}

TEST(ProtoMessagesTest, TruncatedBytesDoNotParse) {
  std::string bytes;
  ASSERT_TRUE(FullSubmitJobRequest().SerializeToString(&bytes));
  v1::SubmitJobRequest parsed;
  EXPECT_FALSE(parsed.ParseFromString(bytes.substr(0, bytes.size() - 3)));
}

// --- Schema shape -----------------------------------------------------------------------------

const google::protobuf::FileDescriptor* CalibrationFile() { return v1::Job::descriptor()->file(); }
const google::protobuf::FileDescriptor* WorkerFile() {
  return v1::WorkerMessage::descriptor()->file();
}
const google::protobuf::FileDescriptor* RolloutFile() { return v1::Rollout::descriptor()->file(); }
const google::protobuf::FileDescriptor* AdminFile() {
  return v1::CreateCheckpointRequest::descriptor()->file();
}

TEST(ProtoSchemaTest, FilesAreInPackageRipplekvV1) {
  EXPECT_EQ(CalibrationFile()->name(), "ripplekv/v1/calibration.proto");
  EXPECT_EQ(WorkerFile()->name(), "ripplekv/v1/worker.proto");
  EXPECT_EQ(RolloutFile()->name(), "ripplekv/v1/rollout.proto");
  EXPECT_EQ(CalibrationFile()->package(), "ripplekv.v1");
  EXPECT_EQ(WorkerFile()->package(), "ripplekv.v1");
  EXPECT_EQ(RolloutFile()->package(), "ripplekv.v1");
  EXPECT_EQ(AdminFile()->name(), "ripplekv/v1/admin.proto");
  EXPECT_EQ(AdminFile()->package(), "ripplekv.v1");
}

// AIP-126: the zero value of every enum is <ENUM_NAME>_UNSPECIFIED, and every value carries the
// enum's prefix, so values never collide inside the package.
TEST(ProtoSchemaTest, EveryEnumStartsWithUnspecifiedAndPrefixesItsValues) {
  for (const auto* file : {CalibrationFile(), WorkerFile(), RolloutFile()}) {
    ASSERT_GT(file->enum_type_count(), 0) << file->name();
    for (int i = 0; i < file->enum_type_count(); ++i) {
      const google::protobuf::EnumDescriptor* e = file->enum_type(i);
      std::string prefix;  // PerturbMode -> PERTURB_MODE_
      for (char c : e->name()) {
        if (std::isupper(static_cast<unsigned char>(c)) && !prefix.empty()) prefix += '_';
        prefix += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      }
      prefix += '_';
      EXPECT_EQ(e->value(0)->number(), 0) << e->full_name();
      EXPECT_EQ(e->value(0)->name(), prefix + "UNSPECIFIED") << e->full_name();
      for (int v = 0; v < e->value_count(); ++v) {
        EXPECT_EQ(e->value(v)->name().rfind(prefix, 0), 0u) << e->value(v)->full_name();
      }
    }
  }
}

TEST(ProtoSchemaTest, ServicesHaveTheDocumentedMethodsAndStreamingShapes) {
  struct Expected {
    const char* method;
    bool client_streaming;
    bool server_streaming;
  };
  const Expected calibration[] = {
      {"SubmitJob", false, false},    {"GetJob", false, false},       {"ListJobs", false, false},
      {"CancelJob", false, false},    {"WatchJob", false, true},      {"GetProfile", false, false},
      {"ListProfiles", false, false}, {"GetBudgetMap", false, false}, {"ListJobTasks", false, false},
      {"ListWorkers", false, false},
  };
  const Expected worker[] = {
      {"Register", false, false}, {"Connect", true, true}, {"GetJobData", false, false}};
  const Expected rollout[] = {{"CreateBudgetMap", false, false}, {"GetBudgetMap", false, false},
                              {"ListBudgetMaps", false, false},  {"CreateRollout", false, false},
                              {"GetRollout", false, false},      {"ListRollouts", false, false},
                              {"PauseRollout", false, false},    {"ResumeRollout", false, false},
                              {"RollbackRollout", false, false}, {"WatchBudgets", false, true},
                              {"ReportBudget", false, false}};
  auto check = [](const google::protobuf::ServiceDescriptor* service, const auto& expected) {
    ASSERT_NE(service, nullptr);
    EXPECT_EQ(service->method_count(), static_cast<int>(std::size(expected)));
    for (const Expected& e : expected) {
      const google::protobuf::MethodDescriptor* m = service->FindMethodByName(e.method);
      ASSERT_NE(m, nullptr) << e.method;
      EXPECT_EQ(m->client_streaming(), e.client_streaming) << e.method;
      EXPECT_EQ(m->server_streaming(), e.server_streaming) << e.method;
    }
  };
  check(CalibrationFile()->FindServiceByName("CalibrationService"), calibration);
  check(WorkerFile()->FindServiceByName("WorkerService"), worker);
  check(RolloutFile()->FindServiceByName("RolloutService"), rollout);
  const Expected admin[] = {{"CreateCheckpoint", false, false}, {"LiftQuarantine", false, false}};
  check(AdminFile()->FindServiceByName("AdminService"), admin);
}

// --- A real server on loopback ------------------------------------------------------------------

// GetJob: "missing" is NOT_FOUND, an empty id INVALID_ARGUMENT, anything else a RUNNING job.
class TestCalibrationService final : public v1::CalibrationService::CallbackService {
 public:
  grpc::ServerUnaryReactor* GetJob(grpc::CallbackServerContext* context,
                                   const v1::GetJobRequest* request, v1::Job* job) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    if (request->job_id().empty()) {
      reactor->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "job_id: required"));
    } else if (request->job_id() == "missing") {
      reactor->Finish(grpc::Status(grpc::StatusCode::NOT_FOUND, "job missing not found"));
    } else {
      job->set_job_id(request->job_id());
      job->set_state(v1::JOB_STATE_RUNNING);
      job->mutable_progress()->set_tasks_done(3);
      job->mutable_progress()->set_tasks_total(240);
      reactor->Finish(grpc::Status::OK);
    }
    return reactor;
  }
};

// Connect: acknowledges every heartbeat with its sequence number, ignores other messages, and
// ends the stream with OK when the worker half-closes.
class EchoConnectReactor final
    : public grpc::ServerBidiReactor<v1::WorkerMessage, v1::SchedulerMessage> {
 public:
  EchoConnectReactor() { StartRead(&in_); }

  void OnReadDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status::OK);
      return;
    }
    if (in_.kind_case() != v1::WorkerMessage::kHeartbeat) {
      StartRead(&in_);
      return;
    }
    out_.Clear();
    out_.mutable_heartbeat_ack()->set_sequence(in_.heartbeat().sequence());
    StartWrite(&out_);
  }
  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "write failed"));
      return;
    }
    StartRead(&in_);
  }
  void OnDone() override { delete this; }

 private:
  v1::WorkerMessage in_;
  v1::SchedulerMessage out_;
};

class TestWorkerService final : public v1::WorkerService::CallbackService {
 public:
  grpc::ServerBidiReactor<v1::WorkerMessage, v1::SchedulerMessage>* Connect(
      grpc::CallbackServerContext* /*context*/) override {
    return new EchoConnectReactor();
  }
};

std::string ToString(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string out;
  for (const grpc::Slice& s : slices)
    out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

grpc::ByteBuffer ToByteBuffer(const std::string& bytes) {
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

// The length-delimited or varint fields numbered `number` of `set`, in order.
std::vector<const UnknownField*> Fields(const UnknownFieldSet& set, int number) {
  std::vector<const UnknownField*> out;
  for (int i = 0; i < set.field_count(); ++i) {
    if (set.field(i).number() == number) out.push_back(&set.field(i));
  }
  return out;
}

// A completion queue driven one operation at a time, each with the call's deadline.
class SyncQueue {
 public:
  ~SyncQueue() {
    queue_.Shutdown();
    void* tag;
    bool ok;
    while (queue_.Next(&tag, &ok)) {
    }
  }
  grpc::CompletionQueue* get() { return &queue_; }
  // True when the operation tagged `tag` completed successfully before the deadline.
  bool Await(intptr_t tag) {
    void* got = nullptr;
    bool ok = false;
    if (queue_.AsyncNext(&got, &ok, Deadline()) != grpc::CompletionQueue::GOT_EVENT) return false;
    return got == reinterpret_cast<void*>(tag) && ok;
  }

 private:
  grpc::CompletionQueue queue_;
};

void* Tag(intptr_t tag) { return reinterpret_cast<void*>(tag); }

class GrpcLoopbackTest : public testing::Test {
 protected:
  void SetUp() override {
    grpc::EnableDefaultHealthCheckService(true);
    grpc::reflection::InitProtoReflectionServerBuilderPlugin();
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&calibration_);
    builder.RegisterService(&worker_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port_, 0);
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(port_),
                                   grpc::InsecureChannelCredentials());
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown(std::chrono::system_clock::now() + kCallTimeout);
  }

  // Calls `method` ("/package.Service/Method") with the serialized request, via the generic stub
  // (the health and reflection messages are not part of our generated code).
  grpc::Status GenericUnary(const std::string& method, const std::string& request,
                            std::string* response) {
    grpc::GenericStub stub(channel_);
    grpc::ClientContext context;
    context.set_deadline(Deadline());
    SyncQueue queue;
    auto call = stub.PrepareUnaryCall(&context, method, ToByteBuffer(request), queue.get());
    call->StartCall();
    grpc::ByteBuffer reply;
    grpc::Status status;
    call->Finish(&reply, &status, Tag(1));
    if (!queue.Await(1)) return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "no reply");
    if (status.ok()) *response = ToString(reply);
    return status;
  }

  // One request and one reply on the bidirectional `method`.
  grpc::Status GenericBidiExchange(const std::string& method, const std::string& request,
                                   std::string* response) {
    grpc::GenericStub stub(channel_);
    grpc::ClientContext context;
    context.set_deadline(Deadline());
    SyncQueue queue;
    auto call = stub.PrepareCall(&context, method, queue.get());
    call->StartCall(Tag(1));
    if (!queue.Await(1)) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "start failed");
    call->Write(ToByteBuffer(request), Tag(2));
    if (!queue.Await(2)) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "write failed");
    grpc::ByteBuffer reply;
    call->Read(&reply, Tag(3));
    const bool read = queue.Await(3);
    call->WritesDone(Tag(4));
    queue.Await(4);
    grpc::Status status;
    call->Finish(&status, Tag(5));
    if (!queue.Await(5)) return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "no status");
    if (status.ok() && !read) return grpc::Status(grpc::StatusCode::DATA_LOSS, "no reply");
    if (status.ok()) *response = ToString(reply);
    return status;
  }

  int port_ = 0;
  TestCalibrationService calibration_;
  TestWorkerService worker_;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(GrpcLoopbackTest, GetJobReachesTheCallbackHandler) {
  auto stub = v1::CalibrationService::NewStub(channel_);
  grpc::ClientContext context;
  context.set_deadline(Deadline());
  v1::GetJobRequest request;
  request.set_job_id("j-42");
  v1::Job job;
  const grpc::Status status = stub->GetJob(&context, request, &job);
  ASSERT_TRUE(status.ok()) << status.error_code() << " " << status.error_message();
  EXPECT_EQ(job.job_id(), "j-42");
  EXPECT_EQ(job.state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(job.progress().tasks_total(), 240);
}

TEST_F(GrpcLoopbackTest, HandlerErrorsReachTheClientWithTheirCodeAndMessage) {
  auto stub = v1::CalibrationService::NewStub(channel_);
  for (const auto& [id, code] :
       {std::pair<std::string, grpc::StatusCode>{"missing", grpc::StatusCode::NOT_FOUND},
        {"", grpc::StatusCode::INVALID_ARGUMENT}}) {
    grpc::ClientContext context;
    context.set_deadline(Deadline());
    v1::GetJobRequest request;
    request.set_job_id(id);
    v1::Job job;
    const grpc::Status status = stub->GetJob(&context, request, &job);
    EXPECT_EQ(status.error_code(), code) << "job_id '" << id << "'";
    EXPECT_FALSE(status.error_message().empty());
  }
}

TEST_F(GrpcLoopbackTest, MethodsWithoutAHandlerAreUnimplemented) {
  auto stub = v1::CalibrationService::NewStub(channel_);
  grpc::ClientContext context;
  context.set_deadline(Deadline());
  v1::SubmitJobResponse response;
  const grpc::Status status = stub->SubmitJob(&context, FullSubmitJobRequest(), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED);
}

TEST_F(GrpcLoopbackTest, ConnectStreamAcknowledgesEveryHeartbeatInOrder) {
  auto stub = v1::WorkerService::NewStub(channel_);
  grpc::ClientContext context;
  context.set_deadline(Deadline());
  auto stream = stub->Connect(&context);
  v1::WorkerMessage hello;
  hello.mutable_hello()->set_worker_id("w1");
  hello.mutable_hello()->set_session_id("s1");
  ASSERT_TRUE(stream->Write(hello));
  for (uint64_t sequence = 1; sequence <= 3; ++sequence) {
    v1::WorkerMessage heartbeat;
    heartbeat.mutable_heartbeat()->set_sequence(sequence);
    ASSERT_TRUE(stream->Write(heartbeat));
    v1::SchedulerMessage reply;
    ASSERT_TRUE(stream->Read(&reply)) << "no ack for heartbeat " << sequence;
    ASSERT_EQ(reply.kind_case(), v1::SchedulerMessage::kHeartbeatAck);
    EXPECT_EQ(reply.heartbeat_ack().sequence(), sequence);
  }
  ASSERT_TRUE(stream->WritesDone());
  v1::SchedulerMessage extra;
  EXPECT_FALSE(stream->Read(&extra));  // nothing beyond the three acks
  const grpc::Status status = stream->Finish();
  EXPECT_TRUE(status.ok()) << status.error_code() << " " << status.error_message();
}

TEST_F(GrpcLoopbackTest, HealthServiceReportsServing) {
  // grpc.health.v1.HealthCheckRequest{service: ""} is the empty message; the reply is
  // HealthCheckResponse{status = 1 (SERVING)}: field 1, varint.
  std::string reply;
  const grpc::Status status = GenericUnary("/grpc.health.v1.Health/Check", "", &reply);
  ASSERT_TRUE(status.ok()) << status.error_code() << " " << status.error_message();
  UnknownFieldSet fields;
  ASSERT_TRUE(fields.ParseFromString(reply));
  const auto serving = Fields(fields, 1);
  ASSERT_EQ(serving.size(), 1u);
  ASSERT_EQ(serving[0]->type(), UnknownField::TYPE_VARINT);
  EXPECT_EQ(serving[0]->varint(), 1u);
}

TEST_F(GrpcLoopbackTest, ReflectionListsOurServicesAndServesTheirFiles) {
  const std::string method = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo";
  // ServerReflectionRequest{list_services (7): "*"}.
  std::string reply;
  grpc::Status status = GenericBidiExchange(method, std::string("\x3a\x01*", 3), &reply);
  ASSERT_TRUE(status.ok()) << status.error_code() << " " << status.error_message();
  // ServerReflectionResponse.list_services_response (6) -> ListServiceResponse.service (1) ->
  // ServiceResponse.name (1).
  UnknownFieldSet response;
  ASSERT_TRUE(response.ParseFromString(reply));
  const auto list = Fields(response, 6);
  ASSERT_EQ(list.size(), 1u) << "no list_services_response";
  UnknownFieldSet services;
  ASSERT_TRUE(services.ParseFromString(list[0]->length_delimited()));
  std::vector<std::string> names;
  for (const UnknownField* service : Fields(services, 1)) {
    UnknownFieldSet entry;
    ASSERT_TRUE(entry.ParseFromString(service->length_delimited()));
    for (const UnknownField* name : Fields(entry, 1)) names.push_back(name->length_delimited());
  }
  EXPECT_NE(std::find(names.begin(), names.end(), "ripplekv.v1.CalibrationService"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "ripplekv.v1.WorkerService"), names.end());

  // ServerReflectionRequest{file_containing_symbol (4): "ripplekv.v1.WorkerService"} ->
  // file_descriptor_response (4) -> file_descriptor_proto (1), the file first.
  const std::string symbol = "ripplekv.v1.WorkerService";
  std::string request = std::string(1, '\x22') + static_cast<char>(symbol.size()) + symbol;
  status = GenericBidiExchange(method, request, &reply);
  ASSERT_TRUE(status.ok()) << status.error_code() << " " << status.error_message();
  UnknownFieldSet file_response;
  ASSERT_TRUE(file_response.ParseFromString(reply));
  const auto files = Fields(file_response, 4);
  ASSERT_EQ(files.size(), 1u) << "no file_descriptor_response";
  UnknownFieldSet file_list;
  ASSERT_TRUE(file_list.ParseFromString(files[0]->length_delimited()));
  std::vector<std::string> file_names;
  for (const UnknownField* file : Fields(file_list, 1)) {
    google::protobuf::FileDescriptorProto proto;
    ASSERT_TRUE(proto.ParseFromString(file->length_delimited()));
    file_names.push_back(proto.name());
  }
  ASSERT_FALSE(file_names.empty());
  EXPECT_EQ(file_names[0], "ripplekv/v1/worker.proto");
}

}  // namespace
}  // namespace ripplekv
