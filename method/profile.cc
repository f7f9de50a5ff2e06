#include "method/profile.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/file_io.h"
#include "base/strings.h"
#include "method/calibration_params.h"
#include "method/calibration_params_json.h"
#include "method/json_fields.h"

namespace ripplekv::method {
namespace {

using json_fields::AsDouble;
using json_fields::AsInt;
using json_fields::AsString;
using json_fields::AsUint;
using json_fields::Child;
using json_fields::Index;
using json_fields::Json;
using json_fields::Member;
using json_fields::OrderedJson;

constexpr std::string_view kWhat = "profile";

Status Bad(const std::string& path, std::string_view problem) {
  return json_fields::Error(kWhat, path, problem);
}

Status CheckPositive(int64_t value, const std::string& path) {
  if (value <= 0) return Bad(path, absl::StrCat("must be > 0, got ", value));
  return absl::OkStatus();
}

Status CheckNonNegativeFinite(double value, const std::string& path) {
  if (!std::isfinite(value) || value < 0) {
    return Bad(path, absl::StrCat("must be finite and >= 0, got ", value));
  }
  return absl::OkStatus();
}

bool AllDigits(std::string_view s, size_t begin, size_t n) {
  if (begin + n > s.size()) return false;
  for (size_t i = begin; i < begin + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
  }
  return true;
}

int Number(std::string_view s, size_t begin, size_t n) {
  int v = 0;
  for (size_t i = begin; i < begin + n; ++i) v = v * 10 + (s[i] - '0');
  return v;
}

// Field readers: member `key` of `object` at `path`, converted.
StatusOr<std::string> GetString(const Json& object, const std::string& path, std::string_view key) {
  ASSIGN_OR_RETURN(const Json* v, Member(object, kWhat, path, key));
  return AsString(*v, kWhat, Child(path, key));
}
StatusOr<int64_t> GetInt(const Json& object, const std::string& path, std::string_view key) {
  ASSIGN_OR_RETURN(const Json* v, Member(object, kWhat, path, key));
  return AsInt(*v, kWhat, Child(path, key));
}
StatusOr<double> GetDouble(const Json& object, const std::string& path, std::string_view key) {
  ASSIGN_OR_RETURN(const Json* v, Member(object, kWhat, path, key));
  return AsDouble(*v, kWhat, Child(path, key));
}
StatusOr<const Json*> GetArray(const Json& object, const std::string& path, std::string_view key) {
  ASSIGN_OR_RETURN(const Json* v, Member(object, kWhat, path, key));
  RETURN_IF_ERROR(json_fields::ExpectArray(*v, kWhat, Child(path, key)));
  return v;
}

StatusOr<ProfileModel> ModelFromJson(const Json& j) {
  const std::string path = "model";
  RETURN_IF_ERROR(json_fields::ExpectObject(j, kWhat, path,
                                            {"hash", "architecture", "name", "n_layers",
                                             "n_kv_heads", "head_dim", "d_model", "vocab_size"}));
  ProfileModel m;
  ASSIGN_OR_RETURN(m.hash, GetString(j, path, "hash"));
  ASSIGN_OR_RETURN(m.architecture, GetString(j, path, "architecture"));
  ASSIGN_OR_RETURN(m.name, GetString(j, path, "name"));
  ASSIGN_OR_RETURN(m.n_layers, GetInt(j, path, "n_layers"));
  ASSIGN_OR_RETURN(m.n_kv_heads, GetInt(j, path, "n_kv_heads"));
  ASSIGN_OR_RETURN(m.head_dim, GetInt(j, path, "head_dim"));
  ASSIGN_OR_RETURN(m.d_model, GetInt(j, path, "d_model"));
  ASSIGN_OR_RETURN(m.vocab_size, GetInt(j, path, "vocab_size"));
  return m;
}

// The members schema version 2 added: a version 1 document holding one is refused as unknown.
constexpr std::string_view kParamsKeysOfVersion2[] = {"objective", "selector", "budgets"};

StatusOr<ProfileParams> ParamsFromJson(const Json& j, int64_t version) {
  const std::string path = "params";
  if (version == 1 && j.is_object()) {
    for (std::string_view key : kParamsKeysOfVersion2) {
      if (j.contains(key)) return Bad(Child(path, key), "unknown field in schema_version 1");
    }
  }
  ProfileParams p;
  ASSIGN_OR_RETURN(static_cast<CalibrationParams&>(p),
                   CalibrationParamsFromJson(j, kWhat, path, {"data_source", "data_domain"}));
  ASSIGN_OR_RETURN(p.data_source, GetString(j, path, "data_source"));
  if (j.contains("data_domain")) {
    ASSIGN_OR_RETURN(p.data_domain, GetString(j, path, "data_domain"));
  }
  return p;
}

StatusOr<LayerStability> LayerStabilityFromJson(const Json& j, const std::string& path) {
  RETURN_IF_ERROR(json_fields::ExpectObject(
      j, kWhat, path, {"layer", "kl_low", "kl_high", "share", "share_low", "share_high"}));
  LayerStability l;
  ASSIGN_OR_RETURN(l.layer, GetInt(j, path, "layer"));
  ASSIGN_OR_RETURN(l.kl_low, GetDouble(j, path, "kl_low"));
  ASSIGN_OR_RETURN(l.kl_high, GetDouble(j, path, "kl_high"));
  ASSIGN_OR_RETURN(l.share, GetDouble(j, path, "share"));
  ASSIGN_OR_RETURN(l.share_low, GetDouble(j, path, "share_low"));
  ASSIGN_OR_RETURN(l.share_high, GetDouble(j, path, "share_high"));
  return l;
}

StatusOr<ProfileStability> StabilityFromJson(const Json& j) {
  const std::string path = "stability";
  RETURN_IF_ERROR(
      json_fields::ExpectObject(j, kWhat, path,
                                {"seed", "resamples", "level", "ratio", "tolerance", "layers",
                                 "rank_correlation_median", "rank_correlation_low", "top_layer",
                                 "top_layer_frequency", "max_share_deviation", "stable"}));
  ProfileStability st;
  ASSIGN_OR_RETURN(const Json* seed, Member(j, kWhat, path, "seed"));
  ASSIGN_OR_RETURN(st.seed, AsUint(*seed, kWhat, Child(path, "seed")));
  ASSIGN_OR_RETURN(st.resamples, GetInt(j, path, "resamples"));
  ASSIGN_OR_RETURN(st.level, GetDouble(j, path, "level"));
  ASSIGN_OR_RETURN(st.ratio, GetDouble(j, path, "ratio"));
  ASSIGN_OR_RETURN(st.tolerance, GetDouble(j, path, "tolerance"));
  ASSIGN_OR_RETURN(const Json* layers, GetArray(j, path, "layers"));
  const std::string layers_path = Child(path, "layers");
  for (size_t i = 0; i < layers->size(); ++i) {
    ASSIGN_OR_RETURN(LayerStability l, LayerStabilityFromJson((*layers)[i], Index(layers_path, i)));
    st.layers.push_back(l);
  }
  ASSIGN_OR_RETURN(st.rank_correlation_median, GetDouble(j, path, "rank_correlation_median"));
  ASSIGN_OR_RETURN(st.rank_correlation_low, GetDouble(j, path, "rank_correlation_low"));
  ASSIGN_OR_RETURN(st.top_layer, GetInt(j, path, "top_layer"));
  ASSIGN_OR_RETURN(st.top_layer_frequency, GetDouble(j, path, "top_layer_frequency"));
  ASSIGN_OR_RETURN(st.max_share_deviation, GetDouble(j, path, "max_share_deviation"));
  ASSIGN_OR_RETURN(const Json* stable, Member(j, kWhat, path, "stable"));
  if (!stable->is_boolean()) {
    return Bad(Child(path, "stable"),
               absl::StrCat("expected a boolean, got ", stable->type_name()));
  }
  st.stable = stable->get<bool>();
  return st;
}

// A uint32 member `key` of `object` at `path` (a task's sample or layer index).
StatusOr<uint32_t> GetUint32(const Json& object, const std::string& path, std::string_view key) {
  ASSIGN_OR_RETURN(const Json* v, Member(object, kWhat, path, key));
  ASSIGN_OR_RETURN(uint64_t value, AsUint(*v, kWhat, Child(path, key)));
  if (value > std::numeric_limits<uint32_t>::max()) {
    return Bad(Child(path, key), absl::StrCat("must be < 2^32, got ", value));
  }
  return static_cast<uint32_t>(value);
}

StatusOr<ProfileVerification::Disagreement> DisagreementFromJson(const Json& j,
                                                                 const std::string& path) {
  RETURN_IF_ERROR(json_fields::ExpectObject(
      j, kWhat, path, {"sample", "layer", "outvoted_worker", "agreeing_workers"}));
  ProfileVerification::Disagreement d;
  ASSIGN_OR_RETURN(d.sample, GetUint32(j, path, "sample"));
  ASSIGN_OR_RETURN(d.layer, GetUint32(j, path, "layer"));
  ASSIGN_OR_RETURN(d.outvoted_worker, GetString(j, path, "outvoted_worker"));
  ASSIGN_OR_RETURN(const Json* agreeing, GetArray(j, path, "agreeing_workers"));
  const std::string agreeing_path = Child(path, "agreeing_workers");
  for (size_t i = 0; i < agreeing->size(); ++i) {
    ASSIGN_OR_RETURN(std::string worker, AsString((*agreeing)[i], kWhat, Index(agreeing_path, i)));
    d.agreeing_workers.push_back(std::move(worker));
  }
  return d;
}

StatusOr<ProfileVerification> VerificationFromJson(const Json& j) {
  const std::string path = "verification";
  RETURN_IF_ERROR(json_fields::ExpectObject(
      j, kWhat, path,
      {"fraction", "tasks_verified", "tasks_unverified", "tasks_recomputed", "disagreements"}));
  ProfileVerification v;
  ASSIGN_OR_RETURN(v.fraction, GetDouble(j, path, "fraction"));
  ASSIGN_OR_RETURN(const Json* verified, Member(j, kWhat, path, "tasks_verified"));
  ASSIGN_OR_RETURN(v.tasks_verified, AsUint(*verified, kWhat, Child(path, "tasks_verified")));
  ASSIGN_OR_RETURN(const Json* unverified, Member(j, kWhat, path, "tasks_unverified"));
  ASSIGN_OR_RETURN(v.tasks_unverified, AsUint(*unverified, kWhat, Child(path, "tasks_unverified")));
  ASSIGN_OR_RETURN(const Json* recomputed, Member(j, kWhat, path, "tasks_recomputed"));
  ASSIGN_OR_RETURN(v.tasks_recomputed, AsUint(*recomputed, kWhat, Child(path, "tasks_recomputed")));
  ASSIGN_OR_RETURN(const Json* disagreements, GetArray(j, path, "disagreements"));
  const std::string disagreements_path = Child(path, "disagreements");
  for (size_t i = 0; i < disagreements->size(); ++i) {
    ASSIGN_OR_RETURN(ProfileVerification::Disagreement d,
                     DisagreementFromJson((*disagreements)[i], Index(disagreements_path, i)));
    v.disagreements.push_back(std::move(d));
  }
  return v;
}

Status CheckInUnit(double value, const std::string& path, bool open) {
  const bool ok = open ? value > 0.0 && value < 1.0 : value >= 0.0 && value <= 1.0;
  if (!ok) {
    return Bad(path, absl::StrCat("must be in ", open ? "(0, 1)" : "[0, 1]", ", got ", value));
  }
  return absl::OkStatus();
}

// low <= high, both finite.
Status CheckInterval(double low, double high, const std::string& path, std::string_view low_name,
                     std::string_view high_name) {
  if (!(low <= high) || !std::isfinite(low) || !std::isfinite(high)) {
    return Bad(
        path, Cat(low_name, " ", low, " and ", high_name, " ", high, " are not a finite interval"));
  }
  return absl::OkStatus();
}

Status ValidateStability(const ProfileStability& st, const SensitivityProfile& profile) {
  RETURN_IF_ERROR(CheckPositive(st.resamples, "stability.resamples"));
  RETURN_IF_ERROR(CheckInUnit(st.level, "stability.level", /*open=*/true));
  if (!(st.ratio >= 1.0) || !std::isfinite(st.ratio)) {
    return Bad("stability.ratio", absl::StrCat("must be finite and >= 1, got ", st.ratio));
  }
  RETURN_IF_ERROR(CheckNonNegativeFinite(st.tolerance, "stability.tolerance"));
  if (st.layers.size() != profile.layers.size()) {
    return Bad("stability.layers", absl::StrCat("has ", st.layers.size(),
                                                " entries but layers has ", profile.layers.size()));
  }
  for (size_t i = 0; i < st.layers.size(); ++i) {
    const LayerStability& l = st.layers[i];
    const std::string path = Index("stability.layers", i);
    if (l.layer != profile.layers[i].layer) {
      return Bad(Child(path, "layer"), absl::StrCat("is ", l.layer, " but layers[", i,
                                                    "].layer is ", profile.layers[i].layer));
    }
    RETURN_IF_ERROR(CheckNonNegativeFinite(l.kl_low, Child(path, "kl_low")));
    RETURN_IF_ERROR(CheckInterval(l.kl_low, l.kl_high, path, "kl_low", "kl_high"));
    if (!(l.share > 0.0) || !std::isfinite(l.share)) {
      return Bad(Child(path, "share"), absl::StrCat("must be finite and > 0, got ", l.share));
    }
    if (!(l.share_low > 0.0)) {
      return Bad(Child(path, "share_low"), absl::StrCat("must be > 0, got ", l.share_low));
    }
    RETURN_IF_ERROR(CheckInterval(l.share_low, l.share_high, path, "share_low", "share_high"));
  }
  if (!(st.rank_correlation_low >= -1.0 && st.rank_correlation_low <= st.rank_correlation_median &&
        st.rank_correlation_median <= 1.0)) {
    return Bad("stability",
               absl::StrCat("rank correlations must satisfy -1 <= low (", st.rank_correlation_low,
                            ") <= median (", st.rank_correlation_median, ") <= 1"));
  }
  const bool known_top =
      std::any_of(profile.layers.begin(), profile.layers.end(),
                  [&](const LayerSensitivity& l) { return l.layer == st.top_layer; });
  if (!known_top) {
    return Bad("stability.top_layer",
               absl::StrCat("layer ", st.top_layer, " is not a layer of the profile"));
  }
  RETURN_IF_ERROR(
      CheckInUnit(st.top_layer_frequency, "stability.top_layer_frequency", /*open=*/false));
  RETURN_IF_ERROR(CheckNonNegativeFinite(st.max_share_deviation, "stability.max_share_deviation"));
  if (st.stable != (st.max_share_deviation <= st.tolerance)) {
    return Bad("stability.stable", absl::StrCat("is ", st.stable ? "true" : "false",
                                                " but max_share_deviation ", st.max_share_deviation,
                                                " vs tolerance ", st.tolerance, " says otherwise"));
  }
  return absl::OkStatus();
}

Status ValidateVerification(const ProfileVerification& v, const SensitivityProfile& profile) {
  // A NaN fails the range check too.
  RETURN_IF_ERROR(CheckInUnit(v.fraction, "verification.fraction", /*open=*/false));
  for (size_t i = 0; i < v.disagreements.size(); ++i) {
    const ProfileVerification::Disagreement& d = v.disagreements[i];
    const std::string path = Index("verification.disagreements", i);
    if (d.sample >= profile.params.samples) {
      return Bad(Child(path, "sample"),
                 absl::StrCat("is ", d.sample, " but params.samples is ", profile.params.samples));
    }
    const std::vector<int64_t>& layers = profile.params.layers;
    if (std::find(layers.begin(), layers.end(), static_cast<int64_t>(d.layer)) == layers.end()) {
      return Bad(Child(path, "layer"), absl::StrCat("layer ", d.layer, " is not in params.layers"));
    }
    if (d.outvoted_worker.empty()) return Bad(Child(path, "outvoted_worker"), "must not be empty");
    const std::string agreeing_path = Child(path, "agreeing_workers");
    if (d.agreeing_workers.size() < 2) {
      return Bad(agreeing_path,
                 absl::StrCat("must name at least 2 workers, got ", d.agreeing_workers.size()));
    }
    for (size_t w = 0; w < d.agreeing_workers.size(); ++w) {
      const std::string& worker = d.agreeing_workers[w];
      if (worker.empty()) return Bad(Index(agreeing_path, w), "must not be empty");
      if (worker == d.outvoted_worker) {
        return Bad(Index(agreeing_path, w), Cat("\"", worker, "\" is the outvoted worker"));
      }
      if (std::find(d.agreeing_workers.begin(), d.agreeing_workers.begin() + w, worker) !=
          d.agreeing_workers.begin() + w) {
        return Bad(Index(agreeing_path, w), Cat("\"", worker, "\" is named twice"));
      }
    }
  }
  return absl::OkStatus();
}

StatusOr<ResponsePoint> ResponsePointFromJson(const Json& j, const std::string& path) {
  RETURN_IF_ERROR(json_fields::ExpectObject(j, kWhat, path, {"budget", "mean_kl", "stderr"}));
  ResponsePoint point;
  ASSIGN_OR_RETURN(point.budget, GetInt(j, path, "budget"));
  ASSIGN_OR_RETURN(point.mean_kl, GetDouble(j, path, "mean_kl"));
  ASSIGN_OR_RETURN(point.std_error, GetDouble(j, path, "stderr"));
  return point;
}

StatusOr<std::vector<ResponsePoint>> ResponsePointsFromJson(const Json& array,
                                                            const std::string& path) {
  std::vector<ResponsePoint> points;
  points.reserve(array.size());
  for (size_t i = 0; i < array.size(); ++i) {
    ASSIGN_OR_RETURN(ResponsePoint point, ResponsePointFromJson(array[i], Index(path, i)));
    points.push_back(point);
  }
  return points;
}

StatusOr<LayerSensitivity> LayerFromJson(const Json& j, const std::string& path, int64_t version) {
  for (const char* key : {"response", "head_response"}) {
    if (version == 1 && j.is_object() && j.contains(key)) {
      return Bad(Child(path, key), "unknown field in schema_version 1");
    }
  }
  RETURN_IF_ERROR(json_fields::ExpectObject(
      j, kWhat, path,
      {"layer", "mean_kl", "stderr", "count", "per_sample_mean", "response", "head_response"}));
  LayerSensitivity l;
  ASSIGN_OR_RETURN(l.layer, GetInt(j, path, "layer"));
  ASSIGN_OR_RETURN(l.mean_kl, GetDouble(j, path, "mean_kl"));
  ASSIGN_OR_RETURN(l.std_error, GetDouble(j, path, "stderr"));
  ASSIGN_OR_RETURN(l.count, GetInt(j, path, "count"));
  ASSIGN_OR_RETURN(const Json* means, GetArray(j, path, "per_sample_mean"));
  const std::string means_path = Child(path, "per_sample_mean");
  l.per_sample_mean.reserve(means->size());
  for (size_t i = 0; i < means->size(); ++i) {
    ASSIGN_OR_RETURN(double v, AsDouble((*means)[i], kWhat, Index(means_path, i)));
    l.per_sample_mean.push_back(v);
  }
  if (j.contains("response")) {
    ASSIGN_OR_RETURN(const Json* response, GetArray(j, path, "response"));
    ASSIGN_OR_RETURN(l.response, ResponsePointsFromJson(*response, Child(path, "response")));
  }
  if (j.contains("head_response")) {
    ASSIGN_OR_RETURN(const Json* heads, GetArray(j, path, "head_response"));
    const std::string heads_path = Child(path, "head_response");
    for (size_t h = 0; h < heads->size(); ++h) {
      const std::string head_path = Index(heads_path, h);
      if (!(*heads)[h].is_array()) {
        return Bad(head_path, absl::StrCat("expected an array, got ", (*heads)[h].type_name()));
      }
      ASSIGN_OR_RETURN(std::vector<ResponsePoint> points,
                       ResponsePointsFromJson((*heads)[h], head_path));
      l.head_response.push_back(std::move(points));
    }
  }
  return l;
}

// A layer's response points against the profile's grid: one per params.budgets entry in order,
// present only in a response profile, finite and non-negative, the full cache's KL 0.
Status ValidatePoints(const std::vector<ResponsePoint>& points, const ProfileParams& p,
                      const std::string& path) {
  if (points.size() != p.budgets.size()) {
    return Bad(path, absl::StrCat("has ", points.size(), " points but params.budgets has ",
                                  p.budgets.size()));
  }
  for (size_t t = 0; t < points.size(); ++t) {
    const ResponsePoint& point = points[t];
    const std::string point_path = Index(path, t);
    if (point.budget != p.budgets[t]) {
      return Bad(
          Child(point_path, "budget"),
          absl::StrCat("is ", point.budget, " but params.budgets[", t, "] is ", p.budgets[t]));
    }
    RETURN_IF_ERROR(CheckNonNegativeFinite(point.mean_kl, Child(point_path, "mean_kl")));
    RETURN_IF_ERROR(CheckNonNegativeFinite(point.std_error, Child(point_path, "stderr")));
  }
  // The last budget is the full cache (ValidateCalibrationParams), which changes nothing.
  const ResponsePoint& full = points.back();
  if (full.mean_kl != 0.0) {
    return Bad(
        Child(Index(path, points.size() - 1), "mean_kl"),
        absl::StrCat("must be 0 at the full cache (budget ", full.budget, "), got ", full.mean_kl));
  }
  return absl::OkStatus();
}

Status ValidateResponse(const LayerSensitivity& l, const ProfileParams& p,
                        const std::string& layer_path) {
  const std::string path = Child(layer_path, "response");
  const std::string heads_path = Child(layer_path, "head_response");
  if (p.objective != Objective::kResponse) {
    if (!l.response.empty()) {
      return Bad(path,
                 absl::StrCat("only in a profile of objective response, got ", l.response.size(),
                              " points with objective ", Sv(ObjectiveName(p.objective))));
    }
  } else {
    RETURN_IF_ERROR(ValidatePoints(l.response, p, path));
  }
  if (l.head_response.size() != static_cast<size_t>(p.kv_heads)) {
    return Bad(heads_path, absl::StrCat("has ", l.head_response.size(),
                                        " heads but params.kv_heads is ", p.kv_heads));
  }
  for (size_t h = 0; h < l.head_response.size(); ++h) {
    RETURN_IF_ERROR(ValidatePoints(l.head_response[h], p, Index(heads_path, h)));
  }
  return absl::OkStatus();
}

}  // namespace

ProfileParams MeasuredParams(const CalibrationParams& params, int64_t samples,
                             std::string data_source, std::string data_domain) {
  const CalibrationParams defaults;
  ProfileParams out{params, std::move(data_source), std::move(data_domain)};
  out.samples = samples;
  out.until_stable = defaults.until_stable;
  out.max_samples = defaults.max_samples;
  out.data_seed = defaults.data_seed;
  return out;
}

Status ValidateProfile(const SensitivityProfile& profile) {
  // A profile in memory is of the version this build writes: reading migrates older documents.
  if (profile.schema_version != kProfileSchemaVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat("profile: schema_version ", profile.schema_version,
                     " is not supported (this build holds version ", kProfileSchemaVersion, ")"));
  }
  const ProfileModel& m = profile.model;
  if (m.hash.empty()) return Bad("model.hash", "must not be empty");
  RETURN_IF_ERROR(CheckPositive(m.n_layers, "model.n_layers"));
  RETURN_IF_ERROR(CheckPositive(m.n_kv_heads, "model.n_kv_heads"));
  RETURN_IF_ERROR(CheckPositive(m.head_dim, "model.head_dim"));
  RETURN_IF_ERROR(CheckPositive(m.d_model, "model.d_model"));
  RETURN_IF_ERROR(CheckPositive(m.vocab_size, "model.vocab_size"));

