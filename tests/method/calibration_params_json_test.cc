// The one JSON form of the calibration parameters (method/calibration_params_json.h): what a
// profile, a stored job and a worker's mirrored task carry. Documents written before the optional
// members existed read with the defaults, and values that use none of them write exactly as then.

#include "method/calibration_params_json.h"

#include <string>

#include "gtest/gtest.h"

namespace ripplekv::method {
namespace {

using Json = nlohmann::json;

CalibrationParams Full() {
  return {.mode = PerturbMode::kPrefill,
          .alpha = 0.1,
          .trials = 7,
          .seed = 18446744073709551615u,
          .samples = 16,
          .context_len = 256,
          .probe_len = 16,
          .layers = {0, 5, 29},
          .data_seed = 11,
          .until_stable = true,
          .max_samples = 48};
}

StatusOr<CalibrationParams> Read(const std::string& text) {
  return CalibrationParamsFromJson(Json::parse(text), "doc", "params");
}

TEST(CalibrationParamsJsonTest, RoundTripsEveryMemberExactly) {
  const CalibrationParams p = Full();
  StatusOr<CalibrationParams> back = Read(CalibrationParamsToJson(p).dump());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, p);
}

// The members in their documented order, the optional ones left out at their defaults: the bytes
// every profile and stored job has carried.
TEST(CalibrationParamsJsonTest, ValuesWithoutTheOptionalMembersWriteAsBefore) {
  CalibrationParams p = Full();
  p.data_seed = 0;
  p.until_stable = false;
  p.max_samples = CalibrationParams().max_samples;
  EXPECT_EQ(CalibrationParamsToJson(p).dump(),
            R"({"mode":"prefill","alpha":0.1,"trials":7,"seed":18446744073709551615,)"
            R"("samples":16,"context_len":256,"probe_len":16,"layers":[0,5,29]})");
  p.max_samples = 40;  // written once it differs, with or without until_stable
  EXPECT_EQ(CalibrationParamsToJson(p)["max_samples"], 40);
}

TEST(CalibrationParamsJsonTest, DocumentsWithoutTheOptionalMembersReadWithDefaults) {
  StatusOr<CalibrationParams> p =
      Read(R"({"alpha":0.5,"context_len":512,"layers":[],"mode":"cache","probe_len":32,)"
           R"("samples":8,"seed":0,"trials":2})");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(*p, CalibrationParams());
}

TEST(CalibrationParamsJsonTest, MistypedMissingAndUnknownMembersNameTheirPath) {
  const std::string good = CalibrationParamsToJson(Full()).dump();
  auto refusal = [&](void (*edit)(Json&)) {
    Json j = Json::parse(good);
    edit(j);
    StatusOr<CalibrationParams> p = CalibrationParamsFromJson(j, "doc", "params");
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(p.status().message());
  };
  EXPECT_EQ(refusal([](Json& j) { j.erase("alpha"); }), "doc: params.alpha: missing");
  EXPECT_EQ(refusal([](Json& j) { j["trials"] = 2.5; }),
            "doc: params.trials: expected an integer, got number");
  EXPECT_EQ(refusal([](Json& j) { j["seed"] = -1; }), "doc: params.seed: integer -1 is negative");
  EXPECT_EQ(refusal([](Json& j) { j["mode"] = "decode"; }),
            "doc: params.mode: unknown mode \"decode\" (cache|prefill)");
  EXPECT_EQ(refusal([](Json& j) { j["layers"] = Json::parse("[0, -1.5]"); }),
            "doc: params.layers[1]: expected an integer, got number");
  EXPECT_EQ(refusal([](Json& j) { j["until_stable"] = "yes"; }),
            "doc: params.until_stable: expected a boolean, got string");
  EXPECT_EQ(refusal([](Json& j) { j["extra"] = 1; }), "doc: params.extra: unknown field");
  StatusOr<CalibrationParams> other =
      CalibrationParamsFromJson(Json::parse(R"({"x": 1})"), "doc", "params", {"x"});
  EXPECT_EQ(other.status().message(), "doc: params.mode: missing");  // "x" is the caller's
}

CalibrationParams Response() {
  return ResolveResponseGrid({.objective = Objective::kResponse,
                              .samples = 4,
                              .context_len = 300,
                              .probe_len = 16,
                              .layers = {2},
                              .selector = ResponseSelector::kH2o,
                              .budgets = {16, 64}});
}

TEST(CalibrationParamsJsonTest, ResponseMembersComeFirstAndRoundTrip) {
  const CalibrationParams p = Response();
  const nlohmann::ordered_json j = CalibrationParamsToJson(p);
  EXPECT_EQ(j.dump(),
            R"({"objective":"response","selector":"h2o","budgets":[16,64,300],"mode":"cache",)"
            R"("alpha":0.5,"trials":3,"seed":0,"samples":4,"context_len":300,"probe_len":16,)"
            R"("layers":[2]})");
  StatusOr<CalibrationParams> back = Read(j.dump());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, p);
  for (ResponseSelector selector : {ResponseSelector::kSnapKv, ResponseSelector::kStreaming}) {
    CalibrationParams other = p;
    other.selector = selector;
    EXPECT_EQ(*Read(CalibrationParamsToJson(other).dump()), other);
  }
}

