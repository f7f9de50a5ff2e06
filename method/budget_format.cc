#include "method/budget_format.h"

#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "base/check.h"
#include "base/file_io.h"
#include "base/strings.h"
#include "method/json_fields.h"

namespace ripplekv::method {
namespace {

using json_fields::AsDouble;
using json_fields::AsInt;
using json_fields::AsOptionalInt;
using json_fields::AsString;
using json_fields::Child;
using json_fields::Index;
using json_fields::Json;
using json_fields::Member;
using json_fields::OrderedJson;

constexpr std::string_view kWhat = "budget map";

Status Bad(const std::string& path, std::string_view problem) {
  return json_fields::Error(kWhat, path, problem);
}

OrderedJson OptionalInt(const std::optional<int64_t>& v) {
  return v ? OrderedJson(*v) : OrderedJson(nullptr);
}

// Tokens int(Lc * (1 - ratio)) as kvpress computes them (Python floats are IEEE doubles; int()
// truncates toward zero).
int64_t KvpressKept(int64_t context_len, double ratio) {
  return static_cast<int64_t>(std::trunc(static_cast<double>(context_len) * (1.0 - ratio)));
}

// 1 - t / Lc, nudged so that KvpressKept(Lc, ratio) == t. Needs 1 <= t <= Lc.
double KvpressRatio(int64_t t, int64_t context_len) {
  double ratio = 1.0 - static_cast<double>(t) / static_cast<double>(context_len);
  // 1 - t/Lc is rounded twice, so kvpress's int(Lc * (1 - ratio)) can land one token off; a
  // smaller ratio keeps more tokens, so step one ulp at a time toward the exact count.
  for (int step = 0; step < 64 && KvpressKept(context_len, ratio) != t; ++step) {
    ratio = KvpressKept(context_len, ratio) < t ? std::nextafter(ratio, 0.0)
                                                : std::nextafter(ratio, 1.0);
  }
  RIPPLEKV_CHECK(KvpressKept(context_len, ratio) == t);
  RIPPLEKV_CHECK(ratio >= 0.0 && ratio < 1.0);
  return ratio;
}

// Why budget `t` is outside the bounds of `o` ("" when inside): below min_tokens, above
// max_tokens or above max_context.
std::string BoundsProblem(int64_t t, const BudgetOptions& o) {
  if (t >= o.min_tokens && (!o.max_tokens || t <= *o.max_tokens) &&
      (!o.max_context || t <= *o.max_context)) {
    return "";
  }
  return absl::StrCat(
      t, " is outside [min_tokens ", o.min_tokens, ", ",
      o.max_tokens ? absl::StrCat("max_tokens ", *o.max_tokens) : std::string("unbounded"), "]",
      o.max_context ? absl::StrCat(" or above max_context ", *o.max_context) : std::string());
}

std::string SumText(__int128 sum) {
  return sum <= std::numeric_limits<int64_t>::max() ? absl::StrCat(static_cast<int64_t>(sum))
                                                    : std::string("more than 2^63 - 1");
}

// The per-head part of ValidateBudgetMap(), for a map whose per-layer part is valid.
Status ValidateHeadBudgets(const BudgetMap& map) {
  const BudgetOptions& o = map.options;
  const size_t L = map.tokens.size();
  if (map.head_tokens.empty()) {
    if (o.per_head) {
      return Bad("layers", "the parameters say per_head but no layer has head_tokens");
    }
    return absl::OkStatus();
  }
  if (!o.per_head) {
    return Bad("layers", "head_tokens in a map whose parameters do not say per_head");
  }
  if (map.head_tokens.size() != L) {
    return Bad("layers", absl::StrCat("inconsistent map: ", L, " budgets, ", map.head_tokens.size(),
                                      " layers of head_tokens"));
  }
  const size_t H = map.head_tokens[0].size();
  if (H == 0) return Bad("layers[0].head_tokens", "must not be empty (at least one KV head)");
  // Every head budget is checked to be at most H * total_tokens below (one head of a layer may
  // hold more than total_tokens), so no sum can overflow.
  const __int128 expected = static_cast<__int128>(H) * map.total_tokens;
  __int128 sum = 0;
  for (size_t l = 0; l < L; ++l) {
    const std::string path = Child(Index("layers", l), "head_tokens");
    const std::vector<int64_t>& heads = map.head_tokens[l];
    if (heads.size() != H) {
      return Bad(path, absl::StrCat("has ", heads.size(), " heads, layer 0 has ", H,
                                    " (every layer the same number of KV heads)"));
    }
    __int128 layer_sum = 0;
    for (size_t h = 0; h < H; ++h) {
      const int64_t b = heads[h];
      if (std::string problem = BoundsProblem(b, o); !problem.empty()) {
        return Bad(Index(path, h), problem);
      }
      if (b > expected) {
        return Bad(Index(path, h),
                   absl::StrCat(b, " is above ", H, " heads x total_tokens ", SumText(expected)));
      }
      layer_sum += b;
    }
    sum += layer_sum;
    // tokens[l] is floor or ceil of the mean over the heads.
    const __int128 floor = layer_sum / static_cast<__int128>(H);
    const __int128 ceil = floor + (layer_sum % static_cast<__int128>(H) != 0 ? 1 : 0);
    const int64_t t = map.tokens[l];
    if (t < floor || t > ceil) {
      return Bad(Child(Index("layers", l), "tokens"),
                 absl::StrCat(t, " is not the mean of its ", H, " head budgets (sum ",
                              SumText(layer_sum), ") rounded: expected ", SumText(floor),
                              floor == ceil ? std::string() : absl::StrCat(" or ", SumText(ceil))));
    }
  }
  if (sum != expected) {
    return Bad("layers",
               absl::StrCat("head budgets sum to ", SumText(sum), ", not ", H,
                            " heads x total_tokens ", map.total_tokens, " = ", SumText(expected)));
  }
  return absl::OkStatus();
}

StatusOr<const Json*> Get(const Json& object, const std::string& path, std::string_view key) {
  return Member(object, kWhat, path, key);
}

StatusOr<BudgetOptions> OptionsFromJson(const Json& j) {
  const std::string path = "params";
  RETURN_IF_ERROR(json_fields::ExpectObject(
      j, kWhat, path,
      {"normalization", "ratio", "average_tokens", "total_tokens", "min_tokens", "max_tokens",
       "log_epsilon", "max_context", "shrink_z"}));
  BudgetOptions o;
  ASSIGN_OR_RETURN(const Json* normalization, Get(j, path, "normalization"));
  ASSIGN_OR_RETURN(std::string name, AsString(*normalization, kWhat, Child(path, "normalization")));
  StatusOr<Normalization> parsed = ParseNormalization(name);
  if (!parsed.ok()) {
    return Bad(Child(path, "normalization"),
               absl::StrCat("unknown normalization \"", name, "\" (minmax|rank|log-minmax)"));
  }
  o.normalization = *parsed;
  ASSIGN_OR_RETURN(const Json* ratio, Get(j, path, "ratio"));
  ASSIGN_OR_RETURN(o.ratio, AsDouble(*ratio, kWhat, Child(path, "ratio")));
  ASSIGN_OR_RETURN(const Json* average, Get(j, path, "average_tokens"));
  ASSIGN_OR_RETURN(std::optional<int64_t> average_tokens,
                   AsOptionalInt(*average, kWhat, Child(path, "average_tokens")));
  o.average_tokens = average_tokens.value_or(0);
  ASSIGN_OR_RETURN(const Json* total, Get(j, path, "total_tokens"));
  ASSIGN_OR_RETURN(o.total_tokens, AsOptionalInt(*total, kWhat, Child(path, "total_tokens")));
  ASSIGN_OR_RETURN(const Json* min_tokens, Get(j, path, "min_tokens"));
  ASSIGN_OR_RETURN(o.min_tokens, AsInt(*min_tokens, kWhat, Child(path, "min_tokens")));
  ASSIGN_OR_RETURN(const Json* max_tokens, Get(j, path, "max_tokens"));
  ASSIGN_OR_RETURN(o.max_tokens, AsOptionalInt(*max_tokens, kWhat, Child(path, "max_tokens")));
  ASSIGN_OR_RETURN(const Json* epsilon, Get(j, path, "log_epsilon"));
  ASSIGN_OR_RETURN(o.log_epsilon, AsDouble(*epsilon, kWhat, Child(path, "log_epsilon")));
  ASSIGN_OR_RETURN(const Json* max_context, Get(j, path, "max_context"));
  ASSIGN_OR_RETURN(o.max_context, AsOptionalInt(*max_context, kWhat, Child(path, "max_context")));
  if (j.contains("shrink_z")) {
    ASSIGN_OR_RETURN(o.shrink_z, AsDouble(j["shrink_z"], kWhat, Child(path, "shrink_z")));
  }
  return o;
}

}  // namespace

std::string_view BudgetFormatName(BudgetFormat format) {
  switch (format) {
    case BudgetFormat::kNative:
      return "native";
    case BudgetFormat::kKvpress:
      return "kvpress";
    case BudgetFormat::kTrtllm:
      return "trtllm";
  }
  return "unknown";
}

StatusOr<BudgetFormat> ParseBudgetFormat(std::string_view name) {
  if (name == "native") return BudgetFormat::kNative;
  if (name == "kvpress") return BudgetFormat::kKvpress;
  if (name == "trtllm") return BudgetFormat::kTrtllm;
  return absl::InvalidArgumentError(absl::StrCat("unknown budget format \"", Sv(name),
                                                 "\" (expected native, kvpress or trtllm)"));
}

Status ValidateBudgetMap(const BudgetMap& map) {
  const BudgetOptions& o = map.options;
  const size_t L = map.tokens.size();
  if (L == 0) return Bad("layers", "must not be empty");
  if (map.multipliers.size() != L || map.normalized.size() != L) {
    return Bad("layers",
               absl::StrCat("inconsistent map: ", L, " budgets, ", map.multipliers.size(),
                            " multipliers, ", map.normalized.size(), " normalized values"));
  }
  Status options = ValidateBudgetOptions(L, o);
  if (!options.ok()) {
    const absl::string_view message = absl::StripPrefix(options.message(), "budget map: ");
    return Bad("params", std::string(message.data(), message.size()));
  }
  const int64_t expected_total = TotalTokens(L, o);
  if (map.total_tokens != expected_total) {
    return Bad("total_tokens",
               absl::StrCat("is ", map.total_tokens, " but the parameters give ", expected_total));
  }
  // Every budget is checked to be in [1, total_tokens] below, so this cannot overflow.
  __int128 sum = 0;
  for (size_t l = 0; l < L; ++l) {
    const std::string path = Index("layers", l);
    const int64_t t = map.tokens[l];
    if (std::string problem = BoundsProblem(t, o); !problem.empty()) {
      return Bad(Child(path, "tokens"), problem);
    }
    if (t > map.total_tokens) {
      return Bad(Child(path, "tokens"),
                 absl::StrCat(t, " is above total_tokens ", map.total_tokens));
    }
    sum += t;
    const double m = map.multipliers[l];
    if (!(m >= 1.0 && m <= o.ratio)) {
      return Bad(Child(path, "multiplier"),
                 absl::StrCat(m, " is outside [1, ratio ", o.ratio, "]"));
    }
    const double n = map.normalized[l];
    if (!(n >= 0.0 && n <= 1.0)) {
      return Bad(Child(path, "normalized"), absl::StrCat(n, " is outside [0, 1]"));
    }
  }
  if (sum != map.total_tokens) {
    return Bad("layers", absl::StrCat("budgets sum to ", SumText(sum), ", not total_tokens ",
                                      map.total_tokens));
  }
  return ValidateHeadBudgets(map);
}

StatusOr<std::string> BudgetMapToJson(const BudgetMap& map) {
  RETURN_IF_ERROR(ValidateBudgetMap(map));
  const BudgetOptions& o = map.options;
  OrderedJson params = {
      {"normalization", std::string(NormalizationName(o.normalization))},
      {"ratio", o.ratio},
      {"average_tokens", o.total_tokens ? OrderedJson(nullptr) : OrderedJson(o.average_tokens)},
      {"total_tokens", OptionalInt(o.total_tokens)},
      {"min_tokens", o.min_tokens},
      {"max_tokens", OptionalInt(o.max_tokens)},
      {"log_epsilon", o.log_epsilon},
      {"max_context", OptionalInt(o.max_context)}};
  // Written only when set, so maps without shrinkage keep their bytes (and frozen-map digests).
  if (o.shrink_z != 0.0) params["shrink_z"] = o.shrink_z;
  OrderedJson layers = OrderedJson::array();
  const bool per_head = !map.head_tokens.empty();
  for (size_t l = 0; l < map.tokens.size(); ++l) {
    OrderedJson entry = {{"layer", l}, {"tokens", map.tokens[l]}};
    if (per_head) entry["head_tokens"] = map.head_tokens[l];
    entry["multiplier"] = map.multipliers[l];
    entry["normalized"] = map.normalized[l];
    layers.push_back(std::move(entry));
  }
  OrderedJson root = {
      {"schema_version", per_head ? kBudgetMapPerHeadSchemaVersion : kBudgetMapSchemaVersion},
      {"model_hash", map.model_hash},
      {"params", std::move(params)},
      {"total_tokens", map.total_tokens},
      {"layers", std::move(layers)}};
  return json_fields::Dump(root, kWhat);
}

StatusOr<BudgetMap> BudgetMapFromJson(std::string_view json_text) {
  ASSIGN_OR_RETURN(Json root, json_fields::Parse(json_text, kWhat));
  if (!root.is_object()) return Bad("", absl::StrCat("expected an object, got ", root.type_name()));
  ASSIGN_OR_RETURN(const Json* version_json, Get(root, "", "schema_version"));
  ASSIGN_OR_RETURN(int64_t version, AsInt(*version_json, kWhat, "schema_version"));
  if (version != kBudgetMapSchemaVersion && version != kBudgetMapPerHeadSchemaVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "budget map: schema_version ", version, " is not supported (this build reads versions ",
        kBudgetMapSchemaVersion, " and ", kBudgetMapPerHeadSchemaVersion, ")"));
  }
  const bool per_head = version == kBudgetMapPerHeadSchemaVersion;
  RETURN_IF_ERROR(json_fields::ExpectObject(
      root, kWhat, "", {"schema_version", "model_hash", "params", "total_tokens", "layers"}));
  BudgetMap map;
  ASSIGN_OR_RETURN(const Json* hash, Get(root, "", "model_hash"));
  ASSIGN_OR_RETURN(map.model_hash, AsString(*hash, kWhat, "model_hash"));
  ASSIGN_OR_RETURN(const Json* params, Get(root, "", "params"));
  ASSIGN_OR_RETURN(map.options, OptionsFromJson(*params));
  map.options.per_head = per_head;
  ASSIGN_OR_RETURN(const Json* total, Get(root, "", "total_tokens"));
  ASSIGN_OR_RETURN(map.total_tokens, AsInt(*total, kWhat, "total_tokens"));
  ASSIGN_OR_RETURN(const Json* layers, Get(root, "", "layers"));
  RETURN_IF_ERROR(json_fields::ExpectArray(*layers, kWhat, "layers"));
  for (size_t i = 0; i < layers->size(); ++i) {
    const Json& entry = (*layers)[i];
    const std::string path = Index("layers", i);
    if (!per_head && entry.is_object() && entry.contains("head_tokens")) {
      return Bad(Child(path, "head_tokens"),
                 absl::StrCat("only in a per-head map (schema_version ",
                              kBudgetMapPerHeadSchemaVersion, "), this is version ", version));
    }
    if (per_head) {
      RETURN_IF_ERROR(json_fields::ExpectObject(
          entry, kWhat, path, {"layer", "tokens", "head_tokens", "multiplier", "normalized"}));
    } else {
      RETURN_IF_ERROR(json_fields::ExpectObject(entry, kWhat, path,
                                                {"layer", "tokens", "multiplier", "normalized"}));
    }
    ASSIGN_OR_RETURN(const Json* layer_json, Get(entry, path, "layer"));
    ASSIGN_OR_RETURN(int64_t layer, AsInt(*layer_json, kWhat, Child(path, "layer")));
    if (layer != static_cast<int64_t>(i)) {
      return Bad(Child(path, "layer"),
                 absl::StrCat("is ", layer, ", expected ", i, " (one entry per layer, in order)"));
    }
    ASSIGN_OR_RETURN(const Json* tokens, Get(entry, path, "tokens"));
    ASSIGN_OR_RETURN(int64_t t, AsInt(*tokens, kWhat, Child(path, "tokens")));
    ASSIGN_OR_RETURN(const Json* multiplier, Get(entry, path, "multiplier"));
    ASSIGN_OR_RETURN(double m, AsDouble(*multiplier, kWhat, Child(path, "multiplier")));
    ASSIGN_OR_RETURN(const Json* normalized, Get(entry, path, "normalized"));
    ASSIGN_OR_RETURN(double n, AsDouble(*normalized, kWhat, Child(path, "normalized")));
    if (per_head) {
      const std::string heads_path = Child(path, "head_tokens");
      ASSIGN_OR_RETURN(const Json* heads_json, Get(entry, path, "head_tokens"));
      RETURN_IF_ERROR(json_fields::ExpectArray(*heads_json, kWhat, heads_path));
      if (heads_json->empty()) return Bad(heads_path, "must not be empty (at least one KV head)");
      if (i > 0 && heads_json->size() != map.head_tokens[0].size()) {
        return Bad(heads_path, absl::StrCat("has ", heads_json->size(), " heads, layer 0 has ",
                                            map.head_tokens[0].size(),
                                            " (every layer the same number of KV heads)"));
      }
      std::vector<int64_t>& heads = map.head_tokens.emplace_back();
      for (size_t h = 0; h < heads_json->size(); ++h) {
        ASSIGN_OR_RETURN(int64_t b, AsInt((*heads_json)[h], kWhat, Index(heads_path, h)));
        heads.push_back(b);
      }
    }
    map.tokens.push_back(t);
    map.multipliers.push_back(m);
    map.normalized.push_back(n);
  }
  RETURN_IF_ERROR(ValidateBudgetMap(map));
  return map;
}

