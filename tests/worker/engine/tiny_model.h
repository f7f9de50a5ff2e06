#pragma once
// A small random LLaMA-family model for tests, and a naive reference forward pass written
// independently of kernels/ (plain loops, double accumulation) to check the engine against.

#include <cmath>
#include <cstdint>
#include <numbers>
#include <random>
#include <vector>

#include "worker/model/model.h"

namespace ripplekv::worker::testing {

struct TinyModelOptions {
  int n_layers = 3;
  int d_model = 32;
  int n_heads = 4;
  int n_kv_heads = 2;
  int d_ff = 48;
  int vocab = 61;
  bool qkv_bias = false;
  bool tied = true;
  RopeStyle rope_style = RopeStyle::kInterleaved;
  float rope_theta = 10000.0f;
  uint64_t seed = 7;
};

inline kernels::Tensor RandomTensor(std::mt19937_64& rng, kernels::Shape shape, float scale,
                                    float offset = 0.0f) {
  kernels::Tensor t(std::move(shape));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& v : t.span()) v = offset + scale * normal(rng);
  return t;
}

// n token ids below `vocab`, drawn with std::mt19937 seeded with `seed`.
inline std::vector<int32_t> RandomTokens(int n, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(n);
  for (auto& v : t) v = static_cast<int32_t>(rng() % vocab);
  return t;
}

inline Model MakeTinyModel(const TinyModelOptions& o = {}) {
  std::mt19937_64 rng(o.seed);
  Model m;
  ModelConfig& c = m.config;
  c.architecture = o.qkv_bias ? "qwen2" : "llama";
  c.n_layers = o.n_layers;
  c.d_model = o.d_model;
  c.n_heads = o.n_heads;
  c.n_kv_heads = o.n_kv_heads;
  c.head_dim = o.d_model / o.n_heads;
  c.d_ff = o.d_ff;
  c.vocab_size = o.vocab;
  c.context_length = 4096;
  c.rms_eps = 1e-5f;
  c.rope_theta = o.rope_theta;
  c.rope_style = o.rope_style;
  c.qkv_bias = o.qkv_bias;
  c.tied_embeddings = o.tied;
  const int64_t d = o.d_model, hd = c.head_dim;
  const float ws = 1.0f / std::sqrt(static_cast<float>(d));
  m.tok_embeddings = RandomTensor(rng, {o.vocab, d}, 1.0f);
  for (int l = 0; l < o.n_layers; ++l) {
    LayerWeights w;
    w.attn_norm = RandomTensor(rng, {d}, 0.1f, 1.0f);
    w.wq = RandomTensor(rng, {o.n_heads * hd, d}, ws);
    w.wk = RandomTensor(rng, {o.n_kv_heads * hd, d}, ws);
    w.wv = RandomTensor(rng, {o.n_kv_heads * hd, d}, ws);
    w.wo = RandomTensor(rng, {d, o.n_heads * hd}, ws);
    if (o.qkv_bias) {
      w.bq = RandomTensor(rng, {o.n_heads * hd}, 0.1f);
      w.bk = RandomTensor(rng, {o.n_kv_heads * hd}, 0.1f);
      w.bv = RandomTensor(rng, {o.n_kv_heads * hd}, 0.1f);
    }
    w.ffn_norm = RandomTensor(rng, {d}, 0.1f, 1.0f);
    w.w_gate = RandomTensor(rng, {o.d_ff, d}, ws);
    w.w_up = RandomTensor(rng, {o.d_ff, d}, ws);
    w.w_down = RandomTensor(rng, {d, o.d_ff}, 1.0f / std::sqrt(static_cast<float>(o.d_ff)));
    m.layers.push_back(std::move(w));
  }
  m.output_norm = RandomTensor(rng, {d}, 0.1f, 1.0f);
  if (!o.tied) m.output = RandomTensor(rng, {o.vocab, d}, ws);
  return m;
}

