// ripplekv: measure per-layer KV-cache sensitivity and turn it into budget maps.
// Results go to stdout; progress and logs to stderr. Exit codes: cli/exit_codes.h.

#include <grpcpp/grpcpp.h>

#include "CLI/CLI.hpp"
#include "cli/commands.h"
#include "cli/completion.h"
#include "cli/exit_codes.h"
#include "base/version.h"
#include "kernels/ops/cpu/openblas_version.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

int main(int argc, char** argv) {
  spdlog::set_default_logger(spdlog::stderr_color_mt("ripplekv"));
  spdlog::set_pattern("[%H:%M:%S.%e] %^%l%$ %v");

  CLI::App app{"RippleKV: per-layer KV-cache budgets by measurement"};
  app.set_version_flag("--version", [] {
    return ripplekv::VersionText("ripplekv", {{"grpc", grpc::Version()},
                                              {"openblas", ripplekv::kernels::OpenBlasVersion()}});
  });
  app.require_subcommand(1);
  app.fallthrough();  // -v / -q also work after the subcommand
  bool verbose = false;
  bool quiet = false;
  app.add_flag("-v,--verbose", verbose, "Debug logging on stderr");
  app.add_flag("-q,--quiet", quiet, "Warnings and errors only on stderr");

  ripplekv::cli::Action run;
  ripplekv::cli::AddGenerateCommand(app, run);
  ripplekv::cli::AddPerplexityCommand(app, run);
  ripplekv::cli::AddHashCommand(app, run);
  ripplekv::cli::AddInfoCommand(app, run);
  ripplekv::cli::AddCalibrateCommand(app, run);
  ripplekv::cli::AddBudgetsCommand(app, run);
  ripplekv::cli::AddEvalCommand(app, run);
  ripplekv::cli::AddExamplesCommand(app, run);
  ripplekv::cli::AddTuneCommand(app, run);
  ripplekv::cli::AddCompareCommand(app, run);
  ripplekv::cli::AddTokenizeCommand(app, run);
  ripplekv::cli::AddRemoteCommands(app, run);
  ripplekv::cli::AddMapCommands(app, run);
  ripplekv::cli::AddRolloutCommands(app, run);
  ripplekv::cli::AddAdminCommands(app, run);
  ripplekv::cli::AddHealthCommand(app, run);
  ripplekv::cli::AddCompletionCommand(app, run);  // last: it walks every command above

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? ripplekv::cli::kExitOk : ripplekv::cli::kExitBadInput;
  }
  spdlog::set_level(verbose ? spdlog::level::debug
                            : (quiet ? spdlog::level::warn : spdlog::level::info));
  return run ? run() : ripplekv::cli::kExitBadInput;
}
