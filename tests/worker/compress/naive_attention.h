#pragma once
// Textbook references for the compression tests: full attention matrices in double from q and a
// layer's keys, written independently of eval/compress (plain loops, two-pass statistics).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/tensor/tensor.h"
#include "worker/engine/kv_cache.h"
#include "worker/model/model.h"

namespace ripplekv::worker::testing {

// attn[h][i][j]: softmax over keys j <= i (positions 0..n-1, entry j at position j) of
// q_i . k_j / sqrt(d) for the queries q [rows, n_heads, d] at positions first_row .. first_row +
// rows - 1; zero for j > position.
inline std::vector<std::vector<std::vector<double>>> NaiveAttention(const std::vector<float>& q,
                                                                    int rows, int first_row,
                                                                    int n_heads,
                                                                    const worker::KvCache& cache,
                                                                    int layer) {
  const int d = cache.head_dim(), n = cache.length(layer);
  const int group = n_heads / cache.n_kv_heads();
  std::vector<std::vector<std::vector<double>>> attn(
      n_heads, std::vector<std::vector<double>>(rows, std::vector<double>(n, 0.0)));
  for (int h = 0; h < n_heads; ++h) {
    for (int r = 0; r < rows; ++r) {
      const int pos = first_row + r;
      std::vector<double> s(pos + 1);
      for (int j = 0; j <= pos; ++j) {
        const auto k = cache.Key(layer, h / group, j);
        double dot = 0;
        for (int e = 0; e < d; ++e) dot += static_cast<double>(q[(r * n_heads + h) * d + e]) * k[e];
        s[j] = dot / std::sqrt(static_cast<double>(d));
      }
      const double mx = *std::max_element(s.begin(), s.end());
      double z = 0;
      for (double& v : s) z += (v = std::exp(v - mx));
      for (int j = 0; j <= pos; ++j) attn[h][r][j] = s[j] / z;
    }
  }
  return attn;
}

// A cache whose layer 0 holds n random keys (and values) at positions 0..n-1.
inline worker::KvCache RandomCache(const worker::ModelConfig& c, int n, std::mt19937_64& rng,
                                   float scale = 1.0f) {
  worker::KvCache cache(c, n);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> k(static_cast<size_t>(n) * c.n_kv_heads * c.head_dim), v(k.size());
  for (float& x : k) x = normal(rng);
  for (float& x : v) x = normal(rng);
  std::vector<int32_t> pos(n);
  for (int i = 0; i < n; ++i) pos[i] = i;
  (void)cache.Append(0, k, v, pos);
  return cache;
}

inline std::vector<float> RandomQueries(int rows, int n_heads, int d, std::mt19937_64& rng,
                                        float scale = 1.0f) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> q(static_cast<size_t>(rows) * n_heads * d);
  for (float& x : q) x = normal(rng);
  return q;
}

inline worker::ModelConfig SmallConfig(int n_heads, int n_kv_heads, int head_dim) {
  worker::ModelConfig c;
  c.n_layers = 1;
  c.n_heads = n_heads;
  c.n_kv_heads = n_kv_heads;
  c.head_dim = head_dim;
  c.d_model = n_heads * head_dim;
  return c;
}

}  // namespace ripplekv::worker::testing
