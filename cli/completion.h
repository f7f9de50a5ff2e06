#pragma once
// `ripplekv completion bash`: a bash completion script generated from the command definitions
// themselves (the CLI11 app), so it never lists a command or flag the binary does not have. The
// build writes it (cmake/install.cmake) and the package installs it under
// share/bash-completion/completions/ripplekv; by hand: `source <(ripplekv completion bash)`.
//
// What it completes: subcommand names at every level, then the flags of the innermost
// subcommand given so far when the word starts with '-', the choices of a flag whose values are
// a fixed set (CLI::IsMember), and file names for every other flag value or positional argument.

#include <string>

#include "CLI/CLI.hpp"
#include "cli/commands.h"

namespace ripplekv::cli {

// The script for `program` (the command's name as typed) with `app` as its root.
std::string BashCompletion(const CLI::App& app, const std::string& program);

// Adds `completion bash` to `app`; it prints BashCompletion(app, "ripplekv").
void AddCompletionCommand(CLI::App& app, Action& run);

}  // namespace ripplekv::cli
