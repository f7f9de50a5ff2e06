#pragma once
// Perturbation trials of one calibration sample (docs/DESIGN.md §2, normative).
//
// Prepare() runs the clean passes once per sample: the prefill of the context C and the
// teacher-forced probe pass over the W probe tokens, keeping the context cache, the clean probe
// logits z0 and each layer's residual-stream input (at the probe rows in cache mode, at every row
// in prefill mode). RunLayer(l) then measures KL(softmax(z0) || softmax(z')) for every trial of
// layer l:
//   cache mode   — layer l's context values get norm-adaptive noise; the probe pass resumes at
//                  layer l over the W probe rows only; all trials of the layer run as one batch
//                  (their rows are stacked, so each GEMM is T*W rows wide; each trial attends to
//                  the shared clean context cache, its own perturbed copy of layer l's values and
//                  its own probe keys).
//   prefill mode — V_l gets noise at every position inside the forward pass, and layers l..L-1
//                  are recomputed for all C+W rows from the recorded layer-l inputs.
// RunLayerNaive(l) is the straightforward reference (perturb, then a full forward over the whole
// sequence per trial) that tests compare the fast path against.
//
// Noise: kernels::AddNormAdaptiveNoise keyed by (seed, sample, layer, trial, position, kv head).
// Thread-safety: a prepared SampleCalibrator is read-only; RunLayer may be called concurrently.
// Results are bit-identical for any thread count and for repeated runs.

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "base/status.h"
#include "kernels/tensor/tensor.h"
#include "method/calibration_params.h"
#include "method/profile.h"
#include "worker/engine/kv_cache.h"
#include "worker/engine/transformer.h"

namespace ripplekv::worker {

// kCache: perturb the cached context values after a clean prefill (models compression);
// kPrefill: perturb V_l inside the forward pass at every position (ablation). The method's enum.
using method::PerturbMode;

// The engine's view of the method's trial parameters (method/calibration_params.h).
struct TrialOptions {
  float alpha = 0.5f;  // noise scale: expected relative perturbation of each value vector
  int trials = 2;      // trials per (sample, layer), run as one batch in cache mode
  uint64_t seed = 0;   // job seed
};
// The trial options of the method's parameters: alpha as the float the engine computes with
// (exact for every alpha that came as a float: the CLI's flag, the API's field), trials, seed.
TrialOptions TrialOptionsOf(const method::CalibrationParams& params);

class SampleCalibrator {
 public:
  // `model` must outlive the calibrator. sample_index keys the noise. Errors: InvalidArgument
  // (empty context or probe, token ids out of range), ResourceExhausted (C + W beyond memory).
  static StatusOr<std::unique_ptr<SampleCalibrator>> Prepare(const Transformer& model,
                                                             int sample_index,
                                                             std::span<const int32_t> context,
                                                             std::span<const int32_t> probe,
                                                             PerturbMode mode);

  // Mean KL over the probe positions (nats) of each trial 0..trials-1 of `layer`.
  [[nodiscard]] StatusOr<std::vector<double>> RunLayer(int layer,
                                                       const TrialOptions& options) const;
  // The same quantities by the naive route (no reuse of the clean passes).
  [[nodiscard]] StatusOr<std::vector<double>> RunLayerNaive(int layer,
                                                            const TrialOptions& options) const;

  // Bytes this prepared sample holds (clean cache, recorded layer inputs, clean logits): what a
  // worker's bounded cache of prepared samples accounts for.
  int64_t memory_bytes() const;

  int context_len() const { return static_cast<int>(context_.size()); }
  int probe_len() const { return static_cast<int>(probe_.size()); }

 private:
  SampleCalibrator(const Transformer& model, int sample_index, std::span<const int32_t> context,
                   std::span<const int32_t> probe, PerturbMode mode);
  Status CheckArgs(int layer, const TrialOptions& options) const;
  StatusOr<std::vector<double>> RunLayerCache(int layer, const TrialOptions& options) const;
  StatusOr<std::vector<double>> RunLayerPrefill(int layer, const TrialOptions& options,
                                                bool from_embeddings) const;
  StatusOr<std::vector<double>> RunLayerCacheNaive(int layer, const TrialOptions& options) const;
  // Mean over rows of KL(z0 row || logits row), logits: [W, vocab].
  StatusOr<double> MeanKl(const kernels::Tensor& logits, int64_t first_row) const;

  // Immutable after Prepare().
  const Transformer* model_;
  int sample_index_;
  std::vector<int32_t> context_;
  std::vector<int32_t> probe_;
  std::vector<int32_t> tokens_;     // context then probe
  std::vector<int32_t> positions_;  // 0 .. C+W-1
  PerturbMode mode_;
  std::unique_ptr<KvCache> cache_;  // clean: context then probe entries, every layer
  kernels::Tensor clean_logits_;    // z0: [W, vocab]
  // Residual-stream input of each layer: [W, d_model] (cache mode) or [C+W, d_model] (prefill).
  std::vector<kernels::Tensor> layer_inputs_;
};

}  // namespace ripplekv::worker
