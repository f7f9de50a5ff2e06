#include "proto/client_channel.h"

#include <grpcpp/security/credentials.h>

#include <map>

#include "absl/strings/ascii.h"
#include "base/file_io.h"
#include "base/strings.h"
#include "proto/secret_file_mode.h"
#include "spdlog/spdlog.h"

namespace ripplekv::v1 {
namespace {

constexpr uint64_t kMaxFileBytes = 1 << 20;

// Adds "authorization: Bearer <token>" to every call. Runs inline (no I/O).
class BearerTokenPlugin : public grpc::MetadataCredentialsPlugin {
 public:
  explicit BearerTokenPlugin(std::string token) : header_("Bearer " + std::move(token)) {}
  bool IsBlocking() const override { return false; }
  const char* GetType() const override { return "ripplekv-bearer"; }
  grpc::Status GetMetadata(grpc::string_ref /*service_url*/, grpc::string_ref /*method_name*/,
                           const grpc::AuthContext& /*channel_auth_context*/,
                           std::multimap<grpc::string, grpc::string>* metadata) override {
    metadata->insert({"authorization", header_});
    return grpc::Status::OK;
  }
  grpc::string DebugString() override { return "ripplekv bearer token"; }  // never the token

 private:
  std::string header_;
};

// Logs what is wrong with the mode of the secret file `path`, `what` naming the flag; a client
// goes on (the scheduler refuses such a token file of its own).
void WarnAboutMode(const std::string& path, std::string_view what) {
  const StatusOr<std::string> problem = SecretFileModeProblem(path);
  if (problem.ok() && !problem->empty()) spdlog::warn("{} {}", what, *problem);
}

}  // namespace

StatusOr<std::string> ReadTokenFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadFileBounded(path, kMaxFileBytes));
  WarnAboutMode(path, "--token-file");
  const size_t end = text.find('\n');
  std::string token(absl::StripAsciiWhitespace(Sv(std::string_view(text).substr(0, end))));
  if (token.empty())
    return absl::InvalidArgumentError(Cat(path, ": the first line holds no token"));
  return token;
}

Status LoadClientSecurity(const ClientSecurityFiles& files, ClientChannelOptions& options) {
  if (files.tls_cert.empty() != files.tls_key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  if (!files.tls_cert.empty() && files.tls_ca.empty()) {
    return absl::InvalidArgumentError("--tls-cert needs --tls-ca (the server's CA)");
  }
  if (!files.tls_ca.empty()) {
    ASSIGN_OR_RETURN(options.tls_ca_pem, ReadFileBounded(files.tls_ca, kMaxFileBytes));
  }
  if (!files.tls_cert.empty()) {
    ASSIGN_OR_RETURN(options.tls_cert_pem, ReadFileBounded(files.tls_cert, kMaxFileBytes));
    ASSIGN_OR_RETURN(options.tls_key_pem, ReadFileBounded(files.tls_key, kMaxFileBytes));
    WarnAboutMode(files.tls_key, "--tls-key");
  }
  options.tls_server_name = files.tls_server_name;
  if (!files.token_file.empty()) {
    ASSIGN_OR_RETURN(options.token, ReadTokenFile(files.token_file));
  }
  return absl::OkStatus();
}

std::shared_ptr<grpc::Channel> MakeClientChannel(const std::string& address,
                                                 const ClientChannelOptions& options) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 20000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, options.keepalive_without_calls ? 1 : 0);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 5000);
  args.SetMaxReceiveMessageSize(options.max_receive_bytes);
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  if (!options.tls_ca_pem.empty()) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = options.tls_ca_pem;
    ssl.pem_cert_chain = options.tls_cert_pem;
    ssl.pem_private_key = options.tls_key_pem;
    credentials = grpc::SslCredentials(ssl);
    if (!options.tls_server_name.empty()) args.SetSslTargetNameOverride(options.tls_server_name);
  } else if (!options.token.empty()) {
    // Insecure credentials cannot carry call credentials; local TCP ones can (loopback only).
    credentials = grpc::experimental::LocalCredentials(LOCAL_TCP);
  } else {
    credentials = grpc::InsecureChannelCredentials();
  }
  if (!options.token.empty()) {
    // Security level NONE lets the token ride the local (plaintext loopback) channel too; over
    // TLS the channel's level is higher anyway.
    credentials = grpc::CompositeChannelCredentials(
        credentials, grpc::experimental::MetadataCredentialsFromPlugin(
                         std::make_unique<BearerTokenPlugin>(options.token), GRPC_SECURITY_NONE));
  }
  return grpc::CreateCustomChannel(address, credentials, args);
}

std::string_view TlsHintFor(grpc::StatusCode code, std::string_view message, bool plaintext) {
  if (!plaintext || code != grpc::StatusCode::UNAVAILABLE) return {};
  // Only while connecting: a plaintext scheduler that exits mid-call also closes the socket.
  if (message.find("failed to connect") == std::string_view::npos) return {};
  for (std::string_view sign : {"Socket closed", "Connection reset", "connection reset"}) {
    if (message.find(sign) != std::string_view::npos) return kTlsHint;
  }
  return {};
}

}  // namespace ripplekv::v1
