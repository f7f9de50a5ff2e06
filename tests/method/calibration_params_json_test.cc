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
