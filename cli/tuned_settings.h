#pragma once
// The settings `ripplekv tune` chooses on a validation split and `ripplekv eval --tuned` applies on
// the test split (docs/EVAL.md, "Tuning without test data"): per average budget, RippleKV's ratio
// and CAKE's temperatures, with the validation score of every candidate. One JSON document:
//   {"schema_version": 1, "model_hash": H, "split": "validation", "objective": T,
//    "lower_is_better": bool, "examples": {...recorded...}, "profile": {...recorded...},
//    "ripple": {"selector": "snapkv", "budgets": {"128": {"ratio": 4,
//               "scores": {"1.5": s, ...}}, ...}},
//    "cake": {"method": "cake+snapkv",
//             "budgets": {"128": {"tau1": 1, "tau2": 1, "scores": {"1:1": s, ...}}, ...}}}
// "ripple" or "cake" is absent when that part was not tuned. "cake.method" is the CAKE method the
// temperatures were tuned with (absent in files written before it was recorded: "cake"). Reading is strict (unknown keys are
// errors naming their path). Thread-safe (pure functions).

#include <map>
#include <optional>
#include <string>

#include "base/status.h"
#include "nlohmann/json.hpp"

namespace ripplekv::cli {

struct RippleChoice {
  double ratio = 0.0;                    // the chosen ratio, >= 1
  std::map<std::string, double> scores;  // candidate ratio (as written) -> validation score
};

struct CakeChoice {
  double tau1 = 0.0;  // the chosen temperatures, > 0
  double tau2 = 0.0;
  std::map<std::string, double> scores;  // "tau1:tau2" -> validation score
};

struct TunedSettings {
  std::string model_hash;
  std::string split;  // where the choice was made: "validation"
  std::string objective;
  bool lower_is_better = false;
  nlohmann::ordered_json examples;     // the example flags used, recorded for the reader
  nlohmann::ordered_json profile;      // the profile used, recorded for the reader
  std::string ripple_selector;         // the selection the ratio was tuned with, e.g. "snapkv"
  std::map<int, RippleChoice> ripple;  // by average budget; empty: not tuned
  std::string cake_method = "cake";    // the CAKE method the temperatures were tuned with
  std::map<int, CakeChoice> cake;      // by average budget; empty: not tuned
};

[[nodiscard]] std::string TunedSettingsToJson(const TunedSettings& settings);
// Errors: InvalidArgument naming the JSON path (syntax errors with the byte offset).
[[nodiscard]] StatusOr<TunedSettings> TunedSettingsFromJson(const std::string& text);
// ReadFileBounded (1 MiB) + TunedSettingsFromJson, the path in every message.
[[nodiscard]] StatusOr<TunedSettings> ReadTunedSettings(const std::string& path);

}  // namespace ripplekv::cli
