#pragma once
// The calibration method's parameters and their rules, in one place (docs/DESIGN.md §2). Every
// shape the parameters travel in embeds CalibrationParams or converts to it in one place: a job's
// spec in the store and a worker's TaskSpec hold it, method::ProfileParams extends it, the proto
// converts in proto/calibration_params.h, the CLI's flags in cli/method_flags.h, and its one JSON
// form is method/calibration_params_json.h. Each entry checks it with ValidateCalibrationParams,
// so a value is refused by the same rule, with the same message, wherever it enters: `--alpha 0`
// fails in `ripplekv calibrate` before any model work exactly as it fails a submitted job.
//
// All functions are pure and thread-safe.

#include <cstdint>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace ripplekv::method {

// Where the perturbation is applied (docs/DESIGN.md §2).
enum class PerturbMode {
  kCache,    // "cache": after prefill, layer l's cached values only (the default method)
  kPrefill,  // "prefill": inside the forward pass, rippling into deeper layers' caches
};
// "cache" / "prefill".
std::string_view PerturbModeName(PerturbMode mode);
// The inverse of PerturbModeName(); InvalidArgument for any other string.
[[nodiscard]] StatusOr<PerturbMode> ParsePerturbMode(std::string_view name);

// What a calibration measures (docs/CALIBRATION.md, "Response profiles").
enum class Objective {
  kNoise,     // "noise": norm-adaptive noise in one layer's values, the method's proxy (default)
  kResponse,  // "response": one layer compressed by a selector to each budget of a grid
};
// "noise" / "response".
std::string_view ObjectiveName(Objective objective);
// The inverse of ObjectiveName(); InvalidArgument for any other string.
[[nodiscard]] StatusOr<Objective> ParseObjective(std::string_view name);

// The token selector a response calibration compresses with: worker/compress/selection.h's rule
// with its default options (SnapKV: observation window kResponseWindow, max-pooling kernel 7;
// StreamingLLM: kResponseSinks sinks; H2O: heavy hitters and recent tokens split evenly).
enum class ResponseSelector {
  kSnapKv,     // "snapkv"
  kH2o,        // "h2o"
  kStreaming,  // "streaming"
};
// "snapkv" / "h2o" / "streaming".
std::string_view ResponseSelectorName(ResponseSelector selector);
// The inverse of ResponseSelectorName(); InvalidArgument for any other string.
[[nodiscard]] StatusOr<ResponseSelector> ParseResponseSelector(std::string_view name);

// SnapKV's observation window (the last context tokens, always kept) and StreamingLLM's sinks in a
// response calibration, tokens: the evaluation's defaults (docs/COMPRESSION.md).
inline constexpr int64_t kResponseWindow = 32;
inline constexpr int64_t kResponseSinks = 4;
// The smallest budget `selector` accepts, tokens: SnapKV the window, StreamingLLM the sinks, H2O 1.
int64_t MinResponseBudget(ResponseSelector selector);
// The budget grid of a response calibration when none is given, tokens, before it is clipped to
// the context (ResolveResponseGrid).
inline constexpr int64_t kDefaultResponseBudgets[] = {16, 32, 64, 128, 256, 512};
// Largest kv_heads of a per-head response calibration.
inline constexpr int64_t kMaxKvHeads = 256;

struct CalibrationParams {
  Objective objective = Objective::kNoise;  // what a trial measures
  PerturbMode mode = PerturbMode::kCache;   // where the noise goes (cache after prefill, prefill)
  double alpha = 0.5;           // norm-adaptive perturbation scale (relative), finite and > 0
  int64_t trials = 2;           // trials per (sample, layer), >= 1
  uint64_t seed = 0;            // Philox key of the noise
  int64_t samples = 8;          // calibration samples N (the round size with until_stable), >= 1
  int64_t context_len = 512;    // tokens of the perturbed context C per sample, >= 1
  int64_t probe_len = 32;       // tokens of the probe W per sample, >= 1 and < context_len
  std::vector<int64_t> layers;  // layers to measure, each in [0, n_layers), no repeats; empty: all
  uint64_t data_seed = 0;       // seed of the plain-text windows' spread order; JSONL ignores it
  // Adaptive sampling: rounds of `samples` samples until the profile is stable or `max_samples`
  // is reached (NextRoundSamples). With it, samples >= 2 (a round is resampled) and
  // max_samples >= samples; without it, max_samples is not read.
  bool until_stable = false;
  int64_t max_samples = 64;  // the cap of until_stable, samples
  // Response calibration only (objective kResponse; a noise calibration leaves them at their
  // defaults). Trial t of a (sample, layer) compresses layer l alone to budgets[t] tokens per KV
  // head with `selector` and measures the probe's KL against the full cache; alpha and seed are
  // not read, and mode is kCache. `budgets` is the resolved grid (ResolveResponseGrid): strictly
  // ascending, each >= MinResponseBudget(selector) and < context_len, then context_len itself
  // (the full cache, KL 0 by definition) last; trials == budgets.size().
  ResponseSelector selector = ResponseSelector::kSnapKv;
  std::vector<int64_t> budgets;
  // Per-head response (docs/CALIBRATION.md, "Per-head response"): the model's KV heads per layer,
  // H >= 1, each measured alone: trial t = h * G + g keeps budgets[g] entries of KV head h of the
  // layer and every other head whole, so trials == H * G for a grid of G budgets. 0: per layer
  // (every head of the layer keeps the budget). Only with objective kResponse, at most
  // kMaxKvHeads; the engine refuses a value other than its model's n_kv_heads.
  int64_t kv_heads = 0;

  friend bool operator==(const CalibrationParams&, const CalibrationParams&) = default;
};

// The parameters with the response grid resolved: for objective kResponse, `budgets` (empty: the
// kDefaultResponseBudgets) sorted, deduplicated, without the budgets below
// MinResponseBudget(selector) or not below context_len, then context_len appended, and `trials`
// set to the grid's size (times kv_heads for a per-head response). Idempotent; other objectives are
// returned unchanged. Every entry (the CLI's flags, a submitted job) resolves once, before
// ValidateCalibrationParams.
CalibrationParams ResolveResponseGrid(CalibrationParams params);

// The trials per (sample, layer) of a response calibration: the grid's size, times kv_heads for a
// per-head response.
int64_t ResponseTrialCount(const CalibrationParams& params);

// Checks every rule of the method's parameters. `n_layers` is the model's layer count; <= 0 means
// not known yet (a CLI before the model is opened, a request before the model is resolved): then
// only the layer rules that need no model are checked (no negative layer, no repeat).
// InvalidArgument naming the field and the value, e.g. "params.alpha: must be finite and > 0,
// got 0"; the first broken rule in the order alpha, trials, samples, context_len, probe_len,
// until_stable's samples and max_samples, layers, then the response rules (a response
// calibration in cache mode with a resolved grid, trials equal to its size; a noise calibration
// with no budgets).
[[nodiscard]] Status ValidateCalibrationParams(const CalibrationParams& p, int64_t n_layers);

// The samples planned once the round after `planned` samples is begun, for until_stable
// calibration with rounds of `samples_per_round` up to `max_samples`:
// min(max_samples, planned + samples_per_round), and never less than `planned` (equal to it once
// the cap is reached). The one step of the worker's local loop and of the scheduler's rounds.
int64_t NextRoundSamples(int64_t samples_per_round, int64_t max_samples, int64_t planned);

}  // namespace ripplekv::method