  const ProfileParams& p = profile.params;
  // The method's rules (method/calibration_params.h); then what a profile adds: it records the
  // samples measured, and its layers are listed, strictly ascending.
  if (Status s = ValidateCalibrationParams(p, m.n_layers); !s.ok()) {
    return Status(s.code(), absl::StrCat(Sv(kWhat), ": ", s.message()));
  }
  const CalibrationParams defaults;
  if (p.until_stable) return Bad("params.until_stable", "a profile records the samples measured");
  if (p.max_samples != defaults.max_samples) {
    return Bad("params.max_samples", "a profile records the samples measured");
  }
  if (p.data_seed != defaults.data_seed) {
    return Bad("params.data_seed", "a profile names its data in params.data_source");
  }
  if (p.kv_heads != 0 && p.kv_heads != m.n_kv_heads) {
    return Bad("params.kv_heads", absl::StrCat("is ", p.kv_heads, " but the model has ",
                                               m.n_kv_heads, " KV heads (model.n_kv_heads)"));
  }
  if (p.layers.empty()) return Bad("params.layers", "must list at least one layer");
  for (size_t i = 1; i < p.layers.size(); ++i) {
    const int64_t layer = p.layers[i];
    if (layer <= p.layers[i - 1]) {
      return Bad(Index("params.layers", i), "layers must be strictly ascending");
    }
  }
  // samples * trials cannot overflow past the int64 the count field holds without being wrong.
  const __int128 expected_count = static_cast<__int128>(p.samples) * p.trials;

