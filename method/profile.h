#pragma once
// The sensitivity profile of one model (docs/DESIGN.md §2): per layer, the mean KL divergence of
// the output distribution when that layer's value cache is perturbed, with its standard error, plus
// everything needed to reproduce or audit the measurement. It is the input of budget mapping and
// is stored keyed by model hash, versioned and never overwritten (docs/DESIGN.md §3).
//
// On disk it is one JSON document (schema in docs/BUDGETS.md). Reading is strict: a missing or
// mistyped field, an unknown key or an inconsistent value is an error naming its JSON path, so a
// profile that loads is one the budget map can use. Doubles are written in the shortest form that
// reads back to the same bits, so a write/read round trip is exact.
//
// All functions are thread-safe (no shared state).

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "method/calibration_params.h"

namespace ripplekv::method {

// The schema version this code writes. Version 2 added the response objective (params'
// "objective", "selector", "budgets" and each layer's "response"); a version 1 document reads as
// a noise profile of version 2 (the migration, docs/BUDGETS.md).
inline constexpr int kProfileSchemaVersion = 2;
// Largest profile file ReadProfileFile() accepts, bytes.
inline constexpr uint64_t kMaxProfileFileBytes = 256ull << 20;

// The model a profile was measured on.
struct ProfileModel {
  std::string hash;          // model hash (docs/MODEL_HASH.md), lowercase hex; non-empty
  std::string architecture;  // e.g. "llama"
  std::string name;          // human-readable model name; may be empty
  int64_t n_layers = 0;      // L, > 0
  int64_t n_kv_heads = 0;    // H_kv, > 0
  int64_t head_dim = 0;      // d, > 0
  int64_t d_model = 0;       // residual width, > 0
  int64_t vocab_size = 0;    // > 0
};

// The calibration parameters of the measurement (method/calibration_params.h) and where its data
// came from. A profile records the samples measured: `samples` is their count (the final one of an
// until_stable calibration), and the submission-only members stay at their defaults (until_stable
// false, max_samples and data_seed as CalibrationParams{} has them; MeasuredParams sets them so).
// `layers` lists the layers evaluated, strictly ascending, each in [0, n_layers).
struct ProfileParams : CalibrationParams {
  std::string data_source;  // description of the calibration set (file, dataset, hash)
  // The kind of text the samples are: "prose", "code", "docs", "mixed" (the built-in sets,
  // docs/DATA.md), "user" (a file or inline data); empty when unknown (profiles written before the
  // field existed). JSON: "data_domain", omitted when empty.
  std::string data_domain;
};

// What a profile records of a calibration with `params` that measured `samples` samples: the same
// parameters with that sample count and the submission-only members at their defaults.
ProfileParams MeasuredParams(const CalibrationParams& params, int64_t samples,
                             std::string data_source, std::string data_domain);

// One point of a layer's compression response (a response profile).
struct ResponsePoint {
  int64_t budget = 0;      // tokens per KV head: params.budgets[t]
  double mean_kl = 0.0;    // mean over samples of trial t's KL, nats, >= 0
  double std_error = 0.0;  // of mean_kl over samples (n - 1 denominator) / sqrt(n); 0 for n = 1
};

// One layer's sensitivity.
struct LayerSensitivity {
  int64_t layer = 0;     // layer index
  double mean_kl = 0.0;  // s_l: mean of KL(s, l, t) over samples and trials, nats, >= 0
  // Standard error of mean_kl from the per-sample means: stddev(per_sample_mean, n - 1
  // denominator) / sqrt(n); 0 with one sample. Named `stderr` in JSON (`stderr` is a C macro).
  double std_error = 0.0;
  int64_t count = 0;                    // number of KL values averaged, > 0
  std::vector<double> per_sample_mean;  // mean over trials, one per sample in sample order
  // Response profiles: one point per params.budgets entry, in the same order (the last, the full
  // cache, is 0); empty for noise profiles. In a response profile mean_kl is the mean over the
  // grid. JSON: "response", omitted when empty.
  std::vector<ResponsePoint> response;
  // Per-head response profiles (params.kv_heads H > 0): [H] each KV head's points, as `response`
  // is for the layer (trial h * G + g measured head h alone at params.budgets[g]); `response` is
  // then their sum per budget, per sample (the layer's predicted response when every head keeps
  // the budget), and mean_kl the mean over every head's points. Empty otherwise. JSON:
  // "head_response", omitted when empty.
  std::vector<std::vector<ResponsePoint>> head_response;
};

// One layer's bootstrap intervals (ProfileStability).
struct LayerStability {
  int64_t layer = 0;    // layer index
  double kl_low = 0.0;  // interval of mean_kl, nats, 0 <= kl_low <= kl_high
  double kl_high = 0.0;
  double share = 0.0;      // the layer's budget over the average budget, b_l / B, at `ratio` (> 0)
  double share_low = 0.0;  // its interval, 0 < share_low <= share_high
  double share_high = 0.0;
};

// How much a profile moves when its samples are resampled (method/profile_stability.h computes it;
// docs/CALIBRATION.md, "Stability"). Replicate k draws params.samples samples with replacement
// (the same draw for every layer) and recomputes every layer's mean; the intervals are the
// replicates' (1 - level) / 2 and (1 + level) / 2 quantiles.
struct ProfileStability {
  uint64_t seed = 0;       // seed of the resampling draw
  int64_t resamples = 0;   // replicates, > 0
  double level = 0.0;      // coverage of every interval, in (0, 1)
  double ratio = 0.0;      // budget ratio r of the shares (min-max normalization), >= 1
  double tolerance = 0.0;  // `stable` bound on the relative half-width of the share intervals
  std::vector<LayerStability> layers;    // one per profile layer, in the same order
  double rank_correlation_median = 0.0;  // median Spearman correlation, replicate vs profile
  double rank_correlation_low = 0.0;     // its (1 - level) / 2 quantile
  int64_t top_layer = 0;                 // the profile's most sensitive layer
  double top_layer_frequency = 0.0;      // share of replicates whose most sensitive layer it is
  // max over layers of max(share - share_low, share_high - share) / share.
  double max_share_deviation = 0.0;
  bool stable = false;  // max_share_deviation <= tolerance
};

// How the scheduler verified a job's results (docs/SCHEDULER.md, "Verified results"): a seeded
// fraction of the tasks ran again on a second, distinct worker, and the task counted only when the
// two results agreed; on a disagreement a third worker decided, the outvoted worker was
// quarantined and every task it had completed in the job was run again.
struct ProfileVerification {
  double fraction = 0;          // the job's verify fraction, finite, in [0, 1]
  uint64_t tasks_verified = 0;  // tasks whose results two distinct workers agreed on
  // Tasks drawn for verification that completed unverified: no second worker registered within
  // the scheduler's verify wait.
  uint64_t tasks_unverified = 0;
  // Tasks run again because the worker that completed them was outvoted.
  uint64_t tasks_recomputed = 0;
  // One verification in which a worker was outvoted.
  struct Disagreement {
    uint32_t sample = 0;          // the task's sample, < params.samples
    uint32_t layer = 0;           // the task's layer, one of params.layers
    std::string outvoted_worker;  // its id, non-empty; quarantined
    // The distinct workers whose results agreed: at least two, none of them outvoted_worker.
    std::vector<std::string> agreeing_workers;
  };
  std::vector<Disagreement> disagreements;  // in the order they were decided
};

struct SensitivityProfile {
  int schema_version = kProfileSchemaVersion;
  ProfileModel model;
  ProfileParams params;
  std::vector<LayerSensitivity> layers;  // one per params.layers entry, in the same order
  // The bootstrap over samples; absent for profiles of one sample (nothing to resample) and for
  // profiles written before it existed. JSON: "stability", omitted when absent.
  std::optional<ProfileStability> stability;
  std::string created_at;    // ISO-8601, e.g. "2025-01-31T12:00:00Z"
  std::string tool_version;  // e.g. "ripplekv 0.1.0"
  // How the scheduler verified the job's results (docs/SCHEDULER.md, "Verified results"); absent
  // for profiles computed locally and for jobs with verification off. JSON: "verification",
  // omitted when absent.
  std::optional<ProfileVerification> verification;
};

// Checks the invariants documented on the fields above, and that `layers` matches params.layers
// one to one, every per_sample_mean has params.samples finite non-negative entries, and count ==
// params.samples * params.trials; each layer's response points are present only in a profile of
// objective response, one per params.budgets entry with that budget, finite and non-negative, the
// last (the full cache) with mean_kl 0, and head_response has params.kv_heads such lists (none
// when kv_heads is 0, which a profile with kv_heads must equal model.n_kv_heads); a stability
// block, when present, must match the profile's layers one to one with finite ordered intervals and
// parameters in range; a verification block, when present, must have its fraction in [0, 1] and
// each disagreement a (sample, layer) of the profile, an outvoted worker and at least two distinct
// other agreeing workers. Errors: FailedPrecondition (schema_version other than
// kProfileSchemaVersion), InvalidArgument naming the JSON path of the first bad field.
[[nodiscard]] Status ValidateProfile(const SensitivityProfile& profile);

// A model summary alone, as the profile's "model" object (the scheduler keeps the summaries
// workers report this way), and back: InvalidArgument naming the field.
std::string ProfileModelToJson(const ProfileModel& model);
[[nodiscard]] StatusOr<ProfileModel> ProfileModelFromJson(std::string_view json_text);

// The JSON text of a valid profile (ValidateProfile() runs first and its error is returned).
[[nodiscard]] StatusOr<std::string> ProfileToJson(const SensitivityProfile& profile);

// Parses and validates a profile. A version 1 document (which has no response members) reads as
// a noise profile with schema_version kProfileSchemaVersion. Errors: InvalidArgument (JSON syntax,
// with the byte offset; a missing, mistyped or unknown field, or a failed ValidateProfile() check,
// naming the JSON path, e.g. "layers[3].mean_kl"), FailedPrecondition (a schema_version other
// than 1 and kProfileSchemaVersion).
[[nodiscard]] StatusOr<SensitivityProfile> ProfileFromJson(std::string_view json_text);

// Reads and parses the profile at `path` (at most kMaxProfileFileBytes). Errors as
// ReadFileBounded() and ProfileFromJson(), with `path` prefixed to the message.
[[nodiscard]] StatusOr<SensitivityProfile> ReadProfileFile(const std::string& path);

// Validates and writes `profile` to `path` atomically (WriteFileAtomically()).
[[nodiscard]] Status WriteProfileFile(const std::string& path, const SensitivityProfile& profile);

// `time` in UTC as "YYYY-MM-DDTHH:MM:SSZ", the created_at format this code writes.
std::string FormatIso8601Utc(std::chrono::system_clock::time_point time);

// Whether `text` is an ISO-8601 date-time "YYYY-MM-DDTHH:MM:SS[.fraction](Z|+HH:MM|-HH:MM)" with
// fields in range (month 1-12, day 1-31, hour 0-23, minute 0-59, second 0-60).
bool IsIso8601DateTime(std::string_view text);

}  // namespace ripplekv::method
