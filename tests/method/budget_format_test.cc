// method/budget_format.h for per-head maps: native schema version 2 (and version 1 unchanged for
// per-layer maps), the per-head invariants of ValidateBudgetMap(), kvpress's head compression
// ratios and trtllm's refusal. The per-layer formats are tested in budget_map_test.cc.

#include "method/budget_format.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "method/budget_map.h"
#include "nlohmann/json.hpp"
#include "tests/common/per_head_map.h"

namespace ripplekv::method {
namespace {

using ::testing::HasSubstr;

// Three layers of two KV heads, T = 300 (average 100): the head budgets sum to 2 x 300 = 600 and
// each layer's budget is the mean of its heads, rounded (46.5 -> 46, 181.5 -> 182, 72).
BudgetMap PerHeadMap() { return testing::PerHeadExampleMap("ab12"); }

// The same memory as a per-layer map.
BudgetMap PerLayerMap() {
  BudgetMap map = PerHeadMap();
  map.options.per_head = false;
  map.head_tokens.clear();
  return map;
}

// kvpress keeps int(Lc * (1 - ratio)) tokens (ScorerPress.compress; Python floats are doubles).
int64_t KvpressKept(int64_t context_len, double ratio) {
  return static_cast<int64_t>(static_cast<double>(context_len) * (1.0 - ratio));
}

// A version 1 document as this code wrote it before version 2 existed.
constexpr char kVersionOneDocument[] = R"({
  "schema_version": 1,
  "model_hash": "ab12cd",
  "params": {
    "normalization": "minmax",
    "ratio": 3.0,
    "average_tokens": 16,
    "total_tokens": null,
    "min_tokens": 1,
    "max_tokens": null,
    "log_epsilon": 1e-12,
    "max_context": null
  },
  "total_tokens": 32,
  "layers": [
    {
      "layer": 0,
      "tokens": 9,
      "multiplier": 1.0,
      "normalized": 0.0
    },
    {
      "layer": 1,
      "tokens": 23,
      "multiplier": 3.0,
      "normalized": 1.0
    }
  ]
}
)";

TEST(BudgetFormatPerHeadTest, APerLayerMapIsStillVersionOneByteForByte) {
  StatusOr<BudgetMap> map = BudgetMapFromJson(kVersionOneDocument);
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_FALSE(map->options.per_head);
  EXPECT_TRUE(map->head_tokens.empty());
  StatusOr<std::string> text = BudgetMapToJson(*map);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, kVersionOneDocument);

  StatusOr<std::string> per_layer = BudgetMapToJson(PerLayerMap());
  ASSERT_TRUE(per_layer.ok()) << per_layer.status();
  EXPECT_THAT(*per_layer, HasSubstr("\"schema_version\": 1,"));
  EXPECT_THAT(*per_layer, ::testing::Not(HasSubstr("head_tokens")));
}

TEST(BudgetFormatPerHeadTest, APerHeadMapIsVersionTwoWithHeadTokensAfterTokens) {
  const BudgetMap map = PerHeadMap();
  StatusOr<std::string> text = BudgetMapToJson(map);
  ASSERT_TRUE(text.ok()) << text.status();
  const nlohmann::ordered_json j = nlohmann::ordered_json::parse(*text);
  EXPECT_EQ(j["schema_version"], kBudgetMapPerHeadSchemaVersion);
  EXPECT_EQ(j["schema_version"], 2);
  std::vector<std::string> keys;
  for (const auto& [key, value] : j["layers"][1].items()) keys.push_back(key);
  EXPECT_EQ(keys, (std::vector<std::string>{"layer", "tokens", "head_tokens", "multiplier",
                                            "normalized"}));
  EXPECT_EQ(j["layers"][1]["head_tokens"], nlohmann::json::parse("[150, 213]"));
  // The parameters are version 1's: per_head is said by the version alone.
  EXPECT_FALSE(j["params"].contains("per_head"));

  StatusOr<BudgetMap> back = BudgetMapFromJson(*text);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->options.per_head);
  EXPECT_EQ(back->head_tokens, map.head_tokens);
  EXPECT_EQ(back->tokens, map.tokens);
  EXPECT_EQ(back->multipliers, map.multipliers);
  EXPECT_EQ(*BudgetMapToJson(*back), *text);
}