  if (profile.layers.size() != p.layers.size()) {
    return Bad("layers", absl::StrCat("has ", profile.layers.size(), " entries but params.layers ",
                                      "lists ", p.layers.size()));
  }
  for (size_t i = 0; i < profile.layers.size(); ++i) {
    const LayerSensitivity& l = profile.layers[i];
    const std::string path = Index("layers", i);
    if (l.layer != p.layers[i]) {
      return Bad(Child(path, "layer"),
                 absl::StrCat("is ", l.layer, " but params.layers[", i, "] is ", p.layers[i]));
    }
    RETURN_IF_ERROR(CheckNonNegativeFinite(l.mean_kl, Child(path, "mean_kl")));
    RETURN_IF_ERROR(CheckNonNegativeFinite(l.std_error, Child(path, "stderr")));
    if (l.count != expected_count) {
      return Bad(Child(path, "count"),
                 absl::StrCat("is ", l.count, " but params.samples * params.trials is ",
                              static_cast<int64_t>(expected_count)));
    }
    if (static_cast<int64_t>(l.per_sample_mean.size()) != p.samples) {
      return Bad(Child(path, "per_sample_mean"),
                 absl::StrCat("has ", l.per_sample_mean.size(), " entries but params.samples is ",
                              p.samples));
    }
    for (size_t s = 0; s < l.per_sample_mean.size(); ++s) {
      RETURN_IF_ERROR(
          CheckNonNegativeFinite(l.per_sample_mean[s], Index(Child(path, "per_sample_mean"), s)));
    }
    RETURN_IF_ERROR(ValidateResponse(l, p, path));
  }
  if (profile.stability) RETURN_IF_ERROR(ValidateStability(*profile.stability, profile));
  if (profile.verification) {
    RETURN_IF_ERROR(ValidateVerification(*profile.verification, profile));
  }
  if (!IsIso8601DateTime(profile.created_at)) {
    return Bad("created_at",
               absl::StrCat("\"", profile.created_at, "\" is not an ISO-8601 date-time"));
  }
  return absl::OkStatus();
}

