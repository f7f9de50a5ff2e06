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
//   response     — (the response objective, cache mode) trial t keeps budgets[t] of layer l's
//                  context entries per KV head, chosen by the selector from the attention
//                  statistics Prepare recorded in the clean prefill, and resumes the probe pass
//                  at layer l exactly as a cache-mode trial does (a compacted copy of the kept
//                  entries replaces layer l's context); a budget >= C is the clean cache itself,
//                  KL 0 by definition, and is not run. RunHeadResponse measures the same per KV
//                  head, RunHeadMap a whole per-head map jointly.
// RunLayerNaive(l) is the straightforward reference (perturb or compress, then a full forward
// over the whole sequence per trial) that tests compare the fast path against.
//
// Noise: kernels::AddNormAdaptiveNoise keyed by (seed, sample, layer, trial, position, kv head).
// Thread-safety: a prepared SampleCalibrator is read-only; RunLayer may be called concurrently.
// Results are bit-identical for any thread count and for repeated runs.

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "absl/functional/function_ref.h"
#include "base/status.h"
#include "kernels/tensor/tensor.h"
#include "method/calibration_params.h"
#include "method/profile.h"
#include "worker/compress/prefill_observer.h"
#include "worker/compress/selection.h"
#include "worker/engine/kv_cache.h"
#include "worker/engine/transformer.h"

namespace ripplekv::worker {

// kCache: perturb the cached context values after a clean prefill (models compression);
// kPrefill: perturb V_l inside the forward pass at every position (ablation). The method's enum.
using method::PerturbMode;

// The response objective's trials: trial t compresses the measured layer to budgets[t] tokens per
// KV head with `selector`.
struct ResponseTrials {
  SelectionKind selector = SelectionKind::kSnapKv;
  SelectionOptions selection;  // the selector's options (sinks, pooling, H2O's split)
  int window = 32;             // SnapKV's observation window, tokens (the statistics' window)
  std::vector<int> budgets;    // tokens per KV head, ascending, each >= the selector's minimum
  // A per-head response (method::CalibrationParams::kv_heads): the model's KV heads H >= 1, trial
  // t = h * G + g keeping budgets[g] entries of head h alone (RunHeadResponse); 0: per layer.
  int kv_heads = 0;
};

// The engine's view of the method's trial parameters (method/calibration_params.h).
struct TrialOptions {
  float alpha = 0.5f;  // noise scale: expected relative perturbation of each value vector
  int trials = 2;      // trials per (sample, layer), run as one batch in cache mode
  uint64_t seed = 0;   // job seed
  // Set for the response objective: then trials == response->budgets.size() (times
  // response->kv_heads for a per-head response), alpha and seed are not read.
  std::optional<ResponseTrials> response;
};
// The trial options of the method's parameters: alpha as the float the engine computes with
// (exact for every alpha that came as a float: the CLI's flag, the API's field), trials, seed;
// for the response objective the selector (method::kResponseWindow, method::kResponseSinks and
// the selector's other defaults) and the grid.
TrialOptions TrialOptionsOf(const method::CalibrationParams& params);

// What Prepare must record for `options`: the attention statistics the response selector reads
// (SnapKV: window statistics; H2O: accumulated attention; StreamingLLM: the lengths only);
// nullopt for noise trials.
std::optional<ObserverOptions> ObserverOptionsFor(const TrialOptions& options);

class SampleCalibrator {
 public:
  // `model` must outlive the calibrator. sample_index keys the noise. With `observe` (cache mode
  // only), the context prefill also records every layer's attention statistics, which response
  // trials need (ObserverOptionsFor). Errors: InvalidArgument (empty context or probe, token ids
  // out of range, `observe` in prefill mode), ResourceExhausted (C + W beyond memory).
  static StatusOr<std::unique_ptr<SampleCalibrator>> Prepare(
      const Transformer& model, int sample_index, std::span<const int32_t> context,
      std::span<const int32_t> probe, PerturbMode mode,
      const std::optional<ObserverOptions>& observe = std::nullopt);

  // Mean KL over the probe positions (nats) of each trial 0..trials-1 of `layer`. Response trials
  // need a sample prepared with the statistics of their selector (FailedPrecondition otherwise).
  // A per-head response's trials are RunHeadResponse's of each KV head in turn; it needs
  // response->kv_heads == the model's n_kv_heads (InvalidArgument) and a model that holds every
  // KV head (FailedPrecondition on a tensor-parallel shard).
  [[nodiscard]] StatusOr<std::vector<double>> RunLayer(int layer,
                                                       const TrialOptions& options) const;
  // The same quantities by the naive route (no reuse of the clean passes).
  [[nodiscard]] StatusOr<std::vector<double>> RunLayerNaive(int layer,
                                                            const TrialOptions& options) const;

