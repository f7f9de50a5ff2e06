#pragma once
// The one way RippleKV clients (the CLI, workers) open a channel to the scheduler: keepalive,
// reconnect backoff and message-size limits as docs/API.md recommends, TLS (optionally with a
// client certificate) and a bearer token on every call (docs/SECURITY.md).

#include <memory>
#include <string>

#include "grpcpp/grpcpp.h"
#include "kernels/base/status.h"

namespace ripplekv::v1 {

struct ClientChannelOptions {
  bool keepalive_without_calls = false;  // ping an idle channel (long-lived worker streams)
  int max_receive_bytes = 64 << 20;      // largest message accepted, bytes (inline data <= 32 MiB)
  // Security. An empty tls_ca_pem means plaintext, which a scheduler serves on loopback only.
  std::string tls_ca_pem;       // PEM CA(s) that signed the server's certificate
  std::string tls_cert_pem;     // PEM client certificate chain for mTLS; with tls_key_pem
  std::string tls_key_pem;      // PEM private key of tls_cert_pem
  std::string tls_server_name;  // name checked in the server's certificate; empty: the host
  std::string token;            // sent as "authorization: Bearer <token>"; empty: none
};

// The files behind ClientChannelOptions' security fields, as the command-line flags name them
// (--tls-ca, --tls-cert, --tls-key, --tls-server-name, --token-file). Empty: not used.
struct ClientSecurityFiles {
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
  std::string tls_server_name;  // a name, not a file
  std::string token_file;
};

// The token of a token file: its first line, surrounding whitespace trimmed. Errors: reading
// (naming the path), InvalidArgument when that line is empty. The token is never in a message.
[[nodiscard]] StatusOr<std::string> ReadTokenFile(const std::string& path);

// Reads the files of `files` into the security fields of `options`. Errors: reading (naming the
// path), InvalidArgument (a certificate without its key or the reverse, a client certificate
// without --tls-ca, an empty token file).
[[nodiscard]] Status LoadClientSecurity(const ClientSecurityFiles& files,
                                        ClientChannelOptions& options);

// A channel to `address` ("host:port"). Keepalive every 20 s (10 s timeout); reconnect backoff
// from 100 ms up to 5 s. TLS when tls_ca_pem is set; otherwise plaintext, and with a token the
// channel uses gRPC's local TCP credentials (so the token may be sent; loopback targets only).
std::shared_ptr<grpc::Channel> MakeClientChannel(const std::string& address,
                                                 const ClientChannelOptions& options = {});

}  // namespace ripplekv::v1