namespace {

OrderedJson ModelToJson(const ProfileModel& m) {
  return {{"hash", m.hash},         {"architecture", m.architecture}, {"name", m.name},
          {"n_layers", m.n_layers}, {"n_kv_heads", m.n_kv_heads},     {"head_dim", m.head_dim},
          {"d_model", m.d_model},   {"vocab_size", m.vocab_size}};
}

}  // namespace

OrderedJson StabilityToJson(const ProfileStability& st) {
  OrderedJson layers = OrderedJson::array();
  for (const LayerStability& l : st.layers) {
    layers.push_back(OrderedJson{{"layer", l.layer},
                                 {"kl_low", l.kl_low},
                                 {"kl_high", l.kl_high},
                                 {"share", l.share},
                                 {"share_low", l.share_low},
                                 {"share_high", l.share_high}});
  }
  return OrderedJson{{"seed", st.seed},
                     {"resamples", st.resamples},
                     {"level", st.level},
                     {"ratio", st.ratio},
                     {"tolerance", st.tolerance},
                     {"layers", std::move(layers)},
                     {"rank_correlation_median", st.rank_correlation_median},
                     {"rank_correlation_low", st.rank_correlation_low},
                     {"top_layer", st.top_layer},
                     {"top_layer_frequency", st.top_layer_frequency},
                     {"max_share_deviation", st.max_share_deviation},
                     {"stable", st.stable}};
}