// Logits [n, vocab] for tokens at positions 0..n-1, computed the textbook way.
inline std::vector<std::vector<double>> NaiveForward(const Model& m,
                                                     const std::vector<int32_t>& tokens) {
  const ModelConfig& c = m.config;
  const int n = static_cast<int>(tokens.size());
  const int d = c.d_model, hd = c.head_dim, H = c.n_heads, Hkv = c.n_kv_heads;
  using Mat = std::vector<std::vector<double>>;
  auto linear = [](const Mat& x, const kernels::Weight& stored, const kernels::Tensor& b) {
    const kernels::Tensor w = stored.Expand();
    const int64_t out = w.dim(0), in = w.dim(1);
    Mat y(x.size(), std::vector<double>(out));
    for (size_t i = 0; i < x.size(); ++i)
      for (int64_t o = 0; o < out; ++o) {
        double s = b.empty() ? 0.0 : b.data()[o];
        for (int64_t k = 0; k < in; ++k) s += x[i][k] * w.data()[o * in + k];
        y[i][o] = s;
      }
    return y;
  };
  auto rmsnorm = [&](const Mat& x, const kernels::Tensor& w) {
    Mat y = x;
    for (auto& row : y) {
      double ss = 0;
      for (double v : row) ss += v * v;
      const double inv = 1.0 / std::sqrt(ss / row.size() + c.rms_eps);
      for (size_t j = 0; j < row.size(); ++j) row[j] = row[j] * inv * w.data()[j];
    }
    return y;
  };
  auto rope = [&](Mat& x, int heads) {
    for (int i = 0; i < n; ++i)
      for (int h = 0; h < heads; ++h)
        for (int p = 0; p < hd / 2; ++p) {
          const double freq = std::pow(static_cast<double>(c.rope_theta), -2.0 * p / hd);
          const double a = i * freq;
          const bool il = c.rope_style == RopeStyle::kInterleaved;
          const int i0 = h * hd + (il ? 2 * p : p), i1 = h * hd + (il ? 2 * p + 1 : p + hd / 2);
          const double x0 = x[i][i0], x1 = x[i][i1];
          x[i][i0] = x0 * std::cos(a) - x1 * std::sin(a);
          x[i][i1] = x0 * std::sin(a) + x1 * std::cos(a);
        }
  };
  Mat x(n, std::vector<double>(d));
  const kernels::Tensor embeddings = m.tok_embeddings.Expand();
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < d; ++j) x[i][j] = embeddings.data()[tokens[i] * d + j];
  for (const LayerWeights& w : m.layers) {
    Mat xn = rmsnorm(x, w.attn_norm);
    Mat q = linear(xn, w.wq, w.bq), k = linear(xn, w.wk, w.bk), v = linear(xn, w.wv, w.bv);
    rope(q, H);
    rope(k, Hkv);
    Mat att(n, std::vector<double>(H * hd, 0.0));
    for (int h = 0; h < H; ++h) {
      const int kh = h / (H / Hkv);
      for (int i = 0; i < n; ++i) {
        std::vector<double> s(i + 1);
        double mx = -1e300;
        for (int j = 0; j <= i; ++j) {
          double dot = 0;
          for (int e = 0; e < hd; ++e) dot += q[i][h * hd + e] * k[j][kh * hd + e];
          s[j] = dot / std::sqrt(static_cast<double>(hd));
          mx = std::max(mx, s[j]);
        }
        double z = 0;
        for (double& e : s) z += (e = std::exp(e - mx));
        for (int j = 0; j <= i; ++j)
          for (int e = 0; e < hd; ++e) att[i][h * hd + e] += s[j] / z * v[j][kh * hd + e];
      }
    }
    Mat o = linear(att, w.wo, {});
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < d; ++j) x[i][j] += o[i][j];
    xn = rmsnorm(x, w.ffn_norm);
    Mat g = linear(xn, w.w_gate, {}), u = linear(xn, w.w_up, {});
    for (int i = 0; i < n; ++i)
      for (size_t j = 0; j < g[i].size(); ++j)
        g[i][j] = g[i][j] / (1 + std::exp(-g[i][j])) * u[i][j];
    Mat down = linear(g, w.w_down, {});
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < d; ++j) x[i][j] += down[i][j];
  }
  return linear(rmsnorm(x, m.output_norm), m.lm_head(), {});
}

}  // namespace ripplekv::worker::testing