StatusOr<std::vector<double>> KvpressCompressionRatios(const BudgetMap& map, int64_t context_len) {
  RETURN_IF_ERROR(ValidateBudgetMap(map));
  if (context_len <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("kvpress: context length must be > 0, got ", context_len));
  }
  std::vector<double> ratios;
  ratios.reserve(map.tokens.size());
  for (size_t l = 0; l < map.tokens.size(); ++l) {
    const int64_t t = map.tokens[l];
    if (t > context_len) {
      return absl::InvalidArgumentError(
          absl::StrCat("kvpress: layer ", l, " keeps ", t, " tokens, more than the context length ",
                       context_len, " (compression ratios would be negative)"));
    }
    ratios.push_back(KvpressRatio(t, context_len));
  }
  return ratios;
}

StatusOr<std::vector<std::vector<double>>> KvpressHeadCompressionRatios(const BudgetMap& map,
                                                                        int64_t context_len) {
  RETURN_IF_ERROR(ValidateBudgetMap(map));
  if (context_len <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("kvpress: context length must be > 0, got ", context_len));
  }
  if (map.head_tokens.empty()) {
    return absl::InvalidArgumentError(
        "kvpress: head compression ratios need a per-head map (this map has no head budgets)");
  }
  std::vector<std::vector<double>> ratios(map.head_tokens.size());
  for (size_t l = 0; l < map.head_tokens.size(); ++l) {
    ratios[l].reserve(map.head_tokens[l].size());
    for (size_t h = 0; h < map.head_tokens[l].size(); ++h) {
      const int64_t b = map.head_tokens[l][h];
      if (b > context_len) {
        return absl::InvalidArgumentError(absl::StrCat("kvpress: layer ", l, " head ", h, " keeps ",
                                                       b, " tokens, more than the context length ",
                                                       context_len,
                                                       " (compression ratios would be negative)"));
      }
      ratios[l].push_back(KvpressRatio(b, context_len));
    }
  }
  return ratios;
}

