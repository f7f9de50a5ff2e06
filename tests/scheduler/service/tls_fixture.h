#pragma once
// TLS material for the scheduler service tests, made by deploy/local/make-tls (needs openssl) into
// a test's directory: ca.pem, server.pem/.key, client.pem/.key, the token file `tokens` and one
// token-ROLE file a role. Each run makes a fresh CA, so two directories are two strangers.

#include <cstdlib>
#include <string>

namespace ripplekv::scheduler::service {

// What a test says when MakeTls fails.
inline constexpr const char* kMakeTlsFailed =
    "deploy/local/make-tls failed (is openssl installed?)";

// Runs deploy/local/make-tls DIR, its output discarded; true on success.
inline bool MakeTls(const std::string& dir) {
  const std::string command =
      std::string(RIPPLEKV_SOURCE_DIR) + "/deploy/local/make-tls '" + dir + "' >/dev/null 2>&1";
  return std::system(command.c_str()) == 0;
}

}  // namespace ripplekv::scheduler::service
