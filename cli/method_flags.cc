#include "cli/method_flags.h"

namespace ripplekv::cli {

void AddMethodFlags(CLI::App* cmd, MethodFlags& flags, std::string_view data_help) {
  cmd->add_option("--data", flags.data, std::string(data_help));
  cmd->add_option("--samples", flags.samples, "Samples N")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--context-len", flags.context_len, "Context tokens C per sample")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--probe", flags.probe, "Probe tokens W per sample (W < C)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--alpha", flags.alpha,
                  "Noise scale: expected relative perturbation per value vector")
      ->capture_default_str();
  cmd->add_option("--trials", flags.trials, "Trials per (sample, layer)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--seed", flags.seed, "Noise seed")->capture_default_str();
  cmd->add_option("--mode", flags.mode, "cache (perturb the cache after prefill) or prefill")
      ->capture_default_str();
  cmd->add_option("--layers", flags.layers, "Layers to measure, e.g. 0-3,7 (default: all)");
  cmd->add_flag("--strict", flags.strict, "Reject the data when any sample is too short");
}

}  // namespace ripplekv::cli
