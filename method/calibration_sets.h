#pragma once
// The built-in calibration sets by name, with the domain a profile records for each
// (ProfileParams::data_domain; docs/DATA.md). One list for every component that names them: the
// worker that builds the sets (worker/data/calibration_data.h), and the scheduler that checks a
// job's set and records the domain of its profile.
//
// Header-only, constexpr data; thread-safe.

#include <algorithm>
#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace ripplekv::method {

inline constexpr std::string_view kDomainProse = "prose";  // books
inline constexpr std::string_view kDomainCode = "code";    // source code
inline constexpr std::string_view kDomainDocs = "docs";    // technical documentation
inline constexpr std::string_view kDomainMixed = "mixed";  // prose, code and docs together
inline constexpr std::string_view kDomainUser = "user";    // a file or inline data of the user

struct CalibrationSetName {
  std::string_view name;
  std::string_view domain;
};

// Every built-in set; the first is the default of a calibration with no data.
inline constexpr std::array<CalibrationSetName, 5> kBuiltinCalibrationSets = {{
    {"mixed", kDomainMixed},
    {"sherlock-holmes", kDomainProse},
    {"tom-sawyer", kDomainProse},
    {"code", kDomainCode},
    {"docs", kDomainDocs},
}};
inline constexpr std::string_view kDefaultCalibrationSet = kBuiltinCalibrationSets[0].name;

// The domain of built-in set `name`; nullopt for a name that is not one.
inline std::optional<std::string_view> BuiltinSetDomain(std::string_view name) {
  const auto* it = std::find_if(kBuiltinCalibrationSets.begin(), kBuiltinCalibrationSets.end(),
                                [&](const CalibrationSetName& s) { return s.name == name; });
  if (it == kBuiltinCalibrationSets.end()) return std::nullopt;
  return it->domain;
}

// The names alone, in the same order.
inline constexpr std::array<std::string_view, kBuiltinCalibrationSets.size()>
    kBuiltinCalibrationSetNames = [] {
      std::array<std::string_view, kBuiltinCalibrationSets.size()> names{};
      for (size_t i = 0; i < names.size(); ++i) names[i] = kBuiltinCalibrationSets[i].name;
      return names;
    }();

// "mixed, sherlock-holmes, tom-sawyer, code, docs": for error messages.
inline std::string BuiltinCalibrationSetList() {
  std::string list;
  for (std::string_view name : kBuiltinCalibrationSetNames) {
    if (!list.empty()) list += ", ";
    list += name;
  }
  return list;
}

}  // namespace ripplekv::method
