#pragma once
// The calibration method's flags, shared by `ripplekv calibrate` (local) and `ripplekv submit`
// (through a scheduler), so both take the same spellings with the same defaults
// (docs/CALIBRATION.md).

#include <cstdint>
#include <string>
#include <string_view>

#include "CLI/CLI.hpp"

namespace ripplekv::cli {

struct MethodFlags {
  std::string data;  // calibration data file; empty: the built-in prose set
  int samples = 8;
  int context_len = 512;
  int probe = 32;
  float alpha = 0.5f;
  int trials = 2;
  uint64_t seed = 0;
  std::string mode = "cache";
  std::string layers;   // "0-3,7"; empty: all layers
  bool strict = false;  // a JSONL record with too few tokens is an error
};

// Registers --data (described by `data_help`), --samples, --context-len, --probe, --alpha,
// --trials, --seed, --mode, --layers and --strict on `cmd`, writing into `flags`, which must
// outlive the parse.
void AddMethodFlags(CLI::App* cmd, MethodFlags& flags, std::string_view data_help);

}  // namespace ripplekv::cli