namespace {

OrderedJson VerificationToJson(const ProfileVerification& v) {
  OrderedJson disagreements = OrderedJson::array();
  for (const ProfileVerification::Disagreement& d : v.disagreements) {
    disagreements.push_back(OrderedJson{{"sample", d.sample},
                                        {"layer", d.layer},
                                        {"outvoted_worker", d.outvoted_worker},
                                        {"agreeing_workers", d.agreeing_workers}});
  }
  return OrderedJson{{"fraction", v.fraction},
                     {"tasks_verified", v.tasks_verified},
                     {"tasks_unverified", v.tasks_unverified},
                     {"tasks_recomputed", v.tasks_recomputed},
                     {"disagreements", std::move(disagreements)}};
}

}  // namespace

std::string ProfileModelToJson(const ProfileModel& model) { return ModelToJson(model).dump(); }

StatusOr<ProfileModel> ProfileModelFromJson(std::string_view json_text) {
  ASSIGN_OR_RETURN(Json root, json_fields::Parse(json_text, kWhat));
  return ModelFromJson(root);
}

StatusOr<std::string> ProfileToJson(const SensitivityProfile& profile) {
  RETURN_IF_ERROR(ValidateProfile(profile));
  const ProfileParams& p = profile.params;
  OrderedJson model = ModelToJson(profile.model);
  OrderedJson params = CalibrationParamsToJson(p);
  params["data_source"] = p.data_source;
  if (!p.data_domain.empty()) params["data_domain"] = p.data_domain;
  OrderedJson layers = OrderedJson::array();
  for (const LayerSensitivity& l : profile.layers) {
    OrderedJson layer{{"layer", l.layer},
                      {"mean_kl", l.mean_kl},
                      {"stderr", l.std_error},
                      {"count", l.count},
                      {"per_sample_mean", l.per_sample_mean}};
    if (!l.response.empty()) {
      OrderedJson response = OrderedJson::array();
      for (const ResponsePoint& point : l.response) {
        response.push_back(OrderedJson{
            {"budget", point.budget}, {"mean_kl", point.mean_kl}, {"stderr", point.std_error}});
      }
      layer["response"] = std::move(response);
    }
    if (!l.head_response.empty()) {
      OrderedJson heads = OrderedJson::array();
      for (const std::vector<ResponsePoint>& points : l.head_response) {
        OrderedJson head = OrderedJson::array();
        for (const ResponsePoint& point : points) {
          head.push_back(OrderedJson{
              {"budget", point.budget}, {"mean_kl", point.mean_kl}, {"stderr", point.std_error}});
        }
        heads.push_back(std::move(head));
      }
      layer["head_response"] = std::move(heads);
    }
    layers.push_back(std::move(layer));
  }
  OrderedJson root = {{"schema_version", profile.schema_version},
                      {"model", std::move(model)},
                      {"params", std::move(params)},
                      {"layers", std::move(layers)},
                      {"created_at", profile.created_at},
                      {"tool_version", profile.tool_version}};
  if (profile.stability) root["stability"] = StabilityToJson(*profile.stability);
  if (profile.verification) root["verification"] = VerificationToJson(*profile.verification);
  return json_fields::Dump(root, kWhat);
}

