#pragma once
// The one way RippleKV clients (the CLI, workers) open a channel to the scheduler: keepalive,
// reconnect backoff and message-size limits as docs/API.md recommends, TLS (optionally with a
// client certificate) and a bearer token on every call (docs/SECURITY.md).

#include <memory>
#include <string>
#include <string_view>

#include "grpcpp/grpcpp.h"
#include "base/status.h"

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

// The token of a token file: its first line, surrounding whitespace trimmed. Logs a warning (and
// goes on) when others may read the file (proto/secret_file_mode.h). Errors: reading (naming the
// path), InvalidArgument when that line is empty. The token is never in a message.
[[nodiscard]] StatusOr<std::string> ReadTokenFile(const std::string& path);

// Reads the files of `files` into the security fields of `options`; warns, as ReadTokenFile does,
// about a --tls-key file others may read. Errors: reading (naming the
// path), InvalidArgument (a certificate without its key or the reverse, a client certificate
// without --tls-ca, an empty token file).
[[nodiscard]] Status LoadClientSecurity(const ClientSecurityFiles& files,
                                        ClientChannelOptions& options);

// A channel to `address` ("host:port"). Keepalive every 20 s (10 s timeout); reconnect backoff
// from 100 ms up to 5 s. TLS when tls_ca_pem is set; otherwise plaintext, and with a token the
// channel uses gRPC's local TCP credentials (so the token may be sent; loopback targets only).
std::shared_ptr<grpc::Channel> MakeClientChannel(const std::string& address,
                                                 const ClientChannelOptions& options = {});

// Appended to the message of a call on a plaintext channel that failed the way a TLS port answers
// a plaintext client: gRPC reports UNAVAILABLE "failed to connect to all addresses; last error:
// UNAVAILABLE: ipv4:127.0.0.1:P: Socket closed" (the server hangs up on the cleartext HTTP/2
// preface), or a connection reset.
inline constexpr std::string_view kTlsHint =
    " (the scheduler may be serving TLS: pass --tls-ca with the CA that signed its certificate, "
    "and --tls-cert/--tls-key if it requires client certificates; docs/SECURITY.md)";

// True when `options` make a plaintext channel (no tls_ca_pem).
inline bool IsPlaintext(const ClientChannelOptions& options) { return options.tls_ca_pem.empty(); }

// kTlsHint when `plaintext` and the call failed with `code` UNAVAILABLE and a `message` saying
// that connecting failed because the peer closed or reset the connection; "" otherwise (a refused
// connection, a connection lost mid-call, a TLS channel, other codes).
std::string_view TlsHintFor(grpc::StatusCode code, std::string_view message, bool plaintext);

}  // namespace ripplekv::v1
