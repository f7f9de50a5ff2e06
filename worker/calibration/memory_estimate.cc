#include "worker/calibration/memory_estimate.h"

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_cat.h"

namespace ripplekv::worker {
namespace {

constexpr int64_t kF32 = 4;  // bytes per fp32 value (and per int32 position)

int64_t NonNeg(int64_t v) { return std::max<int64_t>(v, 0); }

// The model's widths as the engine uses them (worker/engine/transformer.cc), values per row.
struct Widths {
  int64_t layers, d, q, kv, ff, vocab, kv_heads, head_dim;
};

Widths WidthsOf(const ModelConfig& c) {
  return {NonNeg(c.n_layers),
          NonNeg(c.d_model),
          NonNeg(c.n_heads) * NonNeg(c.head_dim),
          NonNeg(c.n_kv_heads) * NonNeg(c.head_dim),
          NonNeg(c.d_ff),
          NonNeg(c.vocab_size),
          NonNeg(c.n_kv_heads),
          NonNeg(c.head_dim)};
}

// Transformer::RunLayers' buffers for n rows: xn [n, d], q and attn [n, H * hd], k and v
// [n, H_kv * hd], gate and up [n, d_ff]. Bytes. (The residual stream x is the caller's.)
int64_t LayerActivations(const Widths& w, int64_t n) {
  return n * (w.d + 2 * w.q + 2 * w.kv + 2 * w.ff) * kF32;
}

// CausalAttention's per-thread buffers (kernels/ops/cpu/attention_cpu.cc): scores of up to 128
// queries x `keys` keys and the keys' positions. Bytes, all threads.
int64_t AttentionScratch(int64_t threads, int64_t n, int64_t keys) {
  return threads * (std::min<int64_t>(128, n) * keys + keys) * kF32;
}

// Transformer::Logits for n rows: the normed rows [n, d] and the logits [n, vocab]. Bytes.
int64_t LogitBuffers(const Widths& w, int64_t n) { return n * (w.d + w.vocab) * kF32; }

// The residual stream of n rows: [n, d]. Bytes.
int64_t Residual(const Widths& w, int64_t n) { return n * w.d * kF32; }

}  // namespace

int64_t KvCacheBytes(const ModelConfig& config, int64_t tokens) {
  const Widths w = WidthsOf(config);
  // Per layer and KV head: keys and values [tokens, head_dim] fp32, positions [tokens] int32.
  return w.layers * w.kv_heads * NonNeg(tokens) * (2 * w.head_dim * kF32 + kF32);
}

MemoryEstimate EstimateCalibrationMemory(const ModelConfig& config, int64_t weight_bytes,
                                         const MemoryOptions& options) {
  const Widths w = WidthsOf(config);
  const int64_t threads = std::max(1, options.threads);
  const int64_t c = NonNeg(options.context_len);
  const int64_t p = NonNeg(options.probe_len);  // W
  const int64_t t = NonNeg(options.trials);
  const int64_t n = c + p;  // tokens in the clean cache
  const int64_t r = t * p;  // rows of the batched trials (cache mode)

  MemoryEstimate e;
  e.weight_bytes = NonNeg(weight_bytes);
  // LinearStored expands at most 128 rows of the widest-K matrix per thread (w_down: K = d_ff;
  // wo: K = H * hd; the others and the LM head: K = d_model).
  e.scratch_per_thread_bytes = options.weights == WeightStorage::kStored
                                   ? kLinearSliceRows * std::max({w.d, w.ff, w.q}) * kF32
                                   : 0;
  e.thread_scratch_bytes = threads * e.scratch_per_thread_bytes;
  e.kv_cache_bytes = KvCacheBytes(config, n);
  e.load_bytes = options.weights == WeightStorage::kF32 ? NonNeg(options.f32_load_mapped_bytes) : 0;
  e.tokenizer_bytes = kTokenizerBytesPerToken * w.vocab;

  if (options.mode == method::PerturbMode::kCache) {
    // Held by the prepared sample: clean logits z0 [W, vocab] and each layer's recorded input at
    // the probe rows, L x [W, d].
    const int64_t held = p * w.vocab * kF32 + w.layers * p * w.d * kF32;
    // Prepare, context pass: the residual stream and layer buffers over C rows (no logits).
    const int64_t context_pass =
        Residual(w, c) + LayerActivations(w, c) + AttentionScratch(threads, c, n);
    // Prepare, probe pass: W rows, then the logits of all W rows.
    const int64_t probe_pass =
        Residual(w, p) +
        std::max(LayerActivations(w, p) + AttentionScratch(threads, p, n), LogitBuffers(w, p));
    // RunLayer: the T*W-row residual stream, T perturbed copies of layer l's values
    // [H_kv, C + W, hd], T trials' own probe keys and values [H_kv, W, hd] each, then the layer
    // buffers over T*W rows or the T*W rows' logits (the perturbed logits), whichever is larger.
    const int64_t trials =
        Residual(w, r) + t * w.kv_heads * n * w.head_dim * kF32 +
        2 * t * w.kv_heads * p * w.head_dim * kF32 +
        std::max(LayerActivations(w, r) + AttentionScratch(threads, r, n), LogitBuffers(w, r));
    e.calibration_bytes = held + std::max({context_pass, probe_pass, trials});
  } else {
    // Held: clean logits [W, vocab] and each layer's input at every row, L x [C + W, d].
    const int64_t held = p * w.vocab * kF32 + w.layers * n * w.d * kF32;
    // One pass over C + W rows (Prepare's, and each trial's from layer l), then the W probe rows
    // gathered and their logits.
    const int64_t pass =
        Residual(w, n) + std::max(LayerActivations(w, n) + AttentionScratch(threads, n, n),
                                  Residual(w, p) + LogitBuffers(w, p));
    // Trials run one at a time, each with its own KV cache of C + W tokens.
    e.calibration_bytes = held + KvCacheBytes(config, n) + pass;
  }
  return e;
}

std::string FormatBytes(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  char buf[32];
  if (bytes >= (int64_t{1} << 30)) {
    std::snprintf(buf, sizeof(buf), "%.1f GiB", b / (1 << 30));
  } else if (bytes >= (int64_t{1} << 20)) {
    std::snprintf(buf, sizeof(buf), "%.1f MiB", b / (1 << 20));
  } else if (bytes >= 1024) {
    std::snprintf(buf, sizeof(buf), "%.1f KiB", b / 1024);
  } else {
    return absl::StrCat(bytes, " B");
  }
  return buf;
}

std::string DescribeEstimate(const MemoryEstimate& e) {
  return absl::StrCat(
      FormatBytes(e.total_bytes()), " (weights ", FormatBytes(e.weight_bytes), ", thread scratch ",
      FormatBytes(e.thread_scratch_bytes), ", KV cache ", FormatBytes(e.kv_cache_bytes),
      ", calibration scratch ", FormatBytes(e.calibration_bytes),
      e.load_bytes > 0 ? absl::StrCat(", load ", FormatBytes(e.load_bytes)) : "", ", tokenizer ",
      FormatBytes(e.tokenizer_bytes), ", process ", FormatBytes(e.process_bytes), ")");
}

}  // namespace ripplekv::worker
