#pragma once
// The calibration method's flags, shared by `ripplekv calibrate` (local) and `ripplekv submit`
// (through a scheduler), so both take the same spellings with the same defaults
// (docs/CALIBRATION.md).

#include <cstdint>
#include <string>
#include <string_view>

#include "CLI/CLI.hpp"
#include "base/status.h"
#include "method/calibration_params.h"

namespace ripplekv::cli {

struct MethodFlags {
  std::string data;        // calibration data file; empty: the built-in set `builtin`
  std::string builtin;     // built-in set (worker/data/calibration_data.h); empty: the default
  uint64_t data_seed = 0;  // seed of the plain-text windows' spread order
  int samples = 8;
  int context_len = 512;
  int probe = 32;
  float alpha = 0.5f;
  int trials = 2;
  uint64_t seed = 0;
  std::string mode = "cache";
  std::string layers;               // "0-3,7"; empty: all layers
  bool strict = false;              // a JSONL record with too few tokens is an error
  std::string objective = "noise";  // what a trial measures: "noise" or "response"
  std::string selector = "snapkv";  // the response objective's token selector
  std::string budgets;              // the response grid, tokens: "16,32,64"; empty: the default
  bool per_head = false;            // a per-head response: every KV head measured alone
};

// Registers --data (described by `data_help`), --builtin (excludes --data), --data-seed,
// --samples, --context-len, --probe, --alpha, --trials, --seed, --mode, --layers, --strict,
// --objective, --selector, --budgets and --per-head on `cmd`, writing into `flags`, which must
// outlive the parse. The --builtin name is checked by the command (BuiltinFromFlags), so that an
// unknown one is an InvalidArgument listing the known ones.
void AddMethodFlags(CLI::App* cmd, MethodFlags& flags, std::string_view data_help);

// The method's parameters the flags give (method/calibration_params.h), with --objective,
// --selector, --mode, --layers and --budgets parsed and --until-stable / --max-samples of the
// commands that take them, the response grid resolved (method::ResolveResponseGrid: with
// --objective response, --trials is one per budget), checked by method::ValidateCalibrationParams
// without a layer count (the layer range needs the model): for the commands to call before any
// model work. InvalidArgument for an unknown --objective, --selector or --mode, a --selector other
// than the default without --objective response, a malformed --layers or --budgets list or any
// parameter the method refuses (the field named).
[[nodiscard]] StatusOr<method::CalibrationParams> CheckedCalibrationParams(
    const MethodFlags& flags, bool until_stable = false, int64_t max_samples = 64);

// The parameters for a model of `n_kv_heads` KV heads: with --per-head, kv_heads set to it and
// the trials resolved again (H times the grid); unchanged otherwise. CheckedCalibrationParams()
// has refused --per-head without --objective response.
[[nodiscard]] StatusOr<method::CalibrationParams> WithModelKvHeads(const MethodFlags& flags,
                                                                   method::CalibrationParams params,
                                                                   int64_t n_kv_heads);

// The built-in set the flags select: --builtin, or kDefaultCalibrationBuiltin when it is empty.
// InvalidArgument listing the known names for an unknown one. Meaningless with --data.
[[nodiscard]] StatusOr<std::string> BuiltinFromFlags(const MethodFlags& flags);

}  // namespace ripplekv::cli
