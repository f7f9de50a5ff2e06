// proto/profile.h: the sensitivity profile as the Profile message and back, the conversion the
// scheduler (writing) and the CLI (reading) share.

#include <string>

#include "gtest/gtest.h"
#include "method/profile.h"
#include "proto/profile.h"
#include "ripplekv/v1/calibration.pb.h"

namespace ripplekv::v1 {
namespace {

// 2025-01-31T12:00:00Z as Unix seconds.
constexpr int64_t kCreatedSeconds = 1738324800;

method::SensitivityProfile SampleProfile() {
  method::SensitivityProfile p;
  p.model = {.hash = "ab12",
             .architecture = "llama",
             .name = "tiny",
             .n_layers = 4,
             .n_kv_heads = 2,
             .head_dim = 8,
             .d_model = 32,
             .vocab_size = 100};
  p.params.mode = method::PerturbMode::kPrefill;
  p.params.alpha = 0.5;  // exact as a float (the message's type)
  p.params.trials = 1;
  p.params.seed = 7;
  p.params.samples = 2;
  p.params.context_len = 16;
  p.params.probe_len = 4;
  p.params.layers = {1, 3};
  p.params.data_source = "builtin:prose";
  p.params.data_domain = "prose";
  p.layers = {
      {.layer = 1, .mean_kl = 0.25, .std_error = 0.05, .count = 2, .per_sample_mean = {0.2, 0.3}},
      {.layer = 3, .mean_kl = 0.75, .std_error = 0.25, .count = 2, .per_sample_mean = {0.5, 1.0}}};
  method::ProfileStability st{
      .seed = 9, .resamples = 100, .level = 0.9, .ratio = 4.0, .tolerance = 0.25};
  st.layers = {{.layer = 1,
                .kl_low = 0.2,
                .kl_high = 0.3,
                .share = 0.5,
                .share_low = 0.4,
                .share_high = 0.6},
               {.layer = 3,
                .kl_low = 0.5,
                .kl_high = 1.0,
                .share = 1.5,
                .share_low = 1.4,
                .share_high = 1.6}};
  st.rank_correlation_median = 1.0;
  st.rank_correlation_low = 1.0;
  st.top_layer = 3;
  st.top_layer_frequency = 1.0;
  st.max_share_deviation = 0.2;
  st.stable = true;
  p.stability = st;
  p.created_at = "2025-01-31T12:00:00Z";
  p.tool_version = "ripplekv 0.1.0";
  method::ProfileVerification v{
      .fraction = 0.5, .tasks_verified = 2, .tasks_unverified = 1, .tasks_recomputed = 1};
  v.disagreements = {
      {.sample = 1, .layer = 3, .outvoted_worker = "w3", .agreeing_workers = {"w1", "w2"}}};
  p.verification = v;
  return p;
}

// The message as the scheduler sends it: the store's key and time set beside the profile.
Profile AsSent(const method::SensitivityProfile& profile, bool with_layers) {
  Profile message;
  message.set_model_hash(profile.model.hash);
  message.set_version(3);
  message.mutable_create_time()->set_seconds(kCreatedSeconds);
  ProfileToProto(profile, with_layers, &message);
  return message;
}

TEST(ProfileConvertTest, AProfileRoundTripsThroughTheMessageUnchanged) {
  const method::SensitivityProfile profile = SampleProfile();
  const Profile message = AsSent(profile, /*with_layers=*/true);
  EXPECT_EQ(message.params().mode(), PERTURB_MODE_PREFILL);
  EXPECT_EQ(message.model().model_hash(), "ab12");
  EXPECT_EQ(message.layers_size(), 2);
  const auto want = method::ProfileToJson(profile);
  ASSERT_TRUE(want.ok()) << want.status();
  const auto got = method::ProfileToJson(ProfileFromProto(message));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, *want);
}

TEST(ProfileConvertTest, AResponseProfileRoundTripsWithItsPoints) {
  method::SensitivityProfile profile = SampleProfile();
  profile.params.objective = method::Objective::kResponse;
  profile.params.selector = method::ResponseSelector::kStreaming;
  profile.params.mode = method::PerturbMode::kCache;
  profile.params.budgets = {4, 8, 16};
  profile.params.trials = 3;
  for (method::LayerSensitivity& l : profile.layers) {
    l.count = 6;
    l.response = {{.budget = 4, .mean_kl = 0.5 * static_cast<double>(l.layer), .std_error = 0.1},
                  {.budget = 8, .mean_kl = 1.0 / 3.0, .std_error = 5e-324},
                  {.budget = 16, .mean_kl = 0.0, .std_error = 0.0}};
  }
  ASSERT_TRUE(method::ValidateProfile(profile).ok()) << method::ValidateProfile(profile);
  const Profile message = AsSent(profile, /*with_layers=*/true);
  EXPECT_EQ(message.params().objective(), OBJECTIVE_RESPONSE);
  EXPECT_EQ(message.params().selector(), RESPONSE_SELECTOR_STREAMING);
  EXPECT_EQ(message.params().budgets_size(), 3);
  ASSERT_EQ(message.layers(1).response_size(), 3);
  EXPECT_EQ(message.layers(1).response(0).budget(), 4);
  EXPECT_EQ(message.layers(1).response(0).mean_kl(), 1.5);
  EXPECT_EQ(message.layers(1).response(1).std_error(), 5e-324);
  const auto want = method::ProfileToJson(profile);
  ASSERT_TRUE(want.ok()) << want.status();
  const auto got = method::ProfileToJson(ProfileFromProto(message));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, *want);
  // Without layers, no points travel either.
  EXPECT_EQ(AsSent(profile, /*with_layers=*/false).layers_size(), 0);
}

TEST(ProfileConvertTest, WithoutLayersTheLayersAndStabilityStayOutAndTheRestIsKept) {
  const Profile message = AsSent(SampleProfile(), /*with_layers=*/false);
  EXPECT_EQ(message.layers_size(), 0);
  EXPECT_FALSE(message.has_stability());
  ASSERT_TRUE(message.has_verification());
  EXPECT_EQ(message.verification().disagreements(0).outvoted_worker(), "w3");
  EXPECT_EQ(message.params().layers_size(), 2);
  EXPECT_EQ(message.tool_version(), "ripplekv 0.1.0");
}

TEST(ProfileConvertTest, TheProfilesHashIsTheMessagesKeyNotItsModelCopy) {
  Profile message = AsSent(SampleProfile(), /*with_layers=*/true);
  message.mutable_model()->set_model_hash("other");
  EXPECT_EQ(ProfileFromProto(message).model.hash, "ab12");
  EXPECT_EQ(ModelFromProto(message.model()).hash, "other");
}

TEST(ProfileConvertTest, ModesMapToTheirEnumValues) {
  EXPECT_EQ(PerturbModeToProto(method::PerturbMode::kCache), PERTURB_MODE_CACHE);
  EXPECT_EQ(PerturbModeToProto(method::PerturbMode::kPrefill), PERTURB_MODE_PREFILL);
  Profile message = AsSent(SampleProfile(), /*with_layers=*/true);
  message.mutable_params()->set_mode(PERTURB_MODE_CACHE);
  EXPECT_EQ(ProfileFromProto(message).params.mode, method::PerturbMode::kCache);
}

}  // namespace
}  // namespace ripplekv::v1
