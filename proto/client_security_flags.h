#pragma once
// The security flags of every client of a scheduler, the CLI's commands and ripplekv-worker alike
// (docs/SECURITY.md): --tls-ca, --tls-cert, --tls-key, --tls-server-name and --token-file. Tokens
// come from files only, never from the command line (which other users of the machine can read).

#include "CLI/CLI.hpp"
#include "proto/client_channel.h"

namespace ripplekv::v1 {

// Adds the flags to `cmd`, filling `files` (LoadClientSecurity reads them).
void AddClientSecurityFlags(CLI::App* cmd, ClientSecurityFiles& files);

}  // namespace ripplekv::v1
