#pragma once
// A model opened for the CLI: weights, tokenizer and a Transformer over them.

#include <memory>
#include <string>

#include "CLI/CLI.hpp"
#include "kernels/base/status.h"
#include "worker/engine/transformer.h"
#include "worker/model/model.h"
#include "worker/tokenizer/tokenizer.h"

namespace ripplekv::cli {

struct ModelSession {
  std::string path;
  worker::Model model;
  std::unique_ptr<worker::Tokenizer> tokenizer;
  std::unique_ptr<worker::Transformer> transformer;  // points into `model`
};

// Loads a GGUF file or Hugging Face directory with weights kept as `weights` says ("stored" or
// "f32", the --weights flag; InvalidArgument otherwise). Held by unique_ptr so the Transformer's
// pointer to the model stays valid.
StatusOr<std::unique_ptr<ModelSession>> OpenModel(const std::string& path, int num_threads,
                                                  const std::string& weights = "stored");

// Registers `--weights stored|f32` on a command that loads a model.
void AddWeightsFlag(CLI::App* cmd, std::string& weights);

// Loads only the tokenizer (fast; no weights).
StatusOr<std::unique_ptr<worker::Tokenizer>> OpenTokenizer(const std::string& path);

// Default worker threads: the machine's hardware threads.
int DefaultThreads();

}  // namespace ripplekv::cli
