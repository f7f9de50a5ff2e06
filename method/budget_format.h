#pragma once
// Budget maps on disk and in the formats serving stacks take (docs/BUDGETS.md has examples):
//  - native: our JSON document (schema_version, model hash, parameters, per layer {layer, tokens,
//    multiplier, normalized}, and a per-head map's "head_tokens" after "tokens"); read back
//    strictly, so a stored map can be rolled out as is;
//  - kvpress: {"compression_ratios": [...]} for kvpress's PerLayerCompressionPress, for one context
//    length Lc: ratio_l = 1 - tokens_l / Lc, the fraction of the layer's prefill tokens pruned; a
//    per-head map adds "head_compression_ratios": [[...]] (per layer, per KV head, the same
//    formula on head_tokens) for kvpress's head-wise pruning (the pruned-index masking AdaKVPress
//    uses);
//  - trtllm: {"max_attention_window": [...]} for TensorRT-LLM's KvCacheConfig.max_attention_window,
//    the per-layer number of most recent tokens kept. One window per layer: a per-head map is
//    refused.
// Thread-safe (pure functions).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "method/budget_map.h"

namespace ripplekv::method {

// Native budget-map schema versions. This code reads both and writes the oldest that holds the
// map, so every reader that can use a map can read it.
// Version 1: a per-layer map (BudgetMap::head_tokens empty). Its layer entries are exactly
// {layer, tokens, multiplier, normalized}; "head_tokens" is an error. A per-layer map is always
// written as version 1, byte for byte as before version 2 existed, so agents that read only
// version 1 keep reading per-layer maps, and frozen-map digests do not change.
inline constexpr int kBudgetMapSchemaVersion = 1;
// Version 2: a per-head map. Every layer entry has "head_tokens": [H integers] right after
// "tokens", with the same H >= 1 on every layer; the rest is version 1's. Reads back with
// options.per_head set (the document records it only through the version).
inline constexpr int kBudgetMapPerHeadSchemaVersion = 2;
// Largest budget-map file ReadBudgetMapFile() accepts, bytes.
inline constexpr uint64_t kMaxBudgetMapFileBytes = 64ull << 20;

enum class BudgetFormat {
  kNative,   // "native"
  kKvpress,  // "kvpress"
  kTrtllm,   // "trtllm"
};
// "native" / "kvpress" / "trtllm".
std::string_view BudgetFormatName(BudgetFormat format);
// The inverse of BudgetFormatName(); InvalidArgument for any other string.
[[nodiscard]] StatusOr<BudgetFormat> ParseBudgetFormat(std::string_view name);

// Checks a map's internal consistency: one entry per layer in every vector, tokens in
// [min_tokens, max_tokens] summing to total_tokens == L * average_tokens, multipliers in
// [1, ratio], normalized in [0, 1], options valid. A per-head map (head_tokens not empty, which
// options.per_head must say): one row per layer, the same H >= 1 heads on each, every head budget
// in the bounds of a layer budget, all of them summing to H * total_tokens, and tokens[l] the
// floor or ceiling of the mean of layer l's head budgets (BudgetMap::head_tokens).
// InvalidArgument naming the JSON path ("layers[2].tokens", "layers[3].head_tokens[1]") of the
// first problem, with the numbers.
[[nodiscard]] Status ValidateBudgetMap(const BudgetMap& map);

// The native JSON text of a valid map: schema version 1 for a per-layer map, 2 for a per-head
// map.
[[nodiscard]] StatusOr<std::string> BudgetMapToJson(const BudgetMap& map);
// Parses and validates a native map. Errors: InvalidArgument (syntax with byte offset; missing,
// mistyped or unknown field, "head_tokens" in a version 1 document or missing from a layer of a
// version 2 one, or a failed ValidateBudgetMap() check, naming the JSON path), FailedPrecondition
// (a schema_version other than 1 and 2).
[[nodiscard]] StatusOr<BudgetMap> BudgetMapFromJson(std::string_view json_text);

// The per-layer compression ratios for kvpress at context length `context_len` (Lc, tokens):
// ratio_l = 1 - tokens_l / Lc, nudged by at most a few ulps so that kvpress's own computation of
// the tokens kept, int(Lc * (1 - ratio_l)) in double precision, gives back exactly tokens_l. Each
// ratio is in [0, 1). Errors (InvalidArgument): context_len <= 0; a layer budget above context_len
// (naming the layer).
[[nodiscard]] StatusOr<std::vector<double>> KvpressCompressionRatios(const BudgetMap& map,
                                                                     int64_t context_len);
// The same for each KV head of a per-head map ([L][H], from head_tokens): ratio_lh = 1 - b_lh / Lc,
// nudged the same way so that int(Lc * (1 - ratio_lh)) == b_lh. Errors (InvalidArgument): those
// above (a head budget above context_len names layer and head); a per-layer map (no head
// budgets).
[[nodiscard]] StatusOr<std::vector<std::vector<double>>> KvpressHeadCompressionRatios(
    const BudgetMap& map, int64_t context_len);

// The map in `format` as JSON text. `context_len` is required for kKvpress (InvalidArgument when
// missing) and ignored otherwise. kKvpress of a per-head map has both "compression_ratios" (of
// tokens[l], the per-layer map of the same memory) and "head_compression_ratios". kTrtllm of a
// per-head map is InvalidArgument (TensorRT-LLM takes one attention window per layer; compute a
// per-layer map instead).
[[nodiscard]] StatusOr<std::string> FormatBudgetMap(const BudgetMap& map, BudgetFormat format,
                                                    std::optional<int64_t> context_len);

// Reads a native map from `path` (at most kMaxBudgetMapFileBytes); errors as BudgetMapFromJson()
// with the path prefixed.
[[nodiscard]] StatusOr<BudgetMap> ReadBudgetMapFile(const std::string& path);
// Validates and writes `map` in `format` to `path` atomically (WriteFileAtomically()).
[[nodiscard]] Status WriteBudgetMapFile(const std::string& path, const BudgetMap& map,
                                        BudgetFormat format = BudgetFormat::kNative,
                                        std::optional<int64_t> context_len = std::nullopt);

}  // namespace ripplekv::method
