#include "proto/client_security_flags.h"

namespace ripplekv::v1 {

void AddClientSecurityFlags(CLI::App* cmd, ClientSecurityFiles& files) {
  cmd->add_option("--tls-ca", files.tls_ca,
                  "PEM CA that signed the scheduler's certificate (TLS; without it: plaintext)");
  cmd->add_option("--tls-cert", files.tls_cert, "PEM client certificate (mTLS), with --tls-key");
  cmd->add_option("--tls-key", files.tls_key, "PEM private key of --tls-cert");
  cmd->add_option("--tls-server-name", files.tls_server_name,
                  "Name to check in the scheduler's certificate (default: the address's host)");
  cmd->add_option("--token-file", files.token_file,
                  "File whose first line is the bearer token (docs/SECURITY.md)");
}

}  // namespace ripplekv::v1
