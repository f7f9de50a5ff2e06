// ripplekv hash MODEL [--json]: the model's identity (docs/MODEL_HASH.md). Prints "HASH  PATH"
// like sha256sum; for a single-file model it equals `sha256sum FILE`.

#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "nlohmann/json.hpp"
#include "worker/model/model_hash.h"

namespace ripplekv::cli {

namespace {
struct HashArgs {
  std::string model;
  bool json = false;
};

int RunHash(const HashArgs& args) {
  auto hash = worker::ModelHash(args.model);
  if (!hash.ok()) return ReportError(hash.status());
  if (args.json) {
    std::printf("%s\n", nlohmann::json{{"model", args.model}, {"sha256", *hash}}.dump().c_str());
  } else {
    std::printf("%s  %s\n", hash->c_str(), args.model.c_str());
  }
  return kExitOk;
}
}  // namespace

void AddHashCommand(CLI::App& app, Action& run) {
  auto args = std::make_shared<HashArgs>();
  CLI::App* cmd = app.add_subcommand("hash", "Print the model hash (SHA-256 over the weight files)");
  cmd->add_option("model", args->model, "GGUF file or Hugging Face model directory")->required();
  cmd->add_flag("--json", args->json, "Print one JSON object");
  cmd->callback([args, &run] { run = [args] { return RunHash(*args); }; });
}

}  // namespace ripplekv::cli