  // The probe's mean KL (nats) against the full cache when every layer l is compressed at once to
  // budgets[l] tokens per KV head by `response`'s selector (a budget >= C keeps the layer whole):
  // a fresh observed prefill, KvCache::Retain on every layer, the whole probe pass. What a budget
  // map costs jointly, against which the sum of the layers' responses is a prediction
  // (docs/BUDGETS.md, "Is the sum a good predictor?"). Needs a sample prepared with the
  // selector's statistics (FailedPrecondition), budgets.size() == n_layers (InvalidArgument).
  [[nodiscard]] StatusOr<double> RunCompressedMap(std::span<const int> budgets,
                                                  const ResponseTrials& response) const;

  // Per-head response (docs/BUDGETS.md, "Per-head budgets, measured"): the probe's mean KL (nats)
  // for each budget t of response.budgets when KV head `kv_head` of `layer` alone keeps
  // budgets[t] entries, the selector's choice for that head (its row of SelectTokens at that
  // budget), and every other head and layer stays whole. Run as RunLayer's response trials are
  // (all budgets batched, the probe pass resumed at `layer`), in a per-trial copy of the layer in
  // which the head's kept entries come first and its dropped ones after them at position
  // INT32_MAX, invisible to every query. A budget >= C gives 0 exactly and is not run. Costs what
  // RunLayer costs for the layer, so a layer's heads cost n_kv_heads times its response.
  // Errors: InvalidArgument (layer or kv_head out of range, an empty grid), FailedPrecondition
  // (prepared without the selector's statistics), SelectTokens' (a budget below its minimum).
  [[nodiscard]] StatusOr<std::vector<double>> RunHeadResponse(int layer, int kv_head,
                                                              const ResponseTrials& response) const;

  // The probe's mean KL (nats) with every KV head h of every layer l compressed at once to
  // budgets[l][h] entries by `response`'s selector (a budget >= C keeps the head whole; the grid
  // is not read). The probe pass resumes at the first layer with a compressed head, every
  // compressed layer attending to its masked copy (as RunHeadResponse, heads of one layer may keep
  // different counts); the layers before it are clean, so their recorded outputs are exact. Equal
  // to RunCompressedMap when every head of a layer has the layer's budget, up to GEMM rounding (a
  // resumed pass instead of a fresh prefill). No compressed head: 0 exactly. Errors:
  // InvalidArgument (budgets not [n_layers][n_kv_heads], a negative budget), FailedPrecondition
  // and SelectTokens' as RunHeadResponse.
  [[nodiscard]] StatusOr<double> RunHeadMap(std::span<const std::vector<int>> budgets,
                                            const ResponseTrials& response) const;

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
  StatusOr<std::vector<double>> RunLayerResponse(int layer, const ResponseTrials& response) const;
  // A per-head response's trials (head-major), batched per head, or one RunHeadMap per trial.
  StatusOr<std::vector<double>> RunLayerHeadResponses(int layer, const ResponseTrials& response,
                                                      bool naive) const;
  StatusOr<std::vector<double>> RunLayerResponseNaive(int layer,
                                                      const ResponseTrials& response) const;
  // The probe's mean KL with every layer l compressed to budgets[l] (naive: a fresh prefill).
  StatusOr<double> CompressedProbeKl(std::span<const int> budgets,
                                     const ResponseTrials& response) const;
  // The entries each KV head of `layer` keeps at `budget` (< C), by the response selector.
  StatusOr<std::vector<std::vector<int32_t>>> Selection(int layer, const ResponseTrials& response,
                                                        int budget) const;
  // A copy of `layer`'s context in which KV head h keeps the entries keep[h] (ascending, each
  // < C; every head non-empty): [n_kv_heads, n, head_dim] keys and values and [n_kv_heads, n]
  // positions, n the most any head keeps. Head h holds its kept entries first, then, up to n,
  // dropped ones at position INT32_MAX (finite data no query sees; the segment stays sorted).
  struct MaskedLayer {
    kernels::Tensor keys, values, positions;
    kernels::KvCacheView view;  // over the three tensors, length n
  };
  StatusOr<MaskedLayer> MaskLayer(int layer, std::span<const std::vector<int32_t>> keep) const;
  // Resumes the probe pass at `first_layer` for `trials` trials at once; at each layer
  // j >= first_layer, trial t attends to *context(t, j) as layer j's context, or to the clean
  // context where context(t, j) is nullptr. Returns each trial's mean KL.
  using TrialContext = absl::FunctionRef<const kernels::KvCacheView*(int trial, int layer)>;
  StatusOr<std::vector<double>> ResumeProbe(int first_layer, int trials,
                                            TrialContext context) const;
  // ResumeProbe with layer_context[t] as trial t's context of `layer` alone.
  StatusOr<std::vector<double>> ResumeProbe(
      int layer, std::span<const kernels::KvCacheView> layer_context) const;
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
  // Each layer's attention statistics of the clean context prefill (empty unless observed), and
  // what was observed.
  std::vector<LayerStats> stats_;
  std::optional<ObserverOptions> observed_;
};

}  // namespace ripplekv::worker
