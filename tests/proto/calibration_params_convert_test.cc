// proto/calibration_params.h: the calibration parameters as the CalibrationParams message and
// back, the one conversion of the scheduler's adapters, a worker's assignment, a profile and the
// CLI's submit.

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

// The rules are the validator's, checked by each edge: the conversion carries any value.
TEST(CalibrationParamsConvertTest, CarriesValuesTheMethodRefuses) {
  CalibrationParams message;
  message.set_alpha(0);
  message.set_trials(0);
  message.add_layers(-1);
  StatusOr<method::CalibrationParams> p = CalibrationParamsFromProto(message, "params");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->alpha, 0);
  EXPECT_EQ(p->trials, 0);
  EXPECT_EQ(p->layers, (std::vector<int64_t>{-1}));
  EXPECT_FALSE(method::ValidateCalibrationParams(*p, 0).ok());
}

}  // namespace
}  // namespace ripplekv::v1
