// The token file (parsing, errors naming file and line, never the token), the role table's
// coverage of the services, Authorize's decisions, and the client's token file.

#include <google/protobuf/descriptor.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "proto/client_channel.h"
#include "ripplekv/v1/calibration.grpc.pb.h"
#include "ripplekv/v1/rollout.grpc.pb.h"
#include "ripplekv/v1/worker.grpc.pb.h"
#include "scheduler/service/auth.h"

namespace ripplekv::scheduler::service {
namespace {

const std::string kReaderToken = "reader-token-0123456789";
const std::string kAgentToken = "agent-token-0123456789ab";

std::string ValidFile() {
  return "# comment\n"
         "\n"
         "reader " +
         kReaderToken +
         " alice\n"
         "  agent:node-7\t" +
         kAgentToken +
         "  \n"
         "admin sha256:" +
         std::string(64, '0').replace(63, 1, "1") + "\n";
}

TEST(TokenTableTest, ParsesRolesNamesAndAgentNodes) {
  StatusOr<TokenTable> table = TokenTable::Parse(ValidFile(), "tokens");
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ(table->size(), 3u);
  const Caller* reader = table->Find(kReaderToken);
  ASSERT_NE(reader, nullptr);
  EXPECT_EQ(reader->role, Role::kReader);
  EXPECT_EQ(reader->name, "alice");
  const Caller* agent = table->Find(kAgentToken);
  ASSERT_NE(agent, nullptr);
  EXPECT_EQ(agent->role, Role::kAgent);
  EXPECT_EQ(agent->node_id, "node-7");
  EXPECT_EQ(agent->name, "agent@line 4");
  EXPECT_EQ(table->Find("reader-token-012345678"), nullptr);  // a prefix is not the token
  EXPECT_EQ(table->Find(""), nullptr);
}

TEST(TokenTableTest, AcceptsTheHashOfAToken) {
  const TokenHash hash = HashToken(kReaderToken);
  std::string hex;
  for (uint8_t b : hash) {
    static constexpr char kDigits[] = "0123456789abcdef";
    hex += kDigits[b >> 4];
    hex += kDigits[b & 15];
  }
  StatusOr<TokenTable> table = TokenTable::Parse("submitter sha256:" + hex + "\n", "tokens");
  ASSERT_TRUE(table.ok()) << table.status();
  const Caller* caller = table->Find(kReaderToken);
  ASSERT_NE(caller, nullptr);
  EXPECT_EQ(caller->role, Role::kSubmitter);
}

// Each bad line gives InvalidArgument "tokens:<line>: ..." without the line's secret.
TEST(TokenTableTest, ErrorsNameFileAndLineAndNeverTheToken) {
  const std::string secret = "s3cret-s3cret-s3cret";
  struct Case {
    std::string text;
    std::string where;
    std::string what;
  };
  const Case cases[] = {
      {"reader " + secret + "\nwizard " + secret + "x\n", "tokens:2:", "unknown role"},
      {secret + " reader\n", "tokens:1:", "unknown role"},  // columns swapped
      {"# c\nreader short\n", "tokens:2:", "16.."},
      {"reader\n", "tokens:1:", "expected ROLE TOKEN"},
      {"reader " + secret + " name extra\n", "tokens:1:", "expected ROLE TOKEN"},
      {"reader " + secret + "\nadmin " + secret + "\n", "tokens:2:", "same token as line 1"},
      {"admin sha256:abcd\n", "tokens:1:", "64 hex"},
      {"agent: " + secret + "\n", "tokens:1:", "unknown role"},
      {"reader " + secret + "\x01\n", "tokens:1:", "printable"},
  };
  for (const Case& c : cases) {
    StatusOr<TokenTable> table = TokenTable::Parse(c.text, "tokens");
    ASSERT_FALSE(table.ok()) << c.text;
    EXPECT_EQ(table.status().code(), absl::StatusCode::kInvalidArgument);
    const std::string message(table.status().message());
    EXPECT_TRUE(message.starts_with(c.where)) << message;
    EXPECT_NE(message.find(c.what), std::string::npos) << message;
    EXPECT_EQ(message.find("s3cret"), std::string::npos) << message;
  }
}

class TempFile {
 public:
  explicit TempFile(const std::string& contents) {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "ripplekv_tokens_XXXXXX").string();
    const int fd = mkstemp(pattern.data());
    EXPECT_GE(fd, 0);
    ::close(fd);
    path_ = pattern;
    std::ofstream(path_) << contents;
  }
  ~TempFile() { std::filesystem::remove(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(TokenTableTest, LoadNamesTheFile) {
  TempFile file("reader " + kReaderToken + "\nbogus line here\n");
  StatusOr<TokenTable> table = TokenTable::Load(file.path());
  ASSERT_FALSE(table.ok());
  EXPECT_TRUE(std::string(table.status().message()).starts_with(file.path() + ":2:"))
      << table.status();
  TempFile empty("# nothing\n");
  EXPECT_EQ(TokenTable::Load(empty.path()).status().code(), absl::StatusCode::kInvalidArgument);
  StatusOr<TokenTable> missing = TokenTable::Load(file.path() + ".missing");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find(".missing"), std::string::npos);
}

TEST(TokenTableTest, TableCoversEveryMethodOfTheServices) {
  const auto* pool = google::protobuf::DescriptorPool::generated_pool();
  v1::CalibrationService::Service calibration;  // links the generated descriptors
  v1::WorkerService::Service workers;
  v1::RolloutService::Service rollouts;
  for (const char* name : {"ripplekv.v1.CalibrationService", "ripplekv.v1.WorkerService",
                           "ripplekv.v1.RolloutService"}) {
    const google::protobuf::ServiceDescriptor* service = pool->FindServiceByName(name);
    ASSERT_NE(service, nullptr) << name;
    for (int i = 0; i < service->method_count(); ++i) {
      const std::string method = "/" + service->full_name() + "/" + service->method(i)->name();
      const MethodRule rule = RuleFor(method);
      EXPECT_TRUE(rule.known) << method << " is missing from the role table (auth.cc)";
      EXPECT_NE(rule.roles, kPublicMethod) << method;
    }
  }
}

TEST(AuthorizeTest, DecidesByTokenAndRole) {
  StatusOr<TokenTable> table =
      TokenTable::Parse("reader " + kReaderToken + "\nadmin admin-token-0123456789\n", "tokens");
  ASSERT_TRUE(table.ok()) << table.status();
  const std::string bearer = "Bearer " + kReaderToken;
  const std::string get = "/ripplekv.v1.CalibrationService/GetJob";
  const std::string submit = "/ripplekv.v1.CalibrationService/SubmitJob";
  EXPECT_TRUE(Authorize(*table, get, {bearer}).status.ok());
  EXPECT_EQ(Authorize(*table, submit, {bearer}).status.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(Authorize(*table, get, {}).status.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(Authorize(*table, get, {kReaderToken}).status.code(),  // no "Bearer "
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(Authorize(*table, get, {bearer, bearer}).status.code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(Authorize(*table, get, {"Bearer wrong-token-0123456789"}).status.code(),
            absl::StatusCode::kUnauthenticated);
  // Probes need nothing; a method missing from the table is admin's only.
  EXPECT_TRUE(Authorize(*table, "/grpc.health.v1.Health/Check", {}).status.ok());
  EXPECT_EQ(Authorize(*table, "/ripplekv.v1.Future/Call", {bearer}).status.code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(
      Authorize(*table, "/ripplekv.v1.Future/Call", {"bearer admin-token-0123456789"}).status.ok());
  const Decision denied = Authorize(*table, submit, {bearer});
  EXPECT_EQ(std::string(denied.status.message()).find(kReaderToken), std::string::npos);
}

TEST(ClientTokenFileTest, FirstLineTrimmed) {
  TempFile file("  tok-en-123 \t\nsecond line\n");
  StatusOr<std::string> token = v1::ReadTokenFile(file.path());
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_EQ(*token, "tok-en-123");
  TempFile blank("\nreal-token-on-line-2\n");
  StatusOr<std::string> none = v1::ReadTokenFile(blank.path());
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(none.status().message().find(blank.path()), std::string::npos);
}

TEST(ClientTokenFileTest, CertificateFlagsGoTogether) {
  v1::ClientChannelOptions options;
  EXPECT_EQ(v1::LoadClientSecurity({.tls_ca = "ca.pem", .tls_cert = "c.pem"}, options).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(v1::LoadClientSecurity({.tls_cert = "c.pem", .tls_key = "k.pem"}, options).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(v1::LoadClientSecurity({}, options).ok());
}

}  // namespace
}  // namespace ripplekv::scheduler::service
