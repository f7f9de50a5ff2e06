#pragma once
// How the scheduler's port is secured (docs/SECURITY.md): TLS with a server certificate,
// optionally requiring client certificates (mTLS), or plaintext on a loopback address only; and,
// when a token file is given, the bearer-token role check of auth.h on every call.

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "base/status.h"
#include "scheduler/service/auth.h"

namespace ripplekv::scheduler::service {

struct ServerSecurityOptions {
  std::string tls_cert_file;       // PEM server certificate chain; empty: plaintext (loopback)
  std::string tls_key_file;        // PEM private key of tls_cert_file; required with it
  std::string tls_client_ca_file;  // PEM CA; when set, clients must present a certificate it signed
  std::string token_file;          // bearer tokens (auth.h); empty: no token check
  // Serve even when token_file's mode lets others read it (v1::SecretFileModeProblem), with a
  // warning instead of FailedPrecondition.
  bool allow_insecure_token_file = false;
};

// What Start needs to open the port.
struct ServerSecurity {
  std::shared_ptr<grpc::ServerCredentials> credentials;
  std::shared_ptr<const TokenTable> tokens;  // null without a token file
  std::string description;                   // for the startup log, e.g. "TLS, mTLS, 5 tokens"
};

// True for "127.0.0.1:P" (any 127/8), "[::1]:P" and "localhost:P".
bool IsLoopbackAddress(const std::string& host_port);

// Reads the certificate, key, CA and token files and builds the credentials for `listen`.
// A token file with a v1::SecretFileModeProblem is FailedPrecondition (naming the file, its mode,
// chmod 600 and --allow-insecure-token-file) unless options.allow_insecure_token_file, which logs
// it as a warning; a private key with one is a warning.
// Plaintext: a non-loopback `listen` is InvalidArgument; with tokens the port uses gRPC's local
// TCP credentials (loopback peers only) so that the token check runs; without tokens, plain
// insecure credentials (no check). Errors: InvalidArgument (key without certificate or the
// reverse, a client CA without TLS, a bad token file), FailedPrecondition (above), the file
// errors of reading (naming the path).
[[nodiscard]] StatusOr<ServerSecurity> MakeServerSecurity(const ServerSecurityOptions& options,
                                                          const std::string& listen);

}  // namespace ripplekv::scheduler::service
