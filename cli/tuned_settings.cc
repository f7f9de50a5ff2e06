#include "cli/tuned_settings.h"

#include <cmath>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/file_io.h"
#include "base/strings.h"

namespace ripplekv::cli {
namespace {

using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;

constexpr int kSchemaVersion = 1;

Status Bad(const std::string& path, std::string_view problem) {
  return absl::InvalidArgumentError(Cat("tuned settings: ", path, ": ", problem));
}

Status ExpectKeys(const Json& j, const std::string& path, const std::set<std::string>& allowed) {
  if (!j.is_object()) return Bad(path, Cat("expected an object, got ", j.type_name()));
  for (const auto& [key, value] : j.items()) {
    if (!allowed.contains(key)) return Bad(path, Cat("unknown key \"", key, "\""));
  }
  for (const std::string& key : allowed) {
    if (!j.contains(key)) return Bad(path, Cat("missing key \"", key, "\""));
  }
  return absl::OkStatus();
}

StatusOr<double> Number(const Json& j, const std::string& path) {
  if (!j.is_number() || !std::isfinite(j.get<double>())) {
    return Bad(path, Cat("expected a finite number, got ", j.dump()));
  }
  return j.get<double>();
}

StatusOr<std::string> String(const Json& j, const std::string& path) {
  if (!j.is_string()) return Bad(path, Cat("expected a string, got ", j.type_name()));
  return j.get<std::string>();
}

StatusOr<int> Budget(const std::string& key, const std::string& path) {
  int b = 0;
  if (!absl::SimpleAtoi(key, &b) || b < 1) {
    return Bad(path, Cat("\"", key, "\" is not a positive budget"));
  }
  return b;
}

StatusOr<std::map<std::string, double>> Scores(const Json& j, const std::string& path) {
  if (!j.is_object()) return Bad(path, Cat("expected an object, got ", j.type_name()));
  std::map<std::string, double> out;
  for (const auto& [key, value] : j.items()) {
    ASSIGN_OR_RETURN(out[key], Number(value, Cat(path, ".", key)));
  }
  return out;
}

}  // namespace

std::string TunedSettingsToJson(const TunedSettings& s) {
  OrderedJson root = {{"schema_version", kSchemaVersion},
                      {"model_hash", s.model_hash},
                      {"split", s.split},
                      {"objective", s.objective},
                      {"lower_is_better", s.lower_is_better},
                      {"examples", s.examples},
                      {"profile", s.profile}};
  if (!s.ripple.empty()) {
    OrderedJson budgets = OrderedJson::object();
    for (const auto& [b, choice] : s.ripple) {
      budgets[std::to_string(b)] = {{"ratio", choice.ratio}, {"scores", choice.scores}};
    }
    root["ripple"] = {{"selector", s.ripple_selector}, {"budgets", std::move(budgets)}};
  }
  if (!s.cake.empty()) {
    OrderedJson budgets = OrderedJson::object();
    for (const auto& [b, choice] : s.cake) {
      budgets[std::to_string(b)] = {
          {"tau1", choice.tau1}, {"tau2", choice.tau2}, {"scores", choice.scores}};
    }
    root["cake"] = {{"method", s.cake_method}, {"budgets", std::move(budgets)}};
  }
  return root.dump(2) + "\n";
}

StatusOr<TunedSettings> TunedSettingsFromJson(const std::string& text) {
  Json root = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return Bad("", "not valid JSON");
  if (!root.is_object()) return Bad("", "expected an object");
  std::set<std::string> keys = {"schema_version",  "model_hash", "split",  "objective",
                                "lower_is_better", "examples",   "profile"};
  if (root.contains("ripple")) keys.insert("ripple");
  if (root.contains("cake")) keys.insert("cake");
  RETURN_IF_ERROR(ExpectKeys(root, "", keys));
  if (root["schema_version"] != kSchemaVersion) {
    return Bad("schema_version",
               Cat("is ", root["schema_version"].dump(), "; this build reads ", kSchemaVersion));
  }
  TunedSettings s;
  ASSIGN_OR_RETURN(s.model_hash, String(root["model_hash"], "model_hash"));
  ASSIGN_OR_RETURN(s.split, String(root["split"], "split"));
  ASSIGN_OR_RETURN(s.objective, String(root["objective"], "objective"));
  if (!root["lower_is_better"].is_boolean()) return Bad("lower_is_better", "expected a boolean");
  s.lower_is_better = root["lower_is_better"].get<bool>();
  s.examples = OrderedJson::parse(root["examples"].dump());
  s.profile = OrderedJson::parse(root["profile"].dump());
  if (root.contains("ripple")) {
    const Json& r = root["ripple"];
    RETURN_IF_ERROR(ExpectKeys(r, "ripple", {"selector", "budgets"}));
    ASSIGN_OR_RETURN(s.ripple_selector, String(r["selector"], "ripple.selector"));
    if (!r["budgets"].is_object()) return Bad("ripple.budgets", "expected an object");
    for (const auto& [key, value] : r["budgets"].items()) {
      const std::string path = Cat("ripple.budgets.", key);
      ASSIGN_OR_RETURN(int b, Budget(key, path));
      RETURN_IF_ERROR(ExpectKeys(value, path, {"ratio", "scores"}));
      RippleChoice c;
      ASSIGN_OR_RETURN(c.ratio, Number(value["ratio"], Cat(path, ".ratio")));
      if (c.ratio < 1) return Bad(Cat(path, ".ratio"), Cat("must be >= 1, got ", c.ratio));
      ASSIGN_OR_RETURN(c.scores, Scores(value["scores"], Cat(path, ".scores")));
      s.ripple[b] = std::move(c);
    }
  }
  if (root.contains("cake")) {
    const Json& c = root["cake"];
    if (c.is_object() && c.contains("method")) {
      RETURN_IF_ERROR(ExpectKeys(c, "cake", {"method", "budgets"}));
      ASSIGN_OR_RETURN(s.cake_method, String(c["method"], "cake.method"));
    } else {
      RETURN_IF_ERROR(ExpectKeys(c, "cake", {"budgets"}));
    }
    if (!c["budgets"].is_object()) return Bad("cake.budgets", "expected an object");
    for (const auto& [key, value] : c["budgets"].items()) {
      const std::string path = Cat("cake.budgets.", key);
      ASSIGN_OR_RETURN(int b, Budget(key, path));
      RETURN_IF_ERROR(ExpectKeys(value, path, {"tau1", "tau2", "scores"}));
      CakeChoice choice;
      ASSIGN_OR_RETURN(choice.tau1, Number(value["tau1"], Cat(path, ".tau1")));
      ASSIGN_OR_RETURN(choice.tau2, Number(value["tau2"], Cat(path, ".tau2")));
      if (!(choice.tau1 > 0) || !(choice.tau2 > 0)) {
        return Bad(path, "temperatures must be > 0");
      }
      ASSIGN_OR_RETURN(choice.scores, Scores(value["scores"], Cat(path, ".scores")));
      s.cake[b] = std::move(choice);
    }
  }
  return s;
}

StatusOr<TunedSettings> ReadTunedSettings(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadFileBounded(path, uint64_t{1} << 20));
  StatusOr<TunedSettings> s = TunedSettingsFromJson(text);
  if (!s.ok()) return Status(s.status().code(), absl::StrCat(path, ": ", s.status().message()));
  return s;
}

}  // namespace ripplekv::cli
