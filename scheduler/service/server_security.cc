#include "scheduler/service/server_security.h"

#include <grpcpp/security/server_credentials.h>

#include "base/file_io.h"
#include "base/strings.h"
#include "proto/secret_file_mode.h"
#include "spdlog/spdlog.h"

namespace ripplekv::scheduler::service {
namespace {

constexpr uint64_t kMaxPemBytes = 1 << 20;

}  // namespace

bool IsLoopbackAddress(const std::string& host_port) {
  std::string_view host = host_port;
  if (host.starts_with("[")) {
    const size_t close = host.find(']');
    if (close == std::string_view::npos) return false;
    host = host.substr(1, close - 1);
    return host == "::1";
  }
  const size_t colon = host.rfind(':');
  if (colon != std::string_view::npos) host = host.substr(0, colon);
  return host == "localhost" || host.starts_with("127.");
}

StatusOr<ServerSecurity> MakeServerSecurity(const ServerSecurityOptions& options,
                                            const std::string& listen) {
  ServerSecurity security;
  if (!options.token_file.empty()) {
    // A file that cannot be stat'ed is left to Load, which names the reading error.
    const StatusOr<std::string> mode = v1::SecretFileModeProblem(options.token_file);
    const std::string problem = mode.ok() ? *mode : std::string();
    if (!problem.empty()) {
      if (!options.allow_insecure_token_file) {
        return absl::FailedPreconditionError(
            Cat("token file ", problem,
                " (or pass --allow-insecure-token-file to serve anyway)"));
      }
      spdlog::warn("token file {} (serving anyway: --allow-insecure-token-file)", problem);
    }
    ASSIGN_OR_RETURN(TokenTable table, TokenTable::Load(options.token_file));
    security.tokens = std::make_shared<const TokenTable>(std::move(table));
  }
  const bool tls = !options.tls_cert_file.empty() || !options.tls_key_file.empty();
  if (tls) {
    if (options.tls_cert_file.empty() || options.tls_key_file.empty()) {
      return absl::InvalidArgumentError("TLS needs both a certificate and its key");
    }
    grpc::SslServerCredentialsOptions ssl;
    grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
    ASSIGN_OR_RETURN(pair.cert_chain, ReadFileBounded(options.tls_cert_file, kMaxPemBytes));
    ASSIGN_OR_RETURN(pair.private_key, ReadFileBounded(options.tls_key_file, kMaxPemBytes));
    if (StatusOr<std::string> problem = v1::SecretFileModeProblem(options.tls_key_file);
        problem.ok() && !problem->empty()) {
      spdlog::warn("TLS private key {}", *problem);
    }
    ssl.pem_key_cert_pairs.push_back(std::move(pair));
    if (!options.tls_client_ca_file.empty()) {
      ASSIGN_OR_RETURN(ssl.pem_root_certs,
                       ReadFileBounded(options.tls_client_ca_file, kMaxPemBytes));
      ssl.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
    }
    security.credentials = grpc::SslServerCredentials(ssl);
    security.description =
        options.tls_client_ca_file.empty() ? "TLS" : "TLS with client certificates";
  } else {
    if (!options.tls_client_ca_file.empty()) {
      return absl::InvalidArgumentError("a client CA needs TLS (a certificate and its key)");
    }
    if (!IsLoopbackAddress(listen)) {
      return absl::InvalidArgumentError(
          Cat("plaintext serves only loopback addresses (127.0.0.1, [::1], localhost); ", listen,
              " needs TLS"));
    }
    // The token check needs credentials that run the auth filter; insecure ones do not, local
    // TCP ones do (and accept loopback peers only).
    security.credentials = security.tokens != nullptr
                               ? grpc::experimental::LocalServerCredentials(LOCAL_TCP)
                               : grpc::InsecureServerCredentials();
    security.description = "plaintext on loopback";
  }
  if (security.tokens != nullptr) {
    security.credentials->SetAuthMetadataProcessor(
        std::make_shared<TokenAuthProcessor>(security.tokens));
    security.description += Cat(", ", security.tokens->size(), " bearer tokens");
  } else {
    security.description += ", no bearer tokens";
  }
  return security;
}

}  // namespace ripplekv::scheduler::service