StatusOr<SensitivityProfile> ProfileFromJson(std::string_view json_text) {
  ASSIGN_OR_RETURN(Json root, json_fields::Parse(json_text, kWhat));
  if (!root.is_object()) return Bad("", absl::StrCat("expected an object, got ", root.type_name()));
  // The version decides how to read everything else, so it is checked before the other keys.
  // Version 1 is version 2 without the response objective: it reads as a noise profile of
  // version 2 (the migration, docs/BUDGETS.md), and is written back as version 2.
  ASSIGN_OR_RETURN(int64_t version, GetInt(root, "", "schema_version"));
  if (version != 1 && version != kProfileSchemaVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "profile: schema_version ", version, " is not supported (this build reads versions 1 and ",
        kProfileSchemaVersion, ")"));
  }
  RETURN_IF_ERROR(
      json_fields::ExpectObject(root, kWhat, "",
                                {"schema_version", "model", "params", "layers", "created_at",
                                 "tool_version", "stability", "verification"}));
  SensitivityProfile profile;
  profile.schema_version = kProfileSchemaVersion;
  ASSIGN_OR_RETURN(const Json* model, Member(root, kWhat, "", "model"));
  ASSIGN_OR_RETURN(profile.model, ModelFromJson(*model));
  ASSIGN_OR_RETURN(const Json* params, Member(root, kWhat, "", "params"));
  ASSIGN_OR_RETURN(profile.params, ParamsFromJson(*params, version));
  ASSIGN_OR_RETURN(const Json* layers, GetArray(root, "", "layers"));
  profile.layers.reserve(layers->size());
  for (size_t i = 0; i < layers->size(); ++i) {
    ASSIGN_OR_RETURN(LayerSensitivity l, LayerFromJson((*layers)[i], Index("layers", i), version));
    profile.layers.push_back(std::move(l));
  }
  ASSIGN_OR_RETURN(profile.created_at, GetString(root, "", "created_at"));
  ASSIGN_OR_RETURN(profile.tool_version, GetString(root, "", "tool_version"));
  if (root.contains("stability")) {
    ASSIGN_OR_RETURN(profile.stability, StabilityFromJson(root["stability"]));
  }
  if (root.contains("verification")) {
    ASSIGN_OR_RETURN(profile.verification, VerificationFromJson(root["verification"]));
  }
  RETURN_IF_ERROR(ValidateProfile(profile));
  return profile;
}

