#pragma once
// Autoregressive generation: one prefill of the prompt, then one decode step per new token.

#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "base/status.h"
#include "worker/engine/sampler.h"
#include "worker/engine/transformer.h"

namespace ripplekv::worker {

struct GenerateOptions {
  int max_new_tokens = 128;     // upper bound on generated tokens
  SamplerOptions sampler;       // greedy by default
  // Tokens that end generation (EOS, <|im_end|>, ...); the stop token is not emitted.
  std::function<bool(int32_t)> is_stop;
};

struct GenerateResult {
  std::vector<int32_t> tokens;  // generated tokens, without the prompt and without the stop token
  bool stopped = false;         // true when a stop token ended generation
  double prefill_seconds = 0.0;
  double decode_seconds = 0.0;  // all decode steps together
};

// Calls on_token(id) as each token is chosen (for streaming output). ResourceExhausted when
// prompt + max_new_tokens exceeds what the model's trained context allows.
StatusOr<GenerateResult> Generate(const Transformer& model, std::span<const int32_t> prompt,
                                  const GenerateOptions& options,
                                  const std::function<void(int32_t)>& on_token = nullptr);

}  // namespace ripplekv::worker
