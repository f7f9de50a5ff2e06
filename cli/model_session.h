#pragma once
// A model opened for the CLI: weights, tokenizer and a Transformer over them.

#include <memory>
#include <string>

#include "CLI/CLI.hpp"
#include "base/status.h"
#include "kernels/ops/devices.h"
#include "worker/engine/tp_group.h"
#include "worker/engine/transformer.h"
#include "worker/model/model.h"
#include "worker/tokenizer/tokenizer.h"

namespace ripplekv::cli {

// The flags of every command that loads a model.
struct ModelFlags {
  std::string weights = "stored";       // --weights stored|f32: host weights
  std::string device = "cpu";           // --device cpu|cuda|cuda:N: where the forward pass runs
  std::string device_weights = "bf16";  // --device-weights bf16|f32: weights on a device
  int tp = 1;  // --tp N: the model split over N ranks (under `mpirun -np N`; docs/DESIGN.md §3.2)
};

struct ModelSession {
  std::string path;
  worker::Model model;
  std::unique_ptr<worker::Tokenizer> tokenizer;
  // The device the Transformer runs on (its stream, BLAS handle, allocator); outlives it.
  std::unique_ptr<kernels::DeviceSession> device;
  // With --tp N > 1: this rank's group (its communicators and its shard of `model`).
  std::unique_ptr<worker::TpGroup> tp;
  // Points into `model` (or the group's shard), `device` and the group.
  std::unique_ptr<worker::Transformer> transformer;

  // Whether this process reports results: always, except on the ranks other than 0 of --tp.
  bool primary() const;
};

// Loads a GGUF file or Hugging Face directory with weights kept as flags.weights says, and makes
// a Transformer on flags.device (uploading the weights as flags.device_weights there). With
// flags.tp > 1 the process must be one of `mpirun -np <tp>` ranks: each loads the model, keeps its
// shard and runs in step with the others (ranks other than 0 log warnings only). Errors:
// InvalidArgument naming a bad flag value; FailedPrecondition with the reason when the device is
// not usable (no CUDA backend, driver or GPU), or --tp without mpirun, MPI or (on a device) NCCL;
// OutOfRange for an ordinal past the device count. With --tp on CUDA, rank r of a node uses
// cuda:(N + r) for --device cuda:N.
// Held by unique_ptr so the Transformer's pointers stay valid.
StatusOr<std::unique_ptr<ModelSession>> OpenModel(const std::string& path, int num_threads,
                                                  const ModelFlags& flags = {});

// Registers `--weights`, `--device` and `--device-weights` on a command that loads a model, and
// `--tp` where the command runs split over ranks (calibrate, perplexity, generate).
void AddModelFlags(CLI::App* cmd, ModelFlags& flags, bool tensor_parallel = false);

// Loads only the tokenizer (fast; no weights).
StatusOr<std::unique_ptr<worker::Tokenizer>> OpenTokenizer(const std::string& path);

// Default worker threads: the machine's hardware threads.
int DefaultThreads();

}  // namespace ripplekv::cli
