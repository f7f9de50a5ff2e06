#pragma once
// Budget maps on disk and in the formats serving stacks take (docs/BUDGETS.md has examples):
//  - native: our JSON document (schema_version, model hash, parameters, per layer {layer, tokens,
//    multiplier, normalized}); read back strictly, so a stored map can be rolled out as is;
//  - kvpress: {"compression_ratios": [...]} for kvpress's PerLayerCompressionPress, for one context
//    length Lc: ratio_l = 1 - tokens_l / Lc, the fraction of the layer's prefill tokens pruned;
//  - trtllm: {"max_attention_window": [...]} for TensorRT-LLM's KvCacheConfig.max_attention_window,
//    the per-layer number of most recent tokens kept.
// Thread-safe (pure functions).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "method/budget_map.h"

namespace ripplekv::method {

// The only native budget-map schema version this code reads and writes.
inline constexpr int kBudgetMapSchemaVersion = 1;
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
// [1, ratio], normalized in [0, 1], options valid. InvalidArgument naming the JSON path
// ("layers[2].tokens") of the first problem.
[[nodiscard]] Status ValidateBudgetMap(const BudgetMap& map);

// The native JSON text of a valid map.
[[nodiscard]] StatusOr<std::string> BudgetMapToJson(const BudgetMap& map);
// Parses and validates a native map. Errors: InvalidArgument (syntax with byte offset; missing,
// mistyped or unknown field, or a failed ValidateBudgetMap() check, naming the JSON path),
// FailedPrecondition (a schema_version this code does not read).
[[nodiscard]] StatusOr<BudgetMap> BudgetMapFromJson(std::string_view json_text);

// The per-layer compression ratios for kvpress at context length `context_len` (Lc, tokens):
// ratio_l = 1 - tokens_l / Lc, nudged by at most a few ulps so that kvpress's own computation of
// the tokens kept, int(Lc * (1 - ratio_l)) in double precision, gives back exactly tokens_l. Each
// ratio is in [0, 1). Errors (InvalidArgument): context_len <= 0; a layer budget above context_len
// (naming the layer).
[[nodiscard]] StatusOr<std::vector<double>> KvpressCompressionRatios(const BudgetMap& map,
                                                                     int64_t context_len);

// The map in `format` as JSON text. `context_len` is required for kKvpress (InvalidArgument when
// missing) and ignored otherwise.
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