StatusOr<std::string> FormatBudgetMap(const BudgetMap& map, BudgetFormat format,
                                      std::optional<int64_t> context_len) {
  switch (format) {
    case BudgetFormat::kNative:
      return BudgetMapToJson(map);
    case BudgetFormat::kKvpress: {
      if (!context_len) {
        return absl::InvalidArgumentError(
            "kvpress: the context length is required (compression ratios are relative to it)");
      }
      ASSIGN_OR_RETURN(std::vector<double> ratios, KvpressCompressionRatios(map, *context_len));
      OrderedJson kvpress = {{"compression_ratios", ratios}};
      if (!map.head_tokens.empty()) {
        ASSIGN_OR_RETURN(kvpress["head_compression_ratios"],
                         KvpressHeadCompressionRatios(map, *context_len));
      }
      return json_fields::Dump(kvpress, "kvpress");
    }
    case BudgetFormat::kTrtllm: {
      RETURN_IF_ERROR(ValidateBudgetMap(map));
      if (!map.head_tokens.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "trtllm: a per-head map (", map.head_tokens[0].size(),
            " budgets per layer) has no trtllm form: TensorRT-LLM's max_attention_window takes "
            "one window per layer; use a per-layer map (`ripplekv budgets` or `ripplekv map "
            "create` without --per-head)"));
      }
      return json_fields::Dump(OrderedJson{{"max_attention_window", map.tokens}}, "trtllm");
    }
  }
  return absl::InvalidArgumentError("unknown budget format");
}

StatusOr<BudgetMap> ReadBudgetMapFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadFileBounded(path, kMaxBudgetMapFileBytes));
  StatusOr<BudgetMap> map = BudgetMapFromJson(text);
  if (!map.ok()) {
    return Status(map.status().code(), absl::StrCat(path, ": ", map.status().message()));
  }
  return map;
}

Status WriteBudgetMapFile(const std::string& path, const BudgetMap& map, BudgetFormat format,
                          std::optional<int64_t> context_len) {
  ASSIGN_OR_RETURN(std::string text, FormatBudgetMap(map, format, context_len));
  return WriteFileAtomically(path, text);
}

}  // namespace ripplekv::method
