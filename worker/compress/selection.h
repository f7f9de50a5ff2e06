#pragma once
// Token selection: given one layer's attention statistics and its budget b (tokens per KV head,
// every kept token counted), the cache entries each KV head keeps. docs/COMPRESSION.md gives the
// sources of each rule and default.
//
// Every selector returns, per KV head, strictly increasing entry indices, exactly min(b, n) of
// them (n = the layer's prompt length): with b >= n a layer keeps everything. Scores are ranked
// high to low; equal scores go to the lower position (deterministic). A budget below the
// selector's minimum (MinBudget) is InvalidArgument naming the budget and the minimum.
//
// Thread-safety: pure functions.

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "worker/compress/attention_stats.h"

namespace ripplekv::worker {

enum class SelectionKind {
  kSnapKv,     // window + top pooled window-attention scores of the prefix
  kStreaming,  // attention sinks + most recent tokens
  kH2o,        // heavy hitters of accumulated attention + most recent tokens
  kCake,       // window + top CAKE eviction indicator (mean + gamma * variance) of the prefix
  kFull,       // keep everything (no compression)
};
// "snapkv", "streaming", "h2o", "cake", "full".
std::string_view SelectionName(SelectionKind kind);

enum class PoolKind { kMax, kAvg };

struct SelectionOptions {
  // SnapKV: 1-D pooling of the prefix scores (stride 1, padding kernel/2, same length). The
  // published SnapKV runs use max-pooling with kernel 7 (configs ablation_c*_w32_k7_maxpool).
  PoolKind pool = PoolKind::kMax;
  int pool_kernel = 7;  // odd, >= 1 (1 = no pooling)
  // StreamingLLM: leading "attention sink" tokens always kept (the paper's 4).
  int sinks = 4;
  // H2O: how the budget b splits between the most recent tokens and heavy hitters.
  // recent_tokens == 0: heavy hitters get floor(b * heavy_ratio), the most recent tokens the rest
  // (the H2O paper splits the cache evenly, heavy = recent). recent_tokens > 0: the most recent
  // min(recent_tokens, b) tokens, heavy hitters the rest; heavy_ratio is not read
  // (KVCache-Factory's H2O keeps 8 recent tokens).
  double heavy_ratio = 0.5;
  int recent_tokens = 0;
  // CAKE eviction indicator: mean + gamma * variance of the window attention, average-pooled
  // (count-include-pad) with this kernel, averaged over the group's query heads; reference code
  // defaults gamma = 200, kernel 5.
  double cake_gamma = 200.0;
  int cake_pool_kernel = 5;  // odd, >= 1
};

// Checks the options (kernels odd and >= 1, sinks >= 0, heavy_ratio in [0, 1], recent_tokens
// >= 0, gamma >= 0 and finite). InvalidArgument naming the field.
[[nodiscard]] Status ValidateSelectionOptions(const SelectionOptions& options);

// The smallest budget `kind` accepts for a layer of `length` tokens whose observation window is
// `window` tokens: SnapKV/CAKE min(window, n), StreamingLLM min(sinks, n), H2O min(1, n),
// full n.
int MinBudget(SelectionKind kind, const SelectionOptions& options, int window, int length);

// The entries each KV head of the layer keeps under budget b, by `kind`. SnapKV and CAKE need
// window statistics, H2O accumulated attention (FailedPrecondition otherwise).
[[nodiscard]] StatusOr<std::vector<std::vector<int32_t>>> SelectTokens(
    SelectionKind kind, const LayerStats& stats, int budget, const SelectionOptions& options);

// Building blocks, exposed for tests.

// 1-D pooling with stride 1 and padding kernel/2 (output length = input length), as PyTorch's
// max_pool1d (padding never wins) and avg_pool1d (count_include_pad: divides by kernel).
std::vector<double> Pool1d(std::span<const double> x, PoolKind kind, int kernel);

// Indices of the k largest scores, increasing; ties go to the lower index. k <= scores.size().
std::vector<int32_t> TopK(std::span<const double> scores, int k);

// SnapKV score of each prefix entry j < prefix_end for `kv_head`: window_sum summed over the
// group's query heads, then pooled.
std::vector<double> SnapKvScores(const LayerStats& stats, int kv_head,
                                 const SelectionOptions& options);

// CAKE indicator of each prefix entry for `kv_head` (before pooling the per-query-head values
// mean_i a + gamma * var_i a, unbiased variance over the window queries; pooled, then averaged
// over the group).
std::vector<double> CakeScores(const LayerStats& stats, int kv_head,
                               const SelectionOptions& options);

}  // namespace ripplekv::worker
