#include "cli/method_flags.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "cli/profile_view.h"
#include "worker/data/calibration_data.h"

namespace ripplekv::cli {

void AddMethodFlags(CLI::App* cmd, MethodFlags& flags, std::string_view data_help) {
  CLI::Option* data = cmd->add_option("--data", flags.data, std::string(data_help));
  std::string names;
  for (std::string_view name : worker::BuiltinCalibrationNames()) {
    absl::StrAppend(&names, names.empty() ? "" : ", ", std::string(name));
  }
  cmd->add_option("--builtin", flags.builtin,
                  absl::StrCat("Built-in calibration set instead of --data: ", names, " (default ",
                               std::string(worker::kDefaultCalibrationBuiltin),
                               ": prose, code and docs in turn; docs/DATA.md)"))
      ->excludes(data);
  cmd->add_option("--data-seed", flags.data_seed,
                  "Seed of the order in which plain-text windows are spread over the text")
      ->capture_default_str();
  // The values are checked by CheckedCalibrationParams, with the method's messages (the same a
  // scheduler and a worker give), not by the parser.
  cmd->add_option("--samples", flags.samples, "Samples N")->capture_default_str();
  cmd->add_option("--context-len", flags.context_len, "Context tokens C per sample")
      ->capture_default_str();
  cmd->add_option("--probe", flags.probe, "Probe tokens W per sample (W < C)")
      ->capture_default_str();
  cmd->add_option("--alpha", flags.alpha,
                  "Noise scale: expected relative perturbation per value vector")
      ->capture_default_str();
  cmd->add_option("--trials", flags.trials, "Trials per (sample, layer)")->capture_default_str();
  cmd->add_option("--seed", flags.seed, "Noise seed")->capture_default_str();
  cmd->add_option("--mode", flags.mode, "cache (perturb the cache after prefill) or prefill")
      ->capture_default_str();
  cmd->add_option("--layers", flags.layers, "Layers to measure, e.g. 0-3,7 (default: all)");
  cmd->add_flag("--strict", flags.strict, "Reject the data when any sample is too short");
}

StatusOr<method::CalibrationParams> CheckedCalibrationParams(const MethodFlags& flags,
                                                            bool until_stable,
                                                            int64_t max_samples) {
  ASSIGN_OR_RETURN(const method::PerturbMode mode, method::ParsePerturbMode(flags.mode));
  ASSIGN_OR_RETURN(const std::vector<int> layers, ParseLayerList(flags.layers));
  const method::CalibrationParams params{.mode = mode,
                                         .alpha = flags.alpha,
                                         .trials = flags.trials,
                                         .seed = flags.seed,
                                         .samples = flags.samples,
                                         .context_len = flags.context_len,
                                         .probe_len = flags.probe,
                                         .layers = {layers.begin(), layers.end()},
                                         .data_seed = flags.data_seed,
                                         .until_stable = until_stable,
                                         .max_samples = max_samples};
  RETURN_IF_ERROR(method::ValidateCalibrationParams(params, /*n_layers=*/0));
  return params;
}

StatusOr<std::string> BuiltinFromFlags(const MethodFlags& flags) {
  const std::string name =
      flags.builtin.empty() ? std::string(worker::kDefaultCalibrationBuiltin) : flags.builtin;
  if (Status known = worker::CheckBuiltinCalibrationName(name); !known.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--builtin: ", known.message()));
  }
  return name;
}

}  // namespace ripplekv::cli
