// proto/calibration_params.h: the calibration parameters as the CalibrationParams message and
// back, the one conversion of the scheduler's adapters, a worker's assignment, a profile and the
// CLI's submit.

#include <cstdint>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "proto/calibration_params.h"

namespace ripplekv::v1 {
namespace {

TEST(CalibrationParamsConvertTest, RoundTripsEveryField) {
  const method::CalibrationParams p{.mode = method::PerturbMode::kPrefill,
                                    .alpha = static_cast<double>(0.1f),  // the message's float
                                    .trials = 3,
                                    .seed = std::numeric_limits<uint64_t>::max(),
                                    .samples = 4,
                                    .context_len = 256,
                                    .probe_len = 16,
                                    .layers = {5, 0, 29},  // in the given order
                                    .data_seed = 9,
                                    .until_stable = true,
                                    .max_samples = 12};
  CalibrationParams message;
  CalibrationParamsToProto(p, &message);
  EXPECT_EQ(message.mode(), PERTURB_MODE_PREFILL);
  EXPECT_EQ(message.alpha(), 0.1f);
  StatusOr<method::CalibrationParams> back = CalibrationParamsFromProto(message, "params");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, p);
}

TEST(CalibrationParamsConvertTest, UnsetFieldsTakeTheDefaultsAndMaxSamplesOnlyWithRounds) {
  StatusOr<method::CalibrationParams> empty =
      CalibrationParamsFromProto(CalibrationParams(), "spec.params");
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(*empty, method::CalibrationParams());

  CalibrationParams message;
  CalibrationParamsToProto(method::CalibrationParams(), &message);
  EXPECT_FALSE(message.has_max_samples());  // written with until_stable only

  message.set_max_samples(16);
  EXPECT_EQ(CalibrationParamsFromProto(message, "spec.params").status().message(),
            "spec.params.max_samples: only with spec.params.until_stable");
  message.clear_max_samples();
  message.set_mode(static_cast<PerturbMode>(7));
  EXPECT_EQ(CalibrationParamsFromProto(message, "spec.params").status().message(),
            "spec.params.mode: unknown value 7");
}

TEST(CalibrationParamsConvertTest, RoundTripsAResponseCalibration) {
  for (method::ResponseSelector selector :
       {method::ResponseSelector::kSnapKv, method::ResponseSelector::kH2o,
        method::ResponseSelector::kStreaming}) {
    const method::CalibrationParams p =
        method::ResolveResponseGrid({.objective = method::Objective::kResponse,
                                     .samples = 4,
                                     .context_len = 256,
                                     .layers = {3},
                                     .selector = selector,
                                     .budgets = {64, 32}});
    CalibrationParams message;
    CalibrationParamsToProto(p, &message);
    EXPECT_EQ(message.objective(), OBJECTIVE_RESPONSE);
    EXPECT_EQ(message.selector(), ResponseSelectorToProto(selector));
    EXPECT_EQ(std::vector<int32_t>(message.budgets().begin(), message.budgets().end()),
              (std::vector<int32_t>{32, 64, 256}));
    EXPECT_EQ(message.trials(), 3);
    StatusOr<method::CalibrationParams> back = CalibrationParamsFromProto(message, "params");
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, p);
  }
  EXPECT_EQ(ResponseSelectorToProto(method::ResponseSelector::kSnapKv), RESPONSE_SELECTOR_SNAPKV);
  EXPECT_EQ(ResponseSelectorToProto(method::ResponseSelector::kH2o), RESPONSE_SELECTOR_H2O);
  EXPECT_EQ(ResponseSelectorToProto(method::ResponseSelector::kStreaming),
            RESPONSE_SELECTOR_STREAMING);
}

// A noise calibration states its objective and no selector; UNSPECIFIED reads as the defaults.
TEST(CalibrationParamsConvertTest, NoiseHasNoSelectorAndUnspecifiedEnumsAreTheDefaults) {
  CalibrationParams message;
  CalibrationParamsToProto(method::CalibrationParams(), &message);
  EXPECT_EQ(message.objective(), OBJECTIVE_NOISE);
  EXPECT_EQ(message.selector(), RESPONSE_SELECTOR_UNSPECIFIED);
  EXPECT_EQ(message.budgets_size(), 0);

  CalibrationParams request;
  request.set_objective(OBJECTIVE_RESPONSE);
  StatusOr<method::CalibrationParams> p = CalibrationParamsFromProto(request, "spec.params");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->objective, method::Objective::kResponse);
  EXPECT_EQ(p->selector, method::ResponseSelector::kSnapKv);
  EXPECT_TRUE(p->budgets.empty());  // resolved by the edge (method::ResolveResponseGrid)

  request.set_objective(OBJECTIVE_NOISE);
  request.set_selector(RESPONSE_SELECTOR_H2O);
  EXPECT_EQ(CalibrationParamsFromProto(request, "spec.params").status().message(),
            "spec.params.selector: only with spec.params.objective OBJECTIVE_RESPONSE");
  request.set_objective(static_cast<Objective>(5));
  EXPECT_EQ(CalibrationParamsFromProto(request, "spec.params").status().message(),
            "spec.params.objective: unknown value 5");
  request.set_objective(OBJECTIVE_RESPONSE);
  request.set_selector(static_cast<ResponseSelector>(9));
  EXPECT_EQ(CalibrationParamsFromProto(request, "spec.params").status().message(),
            "spec.params.selector: unknown value 9");
}

// The rules are the validator's, checked by each edge: the conversion carries any value.
TEST(CalibrationParamsConvertTest, CarriesValuesTheMethodRefuses) {
  CalibrationParams message;
  message.set_alpha(0);
  message.set_trials(0);
  message.add_layers(-1);
  message.add_budgets(512);  // budgets with objective noise
  message.add_budgets(16);
  StatusOr<method::CalibrationParams> p = CalibrationParamsFromProto(message, "params");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->alpha, 0);
  EXPECT_EQ(p->trials, 0);
  EXPECT_EQ(p->layers, (std::vector<int64_t>{-1}));
  EXPECT_EQ(p->budgets, (std::vector<int64_t>{512, 16}));
  EXPECT_FALSE(method::ValidateCalibrationParams(*p, 0).ok());
}

}  // namespace
}  // namespace ripplekv::v1
