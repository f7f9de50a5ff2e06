#pragma once
// The security flags of every command that talks to a scheduler (docs/SECURITY.md):
// --tls-ca, --tls-cert, --tls-key, --tls-server-name and --token-file. Tokens come from files
// only, never from the command line (which other users of the machine can read).

#include "CLI/CLI.hpp"
#include "proto/client_channel.h"

namespace ripplekv::cli {

// Adds the flags to `cmd`, filling `files`.
void AddSchedulerSecurityFlags(CLI::App* cmd, v1::ClientSecurityFiles& files);

}  // namespace ripplekv::cli
