#pragma once
// Each subcommand registers itself on the app and sets `run` to its action when selected.
// Actions return the process exit code (exit_codes.h).

#include <functional>

#include "CLI/CLI.hpp"

namespace ripplekv::cli {

using Action = std::function<int()>;

void AddGenerateCommand(CLI::App& app, Action& run);
void AddPerplexityCommand(CLI::App& app, Action& run);
void AddHashCommand(CLI::App& app, Action& run);
void AddInfoCommand(CLI::App& app, Action& run);
void AddCalibrateCommand(CLI::App& app, Action& run);
void AddBudgetsCommand(CLI::App& app, Action& run);
void AddEvalCommand(CLI::App& app, Action& run);
// examples: the examples eval would run, as JSONL token ids, for another engine.
void AddExamplesCommand(CLI::App& app, Action& run);
// tune: RippleKV's ratio and CAKE's temperatures per budget, chosen on the validation split.
void AddTuneCommand(CLI::App& app, Action& run);
// compare: paired statistics of two methods from `eval --records-out` records.
void AddCompareCommand(CLI::App& app, Action& run);
void AddTokenizeCommand(CLI::App& app, Action& run);
// submit, jobs, tasks, workers, watch, cancel, profile {get,list}: the scheduler's
// CalibrationService.
void AddRemoteCommands(CLI::App& app, Action& run);
// map {create,get,list}: frozen budget-map versions on a scheduler (RolloutService).
void AddMapCommands(CLI::App& app, Action& run);
// rollout {start,status,pause,resume,rollback,list}: moving a map version to serving nodes.
void AddRolloutCommands(CLI::App& app, Action& run);
// admin {checkpoint,unquarantine}: the scheduler's AdminService.
void AddAdminCommands(CLI::App& app, Action& run);
// health: the scheduler's gRPC health check, for probes.
void AddHealthCommand(CLI::App& app, Action& run);

}  // namespace ripplekv::cli
