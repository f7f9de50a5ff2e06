// Secret files others may read (docs/SECURITY.md, "File modes"): the scheduler refuses a token
// file with such a mode unless told to serve anyway, and warns about its TLS key; clients
// (proto/client_channel.h, shared by the CLI, ripplekv-worker and ripplekv-agent) warn about a
// token file or --tls-key and go on. Real files with real modes; certificates from
// deploy/local/make-tls.

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "proto/client_channel.h"
#include "proto/secret_file_mode.h"
#include "scheduler/service/server_security.h"
#include "spdlog/sinks/ostream_sink.h"
#include "spdlog/spdlog.h"
#include "tests/common/temp_dir.h"
#include "tests/scheduler/service/tls_fixture.h"

namespace ripplekv::scheduler::service {
namespace {

namespace fs = std::filesystem;
using ripplekv::testing::TempDir;

// What spdlog's default logger writes while it lives.
class LogCapture {
 public:
  LogCapture() : previous_(spdlog::default_logger()) {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(text_);
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("capture", sink));
  }
  ~LogCapture() { spdlog::set_default_logger(previous_); }
  std::string text() const { return text_.str(); }

 private:
  std::shared_ptr<spdlog::logger> previous_;
  std::ostringstream text_;
};

class SecretFileModeTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(MakeTls(tmp_.File("tls"))) << kMakeTlsFailed; }
  fs::path Tls(const std::string& name) const { return tmp_.File("tls/" + name); }
  static void Chmod(const fs::path& path, mode_t mode) {
    ASSERT_EQ(::chmod(path.c_str(), mode), 0) << path;
  }
  ServerSecurityOptions Tokens() const {
    ServerSecurityOptions options;
    options.token_file = Tls("tokens").string();
    return options;
  }

  TempDir tmp_;
};

TEST_F(SecretFileModeTest, TheRuleNamesPathModeAndFix) {
  const std::string token = Tls("token-admin").string();
  for (mode_t ok : {0600, 0400, 0700}) {
    Chmod(token, ok);
    StatusOr<std::string> problem = v1::SecretFileModeProblem(token);
    ASSERT_TRUE(problem.ok()) << problem.status();
    EXPECT_EQ(*problem, "") << std::oct << ok;
  }
  for (mode_t bad : {0644, 0604, 0602, 0620, 0660}) {
    Chmod(token, bad);
    StatusOr<std::string> problem = v1::SecretFileModeProblem(token);
    ASSERT_TRUE(problem.ok()) << problem.status();
    EXPECT_NE(problem->find(token), std::string::npos) << *problem;
    EXPECT_NE(problem->find("chmod 600"), std::string::npos) << *problem;
    char octal[8];
    std::snprintf(octal, sizeof(octal), "%04o", static_cast<unsigned>(bad));
    EXPECT_NE(problem->find(octal), std::string::npos) << *problem;
  }
  // Group-readable: only a file root owns (root:GROUP 0640, the service reading it as GROUP).
  Chmod(token, 0640);
  StatusOr<std::string> group = v1::SecretFileModeProblem(token);
  ASSERT_TRUE(group.ok()) << group.status();
  struct stat st {};
  ASSERT_EQ(::stat(token.c_str(), &st), 0);
  EXPECT_EQ(group->empty(), st.st_uid == 0) << *group;
  if (::geteuid() == 0) {
    ASSERT_EQ(::chown(token.c_str(), 65534, 65534), 0);
    StatusOr<std::string> not_root = v1::SecretFileModeProblem(token);
    ASSERT_TRUE(not_root.ok()) << not_root.status();
    EXPECT_NE(not_root->find("0640"), std::string::npos) << *not_root;
  }
  EXPECT_EQ(v1::SecretFileModeProblem(tmp_.File("missing")).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(SecretFileModeTest, SchedulerRefusesAWorldReadableTokenFileUnlessAllowed) {
  Chmod(Tls("tokens"), 0644);
  StatusOr<ServerSecurity> refused = MakeServerSecurity(Tokens(), "127.0.0.1:0");
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << refused.status();
  const std::string message(refused.status().message());
  EXPECT_NE(message.find(Tls("tokens").string()), std::string::npos) << message;
  EXPECT_NE(message.find("0644"), std::string::npos) << message;
  EXPECT_NE(message.find("chmod 600"), std::string::npos) << message;
  EXPECT_NE(message.find("--allow-insecure-token-file"), std::string::npos) << message;

  ServerSecurityOptions allowed = Tokens();
  allowed.allow_insecure_token_file = true;
  LogCapture log;
  StatusOr<ServerSecurity> served = MakeServerSecurity(allowed, "127.0.0.1:0");
  ASSERT_TRUE(served.ok()) << served.status();
  EXPECT_NE(served->tokens, nullptr);
  EXPECT_NE(log.text().find("[warning]"), std::string::npos) << log.text();
  EXPECT_NE(log.text().find(Tls("tokens").string()), std::string::npos) << log.text();

  // Private again: served without a word.
  Chmod(Tls("tokens"), 0600);
  LogCapture quiet;
  ASSERT_TRUE(MakeServerSecurity(Tokens(), "127.0.0.1:0").ok());
  EXPECT_EQ(quiet.text().find("token file"), std::string::npos) << quiet.text();
}

TEST_F(SecretFileModeTest, SchedulerWarnsAboutAReadableTlsKey) {
  ServerSecurityOptions options;
  options.tls_cert_file = Tls("server.pem").string();
  options.tls_key_file = Tls("server.key").string();
  {
    LogCapture log;
    ASSERT_TRUE(MakeServerSecurity(options, "127.0.0.1:0").ok());
    EXPECT_EQ(log.text().find("private key"), std::string::npos) << log.text();
  }
  Chmod(Tls("server.key"), 0644);
  LogCapture log;
  StatusOr<ServerSecurity> served = MakeServerSecurity(options, "127.0.0.1:0");
  ASSERT_TRUE(served.ok()) << served.status();  // a warning, not a refusal
  EXPECT_NE(log.text().find("[warning] TLS private key " + Tls("server.key").string()),
            std::string::npos)
      << log.text();
}

TEST_F(SecretFileModeTest, ClientsWarnAboutAReadableTokenFileOrKeyAndGoOn) {
  const std::string token = Tls("token-worker").string();
  {
    LogCapture log;
    ASSERT_TRUE(v1::ReadTokenFile(token).ok());
    EXPECT_EQ(log.text(), "");
  }
  Chmod(token, 0644);
  Chmod(Tls("client.key"), 0644);
  LogCapture log;
  StatusOr<std::string> read = v1::ReadTokenFile(token);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_FALSE(read->empty());
  EXPECT_NE(log.text().find("[warning] --token-file " + token + ": mode 0644"), std::string::npos)
      << log.text();
  EXPECT_EQ(log.text().find(*read), std::string::npos);  // never the token

  v1::ClientChannelOptions options;
  ASSERT_TRUE(v1::LoadClientSecurity({.tls_ca = Tls("ca.pem").string(),
                                      .tls_cert = Tls("client.pem").string(),
                                      .tls_key = Tls("client.key").string()},
                                     options)
                  .ok());
  EXPECT_NE(log.text().find("[warning] --tls-key " + Tls("client.key").string()),
            std::string::npos)
      << log.text();
}

}  // namespace
}  // namespace ripplekv::scheduler::service
