#include "worker/engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace ripplekv::worker {

int32_t Sampler::Sample(std::span<const float> logits) {
  const int32_t n = static_cast<int32_t>(logits.size());
  if (options_.temperature <= 0.0f) {
    return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  }
  std::vector<int32_t> ids(n);
  std::iota(ids.begin(), ids.end(), 0);
  const int32_t k = options_.top_k > 0 ? std::min(options_.top_k, n) : n;
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(),
                    [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
  ids.resize(k);
  std::vector<double> p(k);
  const double mx = logits[ids[0]];
  double sum = 0.0;
  for (int32_t i = 0; i < k; ++i) {
    p[i] = std::exp((logits[ids[i]] - mx) / options_.temperature);
    sum += p[i];
  }
  int32_t keep = k;
  if (options_.top_p < 1.0f) {
    double mass = 0.0;
    for (int32_t i = 0; i < k; ++i) {
      mass += p[i] / sum;
      if (mass >= options_.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  std::discrete_distribution<int32_t> pick(p.begin(), p.begin() + keep);
  return ids[pick(rng_)];
}

}  // namespace ripplekv::worker
