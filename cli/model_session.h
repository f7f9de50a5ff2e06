#pragma once
// A model opened for the CLI: weights, tokenizer and a Transformer over them.

#include <memory>
#include <string>

#include "CLI/CLI.hpp"
#include "kernels/base/status.h"
#include "kernels/ops/devices.h"
#include "worker/engine/transformer.h"
#include "worker/model/model.h"
#include "worker/tokenizer/tokenizer.h"

namespace ripplekv::cli {

// The flags of every command that loads a model.
struct ModelFlags {
  std::string weights = "stored";       // --weights stored|f32: host weights
  std::string device = "cpu";           // --device cpu|cuda|cuda:N: where the forward pass runs
  std::string device_weights = "bf16";  // --device-weights bf16|f32: weights on a device
};

struct ModelSession {
  std::string path;
  worker::Model model;
  std::unique_ptr<worker::Tokenizer> tokenizer;
  // The device the Transformer runs on (its stream, BLAS handle, allocator); outlives it.
  std::unique_ptr<kernels::DeviceSession> device;
  std::unique_ptr<worker::Transformer> transformer;  // points into `model` and `device`
};

// Loads a GGUF file or Hugging Face directory with weights kept as flags.weights says, and makes
// a Transformer on flags.device (uploading the weights as flags.device_weights there). Errors:
// InvalidArgument naming a bad flag value; FailedPrecondition with the reason when the device is
// not usable (no CUDA backend, driver or GPU); OutOfRange for an ordinal past the device count.
// Held by unique_ptr so the Transformer's pointers stay valid.
StatusOr<std::unique_ptr<ModelSession>> OpenModel(const std::string& path, int num_threads,
                                                  const ModelFlags& flags = {});

// Registers `--weights`, `--device` and `--device-weights` on a command that loads a model.
void AddModelFlags(CLI::App* cmd, ModelFlags& flags);

// Loads only the tokenizer (fast; no weights).
StatusOr<std::unique_ptr<worker::Tokenizer>> OpenTokenizer(const std::string& path);

// Default worker threads: the machine's hardware threads.
int DefaultThreads();

}  // namespace ripplekv::cli