// A per-head response writes kv_heads after the grid; a per-layer one (above) writes none.
TEST(CalibrationParamsJsonTest, PerHeadResponseWritesItsKvHeadsAndRoundTrips) {
  CalibrationParams p = Response();
  p.kv_heads = 3;
  p = ResolveResponseGrid(p);
  const nlohmann::ordered_json j = CalibrationParamsToJson(p);
  EXPECT_EQ(j.dump(),
            R"({"objective":"response","selector":"h2o","budgets":[16,64,300],"kv_heads":3,)"
            R"("mode":"cache","alpha":0.5,"trials":9,"seed":0,"samples":4,"context_len":300,)"
            R"("probe_len":16,"layers":[2]})");
  StatusOr<CalibrationParams> back = Read(j.dump());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, p);
}

// A noise value writes none of the response members, whatever its selector: the bytes are those
// of every profile and stored job written before the objective existed.
TEST(CalibrationParamsJsonTest, NoiseValuesWriteNoResponseMembers) {
  CalibrationParams p = Full();
  const std::string before = CalibrationParamsToJson(p).dump();
  EXPECT_EQ(before.find("objective"), std::string::npos);
  EXPECT_EQ(before.find("selector"), std::string::npos);
  EXPECT_EQ(before.find("budgets"), std::string::npos);
  p.selector = ResponseSelector::kStreaming;  // not read by a noise calibration, not written
  EXPECT_EQ(CalibrationParamsToJson(p).dump(), before);
  // An explicit "noise" reads as the default.
  Json j = Json::parse(before);
  j["objective"] = "noise";
  StatusOr<CalibrationParams> back = CalibrationParamsFromJson(j, "doc", "params");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, Full());
}

TEST(CalibrationParamsJsonTest, UnknownObjectiveOrSelectorAndMistypedBudgetsNameTheirPath) {
  const std::string good = CalibrationParamsToJson(Response()).dump();
  auto refusal = [&](void (*edit)(Json&)) {
    Json j = Json::parse(good);
    edit(j);
    StatusOr<CalibrationParams> p = CalibrationParamsFromJson(j, "doc", "params");
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(p.status().message());
  };
  EXPECT_EQ(refusal([](Json& j) { j["objective"] = "compression"; }),
            "doc: params.objective: unknown objective \"compression\" (noise|response)");
  EXPECT_EQ(refusal([](Json& j) { j["objective"] = 1; }),
            "doc: params.objective: expected a string, got number");
  EXPECT_EQ(refusal([](Json& j) { j["selector"] = "SnapKV"; }),
            "doc: params.selector: unknown selector \"SnapKV\" (snapkv|h2o|streaming)");
  EXPECT_EQ(refusal([](Json& j) { j["budgets"] = 64; }),
            "doc: params.budgets: expected an array, got number");
  EXPECT_EQ(refusal([](Json& j) { j["budgets"][1] = 6.5; }),
            "doc: params.budgets[1]: expected an integer, got number");
}

// Reading checks types only: the rules are ValidateCalibrationParams', checked where a value is
// accepted, so a stored value reads back as it was accepted.
TEST(CalibrationParamsJsonTest, ReadingLeavesTheRulesToTheValidator) {
  CalibrationParams p = Full();
  p.alpha = 0;
  StatusOr<CalibrationParams> back = Read(CalibrationParamsToJson(p).dump());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->alpha, 0);
}

}  // namespace
}  // namespace ripplekv::method
