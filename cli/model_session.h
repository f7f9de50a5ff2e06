#pragma once
// A model opened for the CLI: the flags of the commands that load one, and opening it.

#include <memory>
#include <string>

#include "CLI/CLI.hpp"
#include "base/status.h"
#include "worker/engine/open_engine.h"

namespace ripplekv::cli {

// The flags of every command that loads a model.
struct ModelFlags {
  std::string weights = "stored";       // --weights stored|f32: host weights
  std::string device = "cpu";           // --device cpu|cuda|cuda:N: where the forward pass runs
  std::string device_weights = "bf16";  // --device-weights bf16|f32: weights on a device
  int tp = 1;  // --tp N: the model split over N ranks (under `mpirun -np N`; docs/DESIGN.md §3.2)
};

// worker::OpenEngine (worker/engine/open_engine.h) with the command's flags and `num_threads`,
// the whole world one group under --tp, then logs what was loaded. Errors: those of OpenEngine.
StatusOr<std::unique_ptr<worker::Engine>> OpenModel(const std::string& path, int num_threads,
                                                  const ModelFlags& flags = {});

// Registers `--weights`, `--device` and `--device-weights` on a command that loads a model, and
// `--tp` where the command runs split over ranks (calibrate, perplexity, generate).
void AddModelFlags(CLI::App* cmd, ModelFlags& flags, bool tensor_parallel = false);

// Default worker threads: the machine's hardware threads.
int DefaultThreads();

}  // namespace ripplekv::cli
