#include "method/apportion.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "base/check.h"
#include "base/strings.h"

namespace ripplekv::method {
namespace {

Status ApportionError(const std::string& message) {
  return absl::InvalidArgumentError(Cat("apportion: ", message));
}

// Step 1: b_l = clamp(lambda * w_l, lo, hi) with lambda such that sum(b) == total (exactly, up to
// floating-point rounding). Each round spreads what the fixed layers leave over the free ones in
// proportion to w, then fixes violators at their bound. Which violators are fixed follows the
// sign of their net excess E = sum(bound - b): E > 0 means the free layers must shrink (lambda
// falls), so layers below lo now stay below lo and are fixed at lo, while a layer above hi may come
// back inside and is left free; E < 0 is the mirror case; E == 0 fixes both. Every round fixes at
// least one layer, so there are at most L + 1 rounds, and no fixed layer is ever released.
// Only the proportions of w matter, so they are scaled into [0, 1] first: with weights near the
// top of the double range (r ^ n at a huge ratio), their sum would overflow to infinity, and so
// would remaining * w_l long before. Each budget is remaining times a fraction in [0, 1].
std::vector<double> WaterFill(std::span<const double> weights, int64_t total, int64_t lo,
                              std::optional<int64_t> hi) {
  const size_t L = weights.size();
  const double w_max = *std::max_element(weights.begin(), weights.end());
  std::vector<double> m(L, 1.0);  // w_l / max w; all-zero weights: equal shares
  if (w_max > 0.0) {
    for (size_t l = 0; l < L; ++l) m[l] = weights[l] / w_max;
  }
  std::vector<double> b(L, 0.0);
  std::vector<bool> fixed(L, false);
  int64_t fixed_total = 0;  // integer bounds, so exact
  std::vector<size_t> lows, highs;
  for (size_t round = 0; round <= L; ++round) {
    double m_free = 0.0;
    size_t n_free = 0;
    for (size_t l = 0; l < L; ++l) {
      if (!fixed[l]) {
        m_free += m[l];
        ++n_free;
      }
    }
    if (n_free == 0) break;
    if (m_free == 0.0) {
      // Only zero-weight layers are free: they share what is left equally.
      for (size_t l = 0; l < L; ++l) {
        if (!fixed[l]) m[l] = 1.0;
      }
      m_free = static_cast<double>(n_free);
    }
    const double remaining = static_cast<double>(total - fixed_total);
    lows.clear();
    highs.clear();
    double excess = 0.0;
    for (size_t l = 0; l < L; ++l) {
      if (fixed[l]) continue;
      b[l] = remaining * (m[l] / m_free);
      if (b[l] < static_cast<double>(lo)) {
        excess += static_cast<double>(lo) - b[l];
        lows.push_back(l);
      } else if (hi && b[l] > static_cast<double>(*hi)) {
        excess += static_cast<double>(*hi) - b[l];
        highs.push_back(l);
      }
    }
    if (lows.empty() && highs.empty()) break;
    if (excess >= 0) {
      for (size_t l : lows) {
        b[l] = static_cast<double>(lo);
        fixed[l] = true;
        fixed_total += lo;
      }
    }
    if (excess <= 0) {
      for (size_t l : highs) {
        b[l] = static_cast<double>(*hi);
        fixed[l] = true;
        fixed_total += *hi;
      }
    }
  }
  return b;
}

// Step 2: integers in [lo, hi] summing to exactly `total`, by largest remainder with the tie rule
// of the header. Each value is first clamped into [lo, hi] (water-filling can leave a free layer
// an ulp outside), so floors are >= lo and a layer below hi has room for its extra token.
std::vector<int64_t> RoundLargestRemainder(const std::vector<double>& b,
                                           std::span<const double> priority, int64_t total,
                                           int64_t lo, std::optional<int64_t> hi) {
  const size_t L = b.size();
  const double dlo = static_cast<double>(lo);
  std::vector<int64_t> tokens(L);
  std::vector<double> remainder(L);
  int64_t sum = 0;
  for (size_t l = 0; l < L; ++l) {
    double v = std::max(b[l], dlo);
    if (hi) v = std::min(v, static_cast<double>(*hi));
    const double f = std::floor(v);
    tokens[l] = static_cast<int64_t>(f);
    remainder[l] = v - f;
    sum += tokens[l];
  }
  std::vector<size_t> order(L);
  std::iota(order.begin(), order.end(), size_t{0});
  // Largest remainder first, then the higher priority; stable, so full ties keep ascending
  // layer order.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t c) {
    if (remainder[a] != remainder[c]) return remainder[a] > remainder[c];
    return priority[a] > priority[c];
  });
  // The water-filled values sum to `total` up to rounding error, so the floors fall short by
  // fewer than L tokens (or overshoot by a hair); anything else is a bug in WaterFill.
  int64_t deficit = total - sum;
  RIPPLEKV_CHECK(deficit <= static_cast<int64_t>(L) && deficit >= -1);
  for (size_t l : order) {
    if (deficit <= 0) break;
    if (hi && tokens[l] >= *hi) continue;
    ++tokens[l];
    --deficit;
  }
  for (auto it = order.rbegin(); it != order.rend() && deficit < 0; ++it) {
    if (tokens[*it] <= lo) continue;
    --tokens[*it];
    ++deficit;
  }
  RIPPLEKV_CHECK(deficit == 0);
  return tokens;
}

Status CheckValues(std::span<const double> values, const char* what) {
  for (size_t l = 0; l < values.size(); ++l) {
    if (!std::isfinite(values[l]) || values[l] < 0.0) {
      return ApportionError(
          Cat(what, " of layer ", l, " is ", values[l], "; it must be finite and >= 0"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

StatusOr<std::vector<int64_t>> Apportion(std::span<const double> weights, int64_t total,
                                         ApportionBounds bounds, std::span<const double> priority) {
  const size_t L = weights.size();
  if (L == 0) return ApportionError("no layers");
  RETURN_IF_ERROR(CheckValues(weights, "weight"));
  if (!priority.empty() && priority.size() != L) {
    return ApportionError(
        Cat(priority.size(), " priorities for ", L, " layers; give one per layer or none"));
  }
  RETURN_IF_ERROR(CheckValues(priority, "priority"));
  const int64_t lo = bounds.min_tokens;
  const std::optional<int64_t> hi = bounds.max_tokens;
  if (lo < 0 || (hi && *hi < lo)) {
    return ApportionError(
        Cat("bounds [", lo, ", ", hi ? Cat(*hi) : "unbounded", "] are empty or negative"));
  }
  if (total < 0 || total > kMaxApportionTotal) {
    return ApportionError(Cat("total ", total, " tokens is outside [0, ", kMaxApportionTotal, "]"));
  }
  const __int128 n = static_cast<__int128>(L);
  if (n * lo > total || (hi && n * *hi < total)) {
    return ApportionError(Cat("a total of ", total, " tokens over ", L, " layers is outside [",
                              static_cast<int64_t>(n * lo), ", ",
                              hi ? Cat(static_cast<int64_t>(n * *hi)) : "unbounded", "]"));
  }
  const std::vector<double> real = WaterFill(weights, total, lo, hi);
  return RoundLargestRemainder(real, priority.empty() ? weights : priority, total, lo, hi);
}

}  // namespace ripplekv::method
