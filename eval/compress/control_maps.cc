#include "eval/compress/control_maps.h"

#include <algorithm>
#include <charconv>
#include <numeric>
#include <string>

#include "base/rng.h"
#include "base/strings.h"
#include "method/apportion.h"

namespace ripplekv::eval {
namespace {

// Streams of the controls' draws, so a permutation and a spike of the same k are unrelated.
constexpr uint64_t kPermutationStream = 0x7065726d;  // "perm"
constexpr uint64_t kSpikeStream = 0x7370696b;        // "spik"

// The allocation names of the k-indexed controls: "<prefix><k>".
constexpr std::string_view kPermutedPrefix = "ripple-perm";
constexpr std::string_view kSpikePrefix = "spike";

// k of "<prefix><k>": a decimal integer >= 1 without leading zeros.
std::optional<uint64_t> Index(std::string_view name, std::string_view prefix) {
  if (!name.starts_with(prefix)) return std::nullopt;
  const std::string_view digits = name.substr(prefix.size());
  if (digits.empty() || digits.front() == '0' ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  uint64_t k = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), k);
  if (error != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return k;
}

}  // namespace

std::optional<MapControl> ParseMapControl(std::string_view allocation) {
  if (allocation == "ripple" || allocation == "map") return MapControl{};
  if (allocation == "ripple-rev") return MapControl{.kind = MapControlKind::kReversed};
  if (auto k = Index(allocation, kPermutedPrefix)) {
    return MapControl{.kind = MapControlKind::kPermuted, .seed = *k};
  }
  if (auto k = Index(allocation, kSpikePrefix)) {
    return MapControl{.kind = MapControlKind::kSpike, .seed = *k};
  }
  return std::nullopt;
}

std::vector<std::string> ExpandMapControl(std::string_view name, int seeds) {
  const size_t plus = name.find('+');
  const std::string_view allocation = name.substr(0, plus);
  if (plus == std::string_view::npos ||
      (allocation != kPermutedPrefix && allocation != kSpikePrefix)) {
    return {std::string(name)};
  }
  std::vector<std::string> names;
  for (int k = 1; k <= seeds; ++k) names.push_back(Cat(allocation, k, name.substr(plus)));
  return names;
}

std::vector<double> ControlValues(std::span<const double> values, MapControl control) {
  std::vector<double> out(values.begin(), values.end());
  if (control.kind == MapControlKind::kReversed) {
    std::reverse(out.begin(), out.end());
  } else if (control.kind == MapControlKind::kPermuted) {
    base::SplitMix64 rng(base::StreamSeed(control.seed, kPermutationStream));
    for (size_t i = out.size(); i > 1; --i) {  // Fisher-Yates, from the top
      std::swap(out[i - 1], out[rng.Below(i)]);
    }
  }
  return out;
}

StatusOr<std::vector<int64_t>> SpikeMap(std::span<const int64_t> map, int64_t min_tokens,
                                        uint64_t seed) {
  if (map.empty()) return absl::InvalidArgumentError("spike map: empty map");
  if (seed == 0) return absl::InvalidArgumentError("spike map: seed must be >= 1");
  const int64_t total = std::accumulate(map.begin(), map.end(), int64_t{0});
  const int64_t largest = *std::max_element(map.begin(), map.end());
  base::SplitMix64 rng(base::StreamSeed(seed, kSpikeStream));
  const size_t spike = rng.Below(map.size());
  std::vector<int64_t> out(map.size(), largest);
  if (map.size() == 1) return out;
  const std::vector<double> equal(map.size() - 1, 1.0);
  auto rest = method::Apportion(equal, total - largest, {.min_tokens = min_tokens});
  if (!rest.ok()) {
    return absl::InvalidArgumentError(Cat("spike map: the ", total - largest,
                                          " tokens left after layer ", spike, "'s ", largest,
                                          " do not fit: ", std::string(rest.status().message())));
  }
  for (size_t l = 0, i = 0; l < out.size(); ++l) {
    if (l != spike) out[l] = (*rest)[i++];
  }
  return out;
}

StatusOr<std::vector<int64_t>> ControlMap(std::span<const double> values,
                                          const method::BudgetOptions& options,
                                          MapControl control) {
  ASSIGN_OR_RETURN(method::BudgetMap map,
                   method::ComputeBudgetMap(ControlValues(values, control), options));
  if (control.kind != MapControlKind::kSpike) return std::move(map.tokens);
  return SpikeMap(map.tokens, options.min_tokens, control.seed);
}

}  // namespace ripplekv::eval