StatusOr<SensitivityProfile> ReadProfileFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadFileBounded(path, kMaxProfileFileBytes));
  StatusOr<SensitivityProfile> profile = ProfileFromJson(text);
  if (!profile.ok()) {
    return Status(profile.status().code(), absl::StrCat(path, ": ", profile.status().message()));
  }
  return profile;
}

Status WriteProfileFile(const std::string& path, const SensitivityProfile& profile) {
  ASSIGN_OR_RETURN(std::string text, ProfileToJson(profile));
  return WriteFileAtomically(path, text);
}

std::string FormatIso8601Utc(std::chrono::system_clock::time_point time) {
  const std::time_t t = std::chrono::system_clock::to_time_t(time);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

bool IsIso8601DateTime(std::string_view s) {
  // YYYY-MM-DDTHH:MM:SS is 19 characters.
  if (s.size() < 20 || !AllDigits(s, 0, 4) || s[4] != '-' || !AllDigits(s, 5, 2) || s[7] != '-' ||
      !AllDigits(s, 8, 2) || s[10] != 'T' || !AllDigits(s, 11, 2) || s[13] != ':' ||
      !AllDigits(s, 14, 2) || s[16] != ':' || !AllDigits(s, 17, 2)) {
    return false;
  }
  const int month = Number(s, 5, 2), day = Number(s, 8, 2), hour = Number(s, 11, 2),
            minute = Number(s, 14, 2), second = Number(s, 17, 2);
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60) {
    return false;
  }
  size_t i = 19;
  if (s[i] == '.') {
    size_t digits = 0;
    for (++i; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) ++digits;
    if (digits == 0) return false;
  }
  if (i < s.size() && s[i] == 'Z') return i + 1 == s.size();
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) {
    return i + 6 == s.size() && AllDigits(s, i + 1, 2) && s[i + 3] == ':' &&
           AllDigits(s, i + 4, 2) && Number(s, i + 1, 2) <= 23 && Number(s, i + 4, 2) <= 59;
  }
  return false;
}

}  // namespace ripplekv::method