TEST(BudgetFormatPerHeadTest, ReadingChecksHeadTokensAgainstTheVersion) {
  const std::string v2 = *BudgetMapToJson(PerHeadMap());
  const std::string v1 = *BudgetMapToJson(PerLayerMap());
  auto error = [](const std::string& text, const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json j = nlohmann::json::parse(text);
    edit(j);
    StatusOr<BudgetMap> map = BudgetMapFromJson(j.dump());
    EXPECT_EQ(map.status().code(), absl::StatusCode::kInvalidArgument) << map.status();
    return std::string(map.status().message());
  };
  EXPECT_THAT(error(v1, [](nlohmann::json& j) { j["layers"][0]["head_tokens"] = {46}; }),
              HasSubstr("layers[0].head_tokens: only in a per-head map (schema_version 2), this "
                        "is version 1"));
  EXPECT_THAT(error(v2, [](nlohmann::json& j) { j["layers"][2].erase("head_tokens"); }),
              HasSubstr("layers[2].head_tokens: missing"));
  EXPECT_THAT(error(v2, [](nlohmann::json& j) { j["layers"][1]["head_tokens"] = {182}; }),
              HasSubstr("layers[1].head_tokens: has 1 heads, layer 0 has 2"));
  EXPECT_THAT(error(v2,
                    [](nlohmann::json& j) {
                      for (auto& layer : j["layers"])
                        layer["head_tokens"] = nlohmann::json::array();
                    }),
              HasSubstr("layers[0].head_tokens: must not be empty"));
  EXPECT_THAT(error(v2, [](nlohmann::json& j) { j["layers"][1]["head_tokens"][1] = "213"; }),
              HasSubstr("layers[1].head_tokens[1]: expected an integer, got string"));
  EXPECT_THAT(error(v2, [](nlohmann::json& j) { j["layers"][1]["head_tokens"] = 182; }),
              HasSubstr("layers[1].head_tokens"));
  // Version 1 written as version 2 lacks every layer's head budgets.
  EXPECT_THAT(error(v1, [](nlohmann::json& j) { j["schema_version"] = 2; }),
              HasSubstr("layers[0].head_tokens: missing"));

  StatusOr<BudgetMap> v3 = BudgetMapFromJson(R"({"schema_version": 3})");
  EXPECT_EQ(v3.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(v3.status().message(), HasSubstr("reads versions 1 and 2"));
}

TEST(BudgetFormatPerHeadTest, ValidationNamesTheHeadAndTheNumbers) {
  ASSERT_TRUE(ValidateBudgetMap(PerHeadMap()).ok()) << ValidateBudgetMap(PerHeadMap());
  auto error = [](const std::function<void(BudgetMap&)>& edit) {
    BudgetMap map = PerHeadMap();
    edit(map);
    Status status = ValidateBudgetMap(map);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    return std::string(status.message());
  };
  // Each head within the layer bounds.
  EXPECT_THAT(error([](BudgetMap& m) { m.options.max_tokens = 200; }),
              HasSubstr("layers[1].head_tokens[1]: 213 is outside [min_tokens 1, max_tokens 200]"));
  EXPECT_THAT(error([](BudgetMap& m) { m.options.max_context = 212; }),
              HasSubstr("layers[1].head_tokens[1]: 213 is outside [min_tokens 1, unbounded] or "
                        "above max_context 212"));
  EXPECT_THAT(error([](BudgetMap& m) { m.options.min_tokens = 45; }),
              HasSubstr("layers[0].head_tokens[0]: 40 is outside [min_tokens 45"));
  // All heads sum to H x T (moving a token between layers keeps every layer's rounding).
  EXPECT_THAT(error([](BudgetMap& m) {
                m.head_tokens[2] = {70, 75};
              }),
              HasSubstr("head budgets sum to 601, not 2 heads x total_tokens 300 = 600"));
  // tokens[l] is the floor or ceiling of its heads' mean.
  EXPECT_THAT(error([](BudgetMap& m) {
                m.tokens = {45, 183, 72};
              }),
              HasSubstr("layers[0].tokens: 45 is not the mean of its 2 head budgets (sum 93) "
                        "rounded: expected 46 or 47"));
  EXPECT_THAT(error([](BudgetMap& m) {
                m.tokens = {47, 182, 71};
              }),
              HasSubstr("layers[2].tokens: 71 is not the mean of its 2 head budgets (sum 144) "
                        "rounded: expected 72"));
  // Same H everywhere, one row per layer, and options.per_head saying so.
  EXPECT_THAT(error([](BudgetMap& m) {
                m.head_tokens[1] = {150, 213, 1};
              }),
              HasSubstr("layers[1].head_tokens: has 3 heads, layer 0 has 2"));
  EXPECT_THAT(error([](BudgetMap& m) { m.head_tokens.pop_back(); }),
              HasSubstr("3 budgets, 2 layers of head_tokens"));
  EXPECT_THAT(error([](BudgetMap& m) { m.options.per_head = false; }),
              HasSubstr("do not say per_head"));
  EXPECT_THAT(error([](BudgetMap& m) { m.head_tokens.clear(); }),
              HasSubstr("the parameters say per_head but no layer has head_tokens"));
  // The other rounding of layer 0 (47 for 46.5, 181 for 181.5) is as valid.
  BudgetMap other = PerHeadMap();
  other.tokens = {47, 181, 72};
  other.multipliers = {1.0, 181.0 / 47.0, 72.0 / 47.0};
  EXPECT_TRUE(ValidateBudgetMap(other).ok()) << ValidateBudgetMap(other);
}

TEST(BudgetFormatPerHeadTest, OneHeadMayHoldMoreThanTheTotal) {
  // One layer of two heads, T = 100: the heads are 150 and 50, the layer 100.
  BudgetMap map;
  map.options.total_tokens = 100;
  map.options.per_head = true;
  map.options.ratio = 1.0;
  map.total_tokens = 100;
  map.tokens = {100};
  map.head_tokens = {{150, 50}};
  map.multipliers = {1.0};
  map.normalized = {0.0};
  EXPECT_TRUE(ValidateBudgetMap(map).ok()) << ValidateBudgetMap(map);
  map.head_tokens = {{-50, 250}};
  EXPECT_THAT(std::string(ValidateBudgetMap(map).message()),
              HasSubstr("layers[0].head_tokens[0]: -50 is outside [min_tokens 1"));
  // Absurd budgets whose sum would wrap are refused before summing.
  const int64_t huge = int64_t{1} << 62;
  map.head_tokens = {{huge + 100, 100 - huge}};
  EXPECT_THAT(std::string(ValidateBudgetMap(map).message()),
              HasSubstr("layers[0].head_tokens[0]: 4611686018427388004 is above 2 heads x "
                        "total_tokens 200"));
}

TEST(BudgetFormatPerHeadTest, KvpressGetsLayerAndHeadRatiosThatGiveBackTheBudgets) {
  const BudgetMap map = PerHeadMap();
  StatusOr<std::string> text = FormatBudgetMap(map, BudgetFormat::kKvpress, 400);
  ASSERT_TRUE(text.ok()) << text.status();
  const nlohmann::ordered_json j = nlohmann::ordered_json::parse(*text);
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j.begin().key(), "compression_ratios");
  // The per-layer ratios are exactly those of the per-layer map of the same memory.
  const nlohmann::json per_layer =
      nlohmann::json::parse(*FormatBudgetMap(PerLayerMap(), BudgetFormat::kKvpress, 400));
  EXPECT_EQ(j["compression_ratios"], per_layer["compression_ratios"]);
  const auto heads = j["head_compression_ratios"].get<std::vector<std::vector<double>>>();
  ASSERT_EQ(heads.size(), 3u);
  for (size_t l = 0; l < 3; ++l) {
    ASSERT_EQ(heads[l].size(), 2u);
    for (size_t h = 0; h < 2; ++h) {
      EXPECT_EQ(KvpressKept(400, heads[l][h]), map.head_tokens[l][h]) << l << "," << h;
      EXPECT_NEAR(heads[l][h], 1.0 - map.head_tokens[l][h] / 400.0, 1e-12);
    }
  }
  // A per-layer map's kvpress document is unchanged: the layer ratios alone.
  EXPECT_EQ(per_layer.size(), 1u);
  EXPECT_EQ(KvpressHeadCompressionRatios(PerLayerMap(), 400).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(BudgetFormatPerHeadTest, KvpressHeadRatiosGiveBackEveryBudgetAtManyContextLengths) {
  for (int64_t context_len = 2; context_len <= 300; ++context_len) {
    for (int64_t b = 1; b < context_len; ++b) {
      // One layer of two heads, b and the other at most Lc making the sum even (H x T).
      const int64_t other = (b + context_len) % 2 == 0 ? context_len : context_len - 1;
      const int64_t layer = (b + other) / 2;
      BudgetMap map;
      map.options.total_tokens = layer;
      map.options.per_head = true;
      map.options.ratio = 1.0;
      map.total_tokens = layer;
      map.tokens = {layer};
      map.head_tokens = {{b, other}};
      map.multipliers = {1.0};
      map.normalized = {0.0};
      StatusOr<std::vector<std::vector<double>>> ratios =
          KvpressHeadCompressionRatios(map, context_len);
      ASSERT_TRUE(ratios.ok()) << ratios.status();
      for (size_t h = 0; h < 2; ++h) {
        ASSERT_EQ(KvpressKept(context_len, (*ratios)[0][h]), map.head_tokens[0][h])
            << "b=" << map.head_tokens[0][h] << " Lc=" << context_len;
        ASSERT_GE((*ratios)[0][h], 0.0);
        ASSERT_LT((*ratios)[0][h], 1.0);
      }
    }
  }
}

TEST(BudgetFormatPerHeadTest, KvpressNeedsAContextLengthThatHoldsEveryHead) {
  // Every layer budget fits 200 tokens, but head 1 of layer 1 keeps 213.
  StatusOr<std::string> text = FormatBudgetMap(PerHeadMap(), BudgetFormat::kKvpress, 200);
  EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(text.status().message(),
              HasSubstr("layer 1 head 1 keeps 213 tokens, more than the context length 200"));
}

TEST(BudgetFormatPerHeadTest, TrtllmRefusesAPerHeadMapAndNamesTheWayOut) {
  StatusOr<std::string> text = FormatBudgetMap(PerHeadMap(), BudgetFormat::kTrtllm, std::nullopt);
  EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(text.status().message(), HasSubstr("one window per layer"));
  EXPECT_THAT(text.status().message(), HasSubstr("without --per-head"));
  EXPECT_TRUE(FormatBudgetMap(PerLayerMap(), BudgetFormat::kTrtllm, std::nullopt).ok());
}

}  // namespace
}  // namespace ripplekv::method
