#include "method/profile.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/version.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "method/profile_aggregate.h"
#include "nlohmann/json.hpp"
#include "tests/common/temp_dir.h"

namespace ripplekv::method {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::json;

using ripplekv::testing::TempDir;

uint64_t Bits(double d) { return std::bit_cast<uint64_t>(d); }

// A valid 3-layer profile with doubles that have no short decimal form.
SensitivityProfile SampleProfile() {
  SensitivityProfile p;
  p.model = {.hash = "5f1d0c9e",
             .architecture = "llama",
             .name = "SmolLM2-135M-Instruct",
             .n_layers = 4,
             .n_kv_heads = 3,
             .head_dim = 64,
             .d_model = 576,
             .vocab_size = 49152};
  p.params = {{.mode = PerturbMode::kCache,
               .alpha = 0.1,
               .trials = 2,
               .seed = std::numeric_limits<uint64_t>::max(),
               .samples = 3,
               .context_len = 512,
               .probe_len = 64,
               .layers = {0, 1, 3}},
              "wikitext-2 test, 3 x 576"};
  const double third = 1.0 / 3.0;
  p.layers = {
      {.layer = 0,
       .mean_kl = third,
       .std_error = 0.1,
       .count = 6,
       .per_sample_mean = {0.1, third, 2.0 / 3.0}},
      {.layer = 1,
       .mean_kl = 1e-300,
       .std_error = 5e-324,
       .count = 6,
       .per_sample_mean = {1e-300, 2.2250738585072014e-308, 0.0}},
      {.layer = 3,
       .mean_kl = std::nextafter(0.2, 1.0),
       .std_error = 0.0,
       .count = 6,
       .per_sample_mean = {std::numeric_limits<double>::max(), 1.0, 123456.78901234567}},
  };
  p.created_at = "2025-05-31T09:30:00Z";
  p.tool_version = "ripplekv 0.1.0";
  return p;
}

void ExpectSamePoints(const std::vector<ResponsePoint>& a, const std::vector<ResponsePoint>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t t = 0; t < a.size(); ++t) {
    EXPECT_EQ(a[t].budget, b[t].budget);
    EXPECT_EQ(Bits(a[t].mean_kl), Bits(b[t].mean_kl));
    EXPECT_EQ(Bits(a[t].std_error), Bits(b[t].std_error));
  }
}

void ExpectSameProfile(const SensitivityProfile& a, const SensitivityProfile& b) {
  EXPECT_EQ(a.schema_version, b.schema_version);
  EXPECT_EQ(a.model.hash, b.model.hash);
  EXPECT_EQ(a.model.architecture, b.model.architecture);
  EXPECT_EQ(a.model.name, b.model.name);
  EXPECT_EQ(a.model.n_layers, b.model.n_layers);
  EXPECT_EQ(a.model.n_kv_heads, b.model.n_kv_heads);
  EXPECT_EQ(a.model.head_dim, b.model.head_dim);
  EXPECT_EQ(a.model.d_model, b.model.d_model);
  EXPECT_EQ(a.model.vocab_size, b.model.vocab_size);
  EXPECT_EQ(a.params.mode, b.params.mode);
  EXPECT_EQ(Bits(a.params.alpha), Bits(b.params.alpha));
  EXPECT_EQ(a.params.trials, b.params.trials);
  EXPECT_EQ(a.params.seed, b.params.seed);
  EXPECT_EQ(a.params.samples, b.params.samples);
  EXPECT_EQ(a.params.context_len, b.params.context_len);
  EXPECT_EQ(a.params.probe_len, b.params.probe_len);
  EXPECT_EQ(a.params.layers, b.params.layers);
  EXPECT_EQ(a.params.objective, b.params.objective);
  EXPECT_EQ(a.params.selector, b.params.selector);
  EXPECT_EQ(a.params.budgets, b.params.budgets);
  EXPECT_EQ(a.params.data_source, b.params.data_source);
  ASSERT_EQ(a.layers.size(), b.layers.size());
  for (size_t i = 0; i < a.layers.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(a.layers[i].layer, b.layers[i].layer);
    EXPECT_EQ(Bits(a.layers[i].mean_kl), Bits(b.layers[i].mean_kl));
    EXPECT_EQ(Bits(a.layers[i].std_error), Bits(b.layers[i].std_error));
    EXPECT_EQ(a.layers[i].count, b.layers[i].count);
    ASSERT_EQ(a.layers[i].per_sample_mean.size(), b.layers[i].per_sample_mean.size());
    for (size_t s = 0; s < a.layers[i].per_sample_mean.size(); ++s) {
      EXPECT_EQ(Bits(a.layers[i].per_sample_mean[s]), Bits(b.layers[i].per_sample_mean[s]));
    }
    ExpectSamePoints(a.layers[i].response, b.layers[i].response);
    ASSERT_EQ(a.layers[i].head_response.size(), b.layers[i].head_response.size());
    for (size_t h = 0; h < a.layers[i].head_response.size(); ++h) {
      ExpectSamePoints(a.layers[i].head_response[h], b.layers[i].head_response[h]);
    }
  }
  EXPECT_EQ(a.created_at, b.created_at);
  EXPECT_EQ(a.tool_version, b.tool_version);
}

// --- JSON round trip ---------------------------------------------------------------------------

TEST(ProfileJsonTest, RoundTripIsBitExact) {
  const SensitivityProfile p = SampleProfile();
  StatusOr<std::string> text = ProfileToJson(p);
  ASSERT_TRUE(text.ok()) << text.status();
  StatusOr<SensitivityProfile> back = ProfileFromJson(*text);
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectSameProfile(p, *back);
  EXPECT_EQ(*ProfileToJson(*back), *text);  // and the text is stable
}

TEST(ProfileJsonTest, RoundTripIsBitExactForRandomDoubles) {
  std::mt19937_64 rng(99);
  SensitivityProfile p = SampleProfile();
  for (int i = 0; i < 200; ++i) {
    for (LayerSensitivity& l : p.layers) {
      // Random finite non-negative doubles over the whole exponent range.
      auto draw = [&] {
        double d;
        do d = std::bit_cast<double>(rng() & 0x7fffffffffffffffull);
        while (!std::isfinite(d));
        return d;
      };
      l.mean_kl = draw();
      l.std_error = draw();
      for (double& m : l.per_sample_mean) m = draw();
    }
    p.params.alpha = std::bit_cast<double>((rng() & 0x3fffffffffffffffull) | 1);
    StatusOr<SensitivityProfile> back = ProfileFromJson(*ProfileToJson(p));
    ASSERT_TRUE(back.ok()) << back.status();
    ExpectSameProfile(p, *back);
  }
}

TEST(ProfileJsonTest, WritesTheDocumentedSchema) {
  const Json j = Json::parse(*ProfileToJson(SampleProfile()));
  EXPECT_EQ(j["schema_version"], 2);
  EXPECT_FALSE(j["params"].contains("objective"));  // a noise profile: no response members
  EXPECT_FALSE(j["params"].contains("budgets"));
  EXPECT_FALSE(j["layers"][0].contains("response"));
  EXPECT_EQ(j["model"]["hash"], "5f1d0c9e");
  EXPECT_EQ(j["params"]["mode"], "cache");
  EXPECT_EQ(j["params"]["seed"], std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(j["params"]["layers"], Json::parse("[0, 1, 3]"));
  EXPECT_EQ(j["layers"][2]["layer"], 3);
  EXPECT_TRUE(j["layers"][0].contains("stderr"));
  EXPECT_EQ(j["layers"][0]["count"], 6);
  EXPECT_EQ(j["created_at"], "2025-05-31T09:30:00Z");
}

TEST(ProfileJsonTest, PrefillModeRoundTrips) {
  SensitivityProfile p = SampleProfile();
  p.params.mode = PerturbMode::kPrefill;
  EXPECT_EQ(Json::parse(*ProfileToJson(p))["params"]["mode"], "prefill");
  EXPECT_EQ(ProfileFromJson(*ProfileToJson(p))->params.mode, PerturbMode::kPrefill);
}

// --- Malformed input ---------------------------------------------------------------------------

// The error of ProfileFromJson() on the sample profile after `edit`.
Status ErrorAfter(const std::function<void(Json&)>& edit) {
  Json j = Json::parse(*ProfileToJson(SampleProfile()));
  edit(j);
  StatusOr<SensitivityProfile> p = ProfileFromJson(j.dump());
  EXPECT_FALSE(p.ok());
  return p.ok() ? absl::OkStatus() : p.status();
}

void ExpectInvalid(const std::function<void(Json&)>& edit, const std::string& message) {
  Status status = ErrorAfter(edit);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), HasSubstr(message));
}

TEST(ProfileJsonTest, MissingFieldNamesItsPath) {
  ExpectInvalid([](Json& j) { j["layers"][2].erase("mean_kl"); }, "layers[2].mean_kl: missing");
  ExpectInvalid([](Json& j) { j["model"].erase("hash"); }, "model.hash: missing");
  ExpectInvalid([](Json& j) { j["params"].erase("layers"); }, "params.layers: missing");
  ExpectInvalid([](Json& j) { j.erase("created_at"); }, "created_at: missing");
  ExpectInvalid([](Json& j) { j.erase("schema_version"); }, "schema_version: missing");
}

TEST(ProfileJsonTest, MistypedFieldNamesItsPathAndType) {
  ExpectInvalid([](Json& j) { j["layers"][1]["mean_kl"] = "0.5"; },
                "layers[1].mean_kl: expected a number, got string");
  ExpectInvalid([](Json& j) { j["params"]["trials"] = 2.5; },
                "params.trials: expected an integer, got number");
  ExpectInvalid([](Json& j) { j["params"]["seed"] = -1; }, "params.seed: integer -1 is negative");
  ExpectInvalid([](Json& j) { j["layers"][0]["per_sample_mean"][2] = nullptr; },
                "layers[0].per_sample_mean[2]: expected a number, got null");
  ExpectInvalid([](Json& j) { j["params"]["layers"] = 3; },
                "params.layers: expected an array, got number");
  ExpectInvalid([](Json& j) { j["model"] = Json::array(); }, "model: expected an object");
  ExpectInvalid([](Json& j) { j["layers"][0]["count"] = 1e30; },
                "layers[0].count: expected an integer");
}

// A profile records the samples measured: the parameters that only a submission carries (the
// rounds of until_stable, the data's spread seed) are refused in one, and MeasuredParams clears
// them.
TEST(ProfileJsonTest, SubmissionOnlyParametersAreRejected) {
  ExpectInvalid([](Json& j) { j["params"]["until_stable"] = true; },
                "params.until_stable: a profile records the samples measured");
  ExpectInvalid([](Json& j) { j["params"]["max_samples"] = 16; },
                "params.max_samples: a profile records the samples measured");
  ExpectInvalid([](Json& j) { j["params"]["data_seed"] = 3; },
                "params.data_seed: a profile names its data in params.data_source");
  const ProfileParams measured = MeasuredParams(
      {.samples = 8, .data_seed = 3, .until_stable = true, .max_samples = 16}, 24, "d", "prose");
  EXPECT_EQ(measured.samples, 24);
  EXPECT_FALSE(measured.until_stable);
  EXPECT_EQ(measured.max_samples, CalibrationParams().max_samples);
  EXPECT_EQ(measured.data_seed, 0u);
  EXPECT_EQ(measured.data_source, "d");
  EXPECT_EQ(measured.data_domain, "prose");
}

TEST(ProfileJsonTest, InconsistentValuesAreRejected) {
  ExpectInvalid([](Json& j) { j["layers"][0]["mean_kl"] = -0.5; },
                "layers[0].mean_kl: must be finite and >= 0, got -0.5");
  ExpectInvalid([](Json& j) { j["layers"][1]["per_sample_mean"].erase(0); },
                "layers[1].per_sample_mean: has 2 entries but params.samples is 3");
  ExpectInvalid([](Json& j) { j["layers"][2]["count"] = 5; },
                "layers[2].count: is 5 but params.samples * params.trials is 6");
  ExpectInvalid([](Json& j) { j["params"]["layers"] = Json::parse("[0, 3, 1]"); },
                "params.layers[2]: layers must be strictly ascending");
  ExpectInvalid([](Json& j) { j["params"]["layers"] = Json::parse("[0, 1, 4]"); },
                "params.layers[2]: layer 4 is out of range: the model has 4 layers");
  ExpectInvalid([](Json& j) { j["params"]["layers"] = Json::parse("[0, 1, 1]"); },
                "params.layers[2]: layer 1 repeated");
  ExpectInvalid([](Json& j) { j["layers"][2]["layer"] = 2; },
                "layers[2].layer: is 2 but params.layers[2] is 3");
  ExpectInvalid([](Json& j) { j["layers"].erase(1); },
                "layers: has 2 entries but params.layers lists 3");
  ExpectInvalid([](Json& j) { j["params"]["mode"] = "decode"; }, "params.mode: unknown mode");
  ExpectInvalid([](Json& j) { j["params"]["alpha"] = 0; }, "params.alpha: must be finite and > 0");
  ExpectInvalid([](Json& j) { j["model"]["n_layers"] = 0; }, "model.n_layers: must be > 0");
  ExpectInvalid([](Json& j) { j["created_at"] = "yesterday"; },
                "created_at: \"yesterday\" is not an ISO-8601 date-time");
  ExpectInvalid([](Json& j) { j["model"]["hash"] = ""; }, "model.hash: must not be empty");
}

TEST(ProfileJsonTest, UnknownFieldIsRejected) {
  ExpectInvalid([](Json& j) { j["layers"][0]["mean_kL"] = 1.0; },
                "layers[0].mean_kL: unknown field");
  ExpectInvalid([](Json& j) { j["comment"] = "x"; }, "comment: unknown field");
}

TEST(ProfileJsonTest, UnknownSchemaVersionIsFailedPrecondition) {
  for (int version : {0, 3}) {
    Status status = ErrorAfter([&](Json& j) { j["schema_version"] = version; });
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
    EXPECT_THAT(status.message(),
                HasSubstr(absl::StrCat("schema_version ", version,
                                       " is not supported (this build reads versions 1 and 2)")));
  }
  // A profile in memory is of the version this build writes; reading migrates version 1.
  SensitivityProfile p = SampleProfile();
  p.schema_version = 1;
  EXPECT_EQ(ValidateProfile(p).code(), absl::StatusCode::kFailedPrecondition);
}

// --- Response profiles (schema version 2) ------------------------------------------------------

// SampleProfile as a response calibration: SnapKV over the grid {32, 128, 512}, one trial per
// budget, the full cache's KL 0.
SensitivityProfile ResponseProfile() {
  SensitivityProfile p = SampleProfile();
  p.params.objective = Objective::kResponse;
  p.params.selector = ResponseSelector::kSnapKv;
  p.params.budgets = {32, 128, 512};
  p.params.trials = 3;
  const double third = 1.0 / 3.0;
  for (LayerSensitivity& l : p.layers) {
    l.count = 9;
    l.response = {{.budget = 32, .mean_kl = third * (1 + l.layer), .std_error = 1e-300},
                  {.budget = 128, .mean_kl = std::nextafter(0.01, 1.0), .std_error = 0.0},
                  {.budget = 512, .mean_kl = 0.0, .std_error = 0.0}};
  }
  return p;
}

TEST(ProfileResponseTest, RoundTripIsExact) {
  const SensitivityProfile p = ResponseProfile();
  StatusOr<std::string> text = ProfileToJson(p);
  ASSERT_TRUE(text.ok()) << text.status();
  StatusOr<SensitivityProfile> back = ProfileFromJson(*text);
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectSameProfile(p, *back);
  EXPECT_EQ(*ProfileToJson(*back), *text);
  for (ResponseSelector selector : {ResponseSelector::kH2o, ResponseSelector::kStreaming}) {
    SensitivityProfile other = p;
    other.params.selector = selector;
    StatusOr<SensitivityProfile> read = ProfileFromJson(*ProfileToJson(other));
    ASSERT_TRUE(read.ok()) << read.status();
    EXPECT_EQ(read->params.selector, selector);
  }
}

TEST(ProfileResponseTest, WritesTheDocumentedSchema) {
  const nlohmann::ordered_json j = nlohmann::ordered_json::parse(*ProfileToJson(ResponseProfile()));
  EXPECT_EQ(j["schema_version"], 2);
  EXPECT_EQ(j["params"].begin().key(), "objective");  // the objective first: it says what follows
  EXPECT_EQ(j["params"]["objective"], "response");
  EXPECT_EQ(j["params"]["selector"], "snapkv");
  EXPECT_EQ(j["params"]["budgets"], nlohmann::ordered_json::parse("[32, 128, 512]"));
  EXPECT_EQ(j["layers"][1]["response"][2],
            nlohmann::ordered_json::parse(R"({"budget": 512, "mean_kl": 0.0, "stderr": 0.0})"));
  EXPECT_EQ(j["layers"][1].back(), j["layers"][1]["response"]);  // after per_sample_mean
}

// The error of ProfileFromJson() on `profile` after `edit`.
void ExpectInvalidAfter(const SensitivityProfile& profile, const std::function<void(Json&)>& edit,
                        const std::string& message) {
  Json j = Json::parse(*ProfileToJson(profile));
  edit(j);
  StatusOr<SensitivityProfile> p = ProfileFromJson(j.dump());
  ASSERT_FALSE(p.ok()) << message;
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << p.status();
  EXPECT_THAT(p.status().message(), HasSubstr(message));
}

// The error of ProfileFromJson() on ResponseProfile() after `edit`.
void ExpectResponseInvalid(const std::function<void(Json&)>& edit, const std::string& message) {
  ExpectInvalidAfter(ResponseProfile(), edit, message);
}

TEST(ProfileResponseTest, PointsMustMatchTheGrid) {
  ExpectResponseInvalid([](Json& j) { j["layers"][0].erase("response"); },
                        "layers[0].response: has 0 points but params.budgets has 3");
  ExpectResponseInvalid([](Json& j) { j["layers"][2]["response"].erase(1); },
                        "layers[2].response: has 2 points but params.budgets has 3");
  ExpectResponseInvalid([](Json& j) { j["layers"][1]["response"][1]["budget"] = 64; },
                        "layers[1].response[1].budget: is 64 but params.budgets[1] is 128");
  ExpectResponseInvalid([](Json& j) { j["layers"][1]["response"][0]["mean_kl"] = -1e-9; },
                        "layers[1].response[0].mean_kl: must be finite and >= 0, got -1e-09");
  ExpectResponseInvalid([](Json& j) { j["layers"][1]["response"][0]["stderr"] = -1; },
                        "layers[1].response[0].stderr: must be finite and >= 0, got -1");
  ExpectResponseInvalid([](Json& j) { j["layers"][0]["response"][2]["mean_kl"] = 1e-12; },
                        "layers[0].response[2].mean_kl: must be 0 at the full cache (budget 512), "
                        "got 1e-12");
  ExpectResponseInvalid([](Json& j) { j["layers"][0]["response"][0]["budget"] = "32"; },
                        "layers[0].response[0].budget: expected an integer, got string");
  ExpectResponseInvalid([](Json& j) { j["layers"][0]["response"][0]["tokens"] = 32; },
                        "layers[0].response[0].tokens: unknown field");
  ExpectResponseInvalid([](Json& j) { j["layers"][0]["response"] = 1; },
                        "layers[0].response: expected an array, got number");
}

TEST(ProfileResponseTest, ParametersFollowTheMethodsRules) {
  ExpectResponseInvalid([](Json& j) { j["params"]["budgets"] = Json::parse("[32, 128, 256]"); },
                        "profile: params.budgets[2]: the last budget must be the full cache, "
                        "params.context_len (512), got 256");
  ExpectResponseInvalid([](Json& j) { j["params"]["trials"] = 2; },
                        "profile: params.trials: must be the number of params.budgets (3)");
  ExpectResponseInvalid([](Json& j) { j["params"]["mode"] = "prefill"; },
                        "profile: params.mode: a response calibration is in cache mode");
  ExpectResponseInvalid([](Json& j) { j["params"]["selector"] = "pyramid"; },
                        "profile: params.selector: unknown selector \"pyramid\"");
  // Response points in a noise profile.
  ExpectResponseInvalid(
      [](Json& j) {
        j["params"].erase("objective");
        j["params"].erase("selector");
        j["params"].erase("budgets");
        j["params"]["trials"] = 3;
      },
      "layers[0].response: only in a profile of objective response, got 3 points with objective "
      "noise");
}

// Version 1 predates the response objective: its members are unknown there.
TEST(ProfileResponseTest, Version1DocumentsHaveNoResponseMembers) {
  ExpectResponseInvalid([](Json& j) { j["schema_version"] = 1; },
                        "profile: params.objective: unknown field in schema_version 1");
  ExpectResponseInvalid(
      [](Json& j) {
        j["schema_version"] = 1;
        for (std::string_view key : {"objective", "selector", "budgets"}) j["params"].erase(key);
      },
      "profile: layers[0].response: unknown field in schema_version 1");
}

// ResponseProfile as a per-head response of the model's 3 KV heads: head h's KL is (h + 1) / 6
// of the layer's, so the layer's points are their sums.
SensitivityProfile PerHeadProfile() {
  SensitivityProfile p = ResponseProfile();
  p.params.kv_heads = 3;
  p.params.trials = 9;
  for (LayerSensitivity& l : p.layers) {
    l.count = 27;
    l.head_response.assign(3, l.response);
    for (size_t h = 0; h < 3; ++h) {
      for (ResponsePoint& point : l.head_response[h]) {
        point.mean_kl *= static_cast<double>(h + 1) / 6.0;
      }
    }
  }
  return p;
}

TEST(ProfilePerHeadTest, RoundTripIsExactAndHeadsFollowTheLayersResponse) {
  const SensitivityProfile p = PerHeadProfile();
  StatusOr<std::string> text = ProfileToJson(p);
  ASSERT_TRUE(text.ok()) << text.status();
  StatusOr<SensitivityProfile> back = ProfileFromJson(*text);
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectSameProfile(p, *back);
  EXPECT_EQ(*ProfileToJson(*back), *text);
  const nlohmann::ordered_json j = nlohmann::ordered_json::parse(*text);
  EXPECT_EQ(j["params"]["kv_heads"], 3);
  EXPECT_EQ(j["layers"][2].back(), j["layers"][2]["head_response"]);  // after "response"
  EXPECT_EQ(j["layers"][2]["head_response"].size(), 3u);
  EXPECT_EQ(j["layers"][2]["head_response"][1][2],
            nlohmann::ordered_json::parse(R"({"budget": 512, "mean_kl": 0.0, "stderr": 0.0})"));
  // A per-layer response profile writes no head_response.
  EXPECT_EQ(ProfileToJson(ResponseProfile())->find("head_response"), std::string::npos);
}

// The error of ProfileFromJson() on PerHeadProfile() after `edit`.
void ExpectPerHeadInvalid(const std::function<void(Json&)>& edit, const std::string& message) {
  ExpectInvalidAfter(PerHeadProfile(), edit, message);
}

TEST(ProfilePerHeadTest, HeadPointsMustMatchTheHeadsAndTheGrid) {
  ExpectPerHeadInvalid([](Json& j) { j["layers"][1]["head_response"].erase(2); },
                       "layers[1].head_response: has 2 heads but params.kv_heads is 3");
  ExpectPerHeadInvalid([](Json& j) { j["layers"][0].erase("head_response"); },
                       "layers[0].head_response: has 0 heads but params.kv_heads is 3");
  ExpectPerHeadInvalid([](Json& j) { j["layers"][2]["head_response"][1].erase(0); },
                       "layers[2].head_response[1]: has 2 points but params.budgets has 3");
  ExpectPerHeadInvalid(
      [](Json& j) { j["layers"][2]["head_response"][0][2]["mean_kl"] = 0.5; },
      "layers[2].head_response[0][2].mean_kl: must be 0 at the full cache (budget 512), got 0.5");
  ExpectPerHeadInvalid([](Json& j) { j["layers"][2]["head_response"][0] = 3; },
                       "layers[2].head_response[0]: expected an array, got number");
  // Head points without a per-head calibration, and a head count that is not the model's.
  ExpectResponseInvalid(
      [](Json& j) { j["layers"][0]["head_response"] = Json::array({j["layers"][0]["response"]}); },
      "layers[0].head_response: has 1 heads but params.kv_heads is 0");
  ExpectPerHeadInvalid(
      [](Json& j) {
        j["params"]["kv_heads"] = 1;
        j["params"]["trials"] = 3;
        for (Json& layer : j["layers"]) layer["count"] = 9;
      },
      "params.kv_heads: is 1 but the model has 3 KV heads (model.n_kv_heads)");
  ExpectPerHeadInvalid([](Json& j) { j["schema_version"] = 1; },
                       "profile: params.objective: unknown field in schema_version 1");
}

TEST(ProfileJsonTest, SyntaxErrorGivesTheByteOffset) {
  std::string text = *ProfileToJson(SampleProfile());
  text.resize(40);
  StatusOr<SensitivityProfile> p = ProfileFromJson(text);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(p.status().message(), HasSubstr("profile: JSON syntax error at byte 41:"));

  EXPECT_THAT(ProfileFromJson("").status().message(), HasSubstr("JSON syntax error at byte 1:"));
  EXPECT_THAT(ProfileFromJson("[1, 2]").status().message(),
              HasSubstr("expected an object, got array"));
}

TEST(ProfileJsonTest, DuplicateKeyIsRejected) {
  std::string text = *ProfileToJson(SampleProfile());
  const std::string key = "\"tool_version\"";
  text.insert(text.find(key), "\"tool_version\": \"other\",\n  ");
  StatusOr<SensitivityProfile> p = ProfileFromJson(text);
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(), HasSubstr("key \"tool_version\" appears twice"));
}

TEST(ProfileJsonTest, InvalidProfileIsNotWritten) {
  SensitivityProfile p = SampleProfile();
  p.layers[1].mean_kl = std::nan("");
  StatusOr<std::string> text = ProfileToJson(p);
  ASSERT_FALSE(text.ok());
  EXPECT_THAT(text.status().message(), HasSubstr("layers[1].mean_kl: must be finite"));

  p = SampleProfile();
  p.model.name = "bad \xff utf-8";
  text = ProfileToJson(p);
  ASSERT_FALSE(text.ok());
  EXPECT_THAT(text.status().message(), HasSubstr("UTF-8"));
}

// --- Verification block ------------------------------------------------------------------------

// The sample profile as a job verified by the scheduler left it: one disagreement on (2, 3),
// decided against "w-bad", and one on (0, 0) decided by three agreeing workers.
SensitivityProfile VerifiedProfile() {
  SensitivityProfile p = SampleProfile();
  p.verification =
      ProfileVerification{.fraction = 0.05,
                          .tasks_verified = 7,
                          .tasks_unverified = 2,
                          .tasks_recomputed = 4,
                          .disagreements = {{.sample = 2,
                                             .layer = 3,
                                             .outvoted_worker = "w-bad",
                                             .agreeing_workers = {"host-a/cuda:0", "host-b/cpu"}},
                                            {.sample = 0,
                                             .layer = 0,
                                             .outvoted_worker = "w-other",
                                             .agreeing_workers = {"x", "y", "z"}}}};
  return p;
}

void ExpectSameVerification(const ProfileVerification& a, const ProfileVerification& b) {
  EXPECT_EQ(Bits(a.fraction), Bits(b.fraction));
  EXPECT_EQ(a.tasks_verified, b.tasks_verified);
  EXPECT_EQ(a.tasks_unverified, b.tasks_unverified);
  EXPECT_EQ(a.tasks_recomputed, b.tasks_recomputed);
  ASSERT_EQ(a.disagreements.size(), b.disagreements.size());
  for (size_t i = 0; i < a.disagreements.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(a.disagreements[i].sample, b.disagreements[i].sample);
    EXPECT_EQ(a.disagreements[i].layer, b.disagreements[i].layer);
    EXPECT_EQ(a.disagreements[i].outvoted_worker, b.disagreements[i].outvoted_worker);
    EXPECT_EQ(a.disagreements[i].agreeing_workers, b.disagreements[i].agreeing_workers);
  }
}

TEST(ProfileVerificationTest, JsonRoundTripIsExact) {
  SensitivityProfile p = VerifiedProfile();
  for (double fraction : {0.05, 0.0, 1.0, 1.0 / 3.0, 5e-324}) {
    SCOPED_TRACE(fraction);
    p.verification->fraction = fraction;
    StatusOr<std::string> text = ProfileToJson(p);
    ASSERT_TRUE(text.ok()) << text.status();
    StatusOr<SensitivityProfile> back = ProfileFromJson(*text);
    ASSERT_TRUE(back.ok()) << back.status();
    ExpectSameProfile(p, *back);
    ASSERT_TRUE(back->verification.has_value());
    ExpectSameVerification(*p.verification, *back->verification);
    EXPECT_EQ(*ProfileToJson(*back), *text);
  }
  p.verification->tasks_verified = std::numeric_limits<uint64_t>::max();
  p.verification->disagreements.clear();  // a verified job without disagreements
  StatusOr<SensitivityProfile> back = ProfileFromJson(*ProfileToJson(p));
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectSameVerification(*p.verification, *back->verification);
}

TEST(ProfileVerificationTest, WritesTheDocumentedSchemaAfterEverythingElse) {
  const std::string text = *ProfileToJson(VerifiedProfile());
  const nlohmann::ordered_json j = nlohmann::ordered_json::parse(text);
  EXPECT_EQ(j.back(), j["verification"]);  // the last key: a profile without it is a prefix
  EXPECT_EQ(j["verification"], nlohmann::ordered_json::parse(R"({
    "fraction": 0.05, "tasks_verified": 7, "tasks_unverified": 2, "tasks_recomputed": 4,
    "disagreements": [
      {"sample": 2, "layer": 3, "outvoted_worker": "w-bad",
       "agreeing_workers": ["host-a/cuda:0", "host-b/cpu"]},
      {"sample": 0, "layer": 0, "outvoted_worker": "w-other", "agreeing_workers": ["x", "y", "z"]}
    ]})"));
}

TEST(ProfileVerificationTest, AbsentBlockIsNotWrittenAndNotInvented) {
  const std::string text = *ProfileToJson(SampleProfile());
  EXPECT_EQ(text.find("verification"), std::string::npos);
  StatusOr<SensitivityProfile> back = ProfileFromJson(text);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_FALSE(back->verification.has_value());
  EXPECT_EQ(*ProfileToJson(*back), text);
}

// The committed profiles (docs/, written by `ripplekv calibrate`) of schema version 1 predate the
// verification block: they read as noise profiles of version 2, pass the validation, and write
// back byte for byte but for the version (the migration, docs/BUDGETS.md). Those of version 2 (the
// response profiles) write back byte for byte.
TEST(ProfileVerificationTest, CommittedVersion1ProfilesMigrateToVersion2) {
  const std::filesystem::path source(RIPPLEKV_SOURCE_DIR);
  std::vector<std::filesystem::path> paths = {source / "docs" / "smollm2_profile.json"};
  for (const auto& entry : std::filesystem::directory_iterator(source / "docs" / "results")) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with("profile") && name.ends_with(".json")) paths.push_back(entry.path());
  }
  ASSERT_GE(paths.size(), 2u);
  for (const std::filesystem::path& path : paths) {
    SCOPED_TRACE(path.string());
    std::ifstream in(path, std::ios::binary);
    ASSERT_TRUE(in);
    const std::string text((std::istreambuf_iterator<char>(in)), {});
    const std::string v1 = "{\n  \"schema_version\": 1,\n";
    if (text.starts_with("{\n  \"schema_version\": 2,\n")) {
      // Written by this version (the response profiles): read and written back byte for byte.
      StatusOr<SensitivityProfile> current = ProfileFromJson(text);
      ASSERT_TRUE(current.ok()) << current.status();
      EXPECT_TRUE(ValidateProfile(*current).ok()) << ValidateProfile(*current);
      EXPECT_EQ(*ProfileToJson(*current), text);
      continue;
    }
    ASSERT_TRUE(text.starts_with(v1));
    StatusOr<SensitivityProfile> profile = ProfileFromJson(text);
    ASSERT_TRUE(profile.ok()) << profile.status();
    EXPECT_EQ(profile->schema_version, 2);
    EXPECT_EQ(profile->params.objective, Objective::kNoise);
    EXPECT_TRUE(profile->params.budgets.empty());
    EXPECT_TRUE(ValidateProfile(*profile).ok()) << ValidateProfile(*profile);
    EXPECT_FALSE(profile->verification.has_value());
    StatusOr<std::string> written = ProfileToJson(*profile);
    ASSERT_TRUE(written.ok()) << written.status();
    const std::string v2 = "{\n  \"schema_version\": 2,\n";
    EXPECT_TRUE(*written == v2 + text.substr(v1.size())) << "written differently";
    // The version 2 document reads back as the same profile.
    StatusOr<SensitivityProfile> again = ProfileFromJson(*written);
    ASSERT_TRUE(again.ok()) << again.status();
    ExpectSameProfile(*profile, *again);
  }
}

// The error of ProfileFromJson() on VerifiedProfile() after `edit`.
void ExpectVerificationInvalid(const std::function<void(Json&)>& edit, const std::string& message) {
  Json j = Json::parse(*ProfileToJson(VerifiedProfile()));
  edit(j);
  StatusOr<SensitivityProfile> p = ProfileFromJson(j.dump());
  ASSERT_FALSE(p.ok()) << message;
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << p.status();
  EXPECT_THAT(p.status().message(), HasSubstr(message));
}

TEST(ProfileVerificationTest, ReadingIsStrictAndNamesThePath) {
  ExpectVerificationInvalid([](Json& j) { j["verification"].erase("tasks_recomputed"); },
                            "profile: verification.tasks_recomputed: missing");
  ExpectVerificationInvalid([](Json& j) { j["verification"].erase("disagreements"); },
                            "verification.disagreements: missing");
  ExpectVerificationInvalid([](Json& j) { j["verification"]["checked"] = 1; },
                            "verification.checked: unknown field");
  ExpectVerificationInvalid([](Json& j) { j["verification"]["disagreements"][1]["why"] = "x"; },
                            "verification.disagreements[1].why: unknown field");
  ExpectVerificationInvalid([](Json& j) { j["verification"] = 0.05; },
                            "verification: expected an object");
  ExpectVerificationInvalid([](Json& j) { j["verification"]["fraction"] = "5%"; },
                            "verification.fraction: expected a number, got string");
  ExpectVerificationInvalid([](Json& j) { j["verification"]["tasks_verified"] = -1; },
                            "verification.tasks_verified: integer -1 is negative");
  ExpectVerificationInvalid(
      [](Json& j) { j["verification"]["disagreements"][0]["sample"] = 0.5; },
      "verification.disagreements[0].sample: expected a non-negative integer");
  ExpectVerificationInvalid(
      [](Json& j) { j["verification"]["disagreements"][0]["layer"] = 4294967296ull; },
      "verification.disagreements[0].layer: must be < 2^32, got 4294967296");
  ExpectVerificationInvalid(
      [](Json& j) { j["verification"]["disagreements"][0]["agreeing_workers"][1] = 7; },
      "verification.disagreements[0].agreeing_workers[1]: expected a string, got number");
}

TEST(ProfileVerificationTest, InconsistentValuesAreRejected) {
  ExpectVerificationInvalid([](Json& j) { j["verification"]["fraction"] = 1.5; },
                            "verification.fraction: must be in [0, 1], got 1.5");
  ExpectVerificationInvalid([](Json& j) { j["verification"]["fraction"] = -0.01; },
                            "verification.fraction: must be in [0, 1], got -0.01");
  ExpectVerificationInvalid([](Json& j) { j["verification"]["disagreements"][0]["sample"] = 3; },
                            "verification.disagreements[0].sample: is 3 but params.samples is 3");
  ExpectVerificationInvalid([](Json& j) { j["verification"]["disagreements"][1]["layer"] = 2; },
                            "verification.disagreements[1].layer: layer 2 is not in params.layers");
  ExpectVerificationInvalid(
      [](Json& j) { j["verification"]["disagreements"][0]["outvoted_worker"] = ""; },
      "verification.disagreements[0].outvoted_worker: must not be empty");
  ExpectVerificationInvalid(
      [](Json& j) { j["verification"]["disagreements"][0]["agreeing_workers"].erase(1); },
      "verification.disagreements[0].agreeing_workers: must name at least 2 workers, got 1");
  ExpectVerificationInvalid(
      [](Json& j) { j["verification"]["disagreements"][1]["agreeing_workers"][2] = "w-other"; },
      "verification.disagreements[1].agreeing_workers[2]: \"w-other\" is the outvoted worker");
  ExpectVerificationInvalid(
      [](Json& j) { j["verification"]["disagreements"][1]["agreeing_workers"][2] = "x"; },
      "verification.disagreements[1].agreeing_workers[2]: \"x\" is named twice");
}

TEST(ProfileVerificationTest, InvalidBlockIsNotWritten) {
  SensitivityProfile p = VerifiedProfile();
  p.verification->fraction = std::nan("");
  StatusOr<std::string> text = ProfileToJson(p);
  ASSERT_FALSE(text.ok());
  EXPECT_THAT(text.status().message(), HasSubstr("verification.fraction: must be in [0, 1]"));

  p = VerifiedProfile();
  p.verification->disagreements[0].agreeing_workers[0] = "bad \xff utf-8";
  text = ProfileToJson(p);
  ASSERT_FALSE(text.ok());
  EXPECT_THAT(text.status().message(), HasSubstr("UTF-8"));
}

// --- Files -------------------------------------------------------------------------------------

TEST(ProfileFileTest, WriteThenReadRoundTripsAndReplacesAtomically) {
  TempDir dir;
  const std::string path = dir.File("profile.json");
  SensitivityProfile p = SampleProfile();
  ASSERT_TRUE(WriteProfileFile(path, p).ok());
  p.tool_version = "ripplekv 0.2.0";
  ASSERT_TRUE(WriteProfileFile(path, p).ok());  // replaces the existing file
  StatusOr<SensitivityProfile> back = ReadProfileFile(path);
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectSameProfile(p, *back);
  // No temporary file is left behind.
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    ++files;
    EXPECT_EQ(entry.path().filename(), "profile.json");
  }
  EXPECT_EQ(files, 1);
}

TEST(ProfileFileTest, InvalidProfileLeavesTheExistingFileUntouched) {
  TempDir dir;
  const std::string path = dir.File("profile.json");
  ASSERT_TRUE(WriteProfileFile(path, SampleProfile()).ok());
  SensitivityProfile bad = SampleProfile();
  bad.params.samples = 0;
  EXPECT_FALSE(WriteProfileFile(path, bad).ok());
  EXPECT_TRUE(ReadProfileFile(path).ok());
}

TEST(ProfileFileTest, ReadErrorsNameTheFile) {
  TempDir dir;
  StatusOr<SensitivityProfile> missing = ReadProfileFile(dir.File("nope.json"));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("nope.json"));

  StatusOr<SensitivityProfile> directory = ReadProfileFile(dir.path());
  EXPECT_EQ(directory.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(directory.status().message(), HasSubstr("not a regular file"));

  const std::string path = dir.File("bad.json");
  std::ofstream(path) << R"({"schema_version": 1, "model": {}})";
  StatusOr<SensitivityProfile> bad = ReadProfileFile(path);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("bad.json: profile: model.hash: missing"));

  Status write = WriteProfileFile(dir.File("no/such/dir.json"), SampleProfile());
  EXPECT_EQ(write.code(), absl::StatusCode::kNotFound) << write;
  EXPECT_THAT(write.message(), HasSubstr("no/such/dir.json"));
}

TEST(ProfileTimeTest, FormatsUtcIso8601) {
  EXPECT_EQ(FormatIso8601Utc(std::chrono::system_clock::time_point{}), "1970-01-01T00:00:00Z");
  EXPECT_EQ(FormatIso8601Utc(std::chrono::system_clock::from_time_t(1748683800)),
            "2025-05-31T09:30:00Z");
  EXPECT_TRUE(IsIso8601DateTime(FormatIso8601Utc(std::chrono::system_clock::now())));
}

TEST(ProfileTimeTest, AcceptsOnlyIso8601DateTimes) {
  EXPECT_TRUE(IsIso8601DateTime("2025-05-31T09:30:00Z"));
  EXPECT_TRUE(IsIso8601DateTime("2025-05-31T09:30:00.123456Z"));
  EXPECT_TRUE(IsIso8601DateTime("2025-05-31T09:30:00+02:00"));
  EXPECT_TRUE(IsIso8601DateTime("2025-05-31T09:30:00.5-07:30"));
  EXPECT_FALSE(IsIso8601DateTime("2025-05-31T09:30:00"));  // no zone
  EXPECT_FALSE(IsIso8601DateTime("2025-05-31 09:30:00Z"));
  EXPECT_FALSE(IsIso8601DateTime("2025-13-31T09:30:00Z"));
  EXPECT_FALSE(IsIso8601DateTime("2025-05-31T24:30:00Z"));
  EXPECT_FALSE(IsIso8601DateTime("2025-05-31T09:30:00.Z"));
  EXPECT_FALSE(IsIso8601DateTime("2025-05-31T09:30:00Zjunk"));
  EXPECT_FALSE(IsIso8601DateTime(""));
}

// --- Aggregation -------------------------------------------------------------------------------

// Two samples of one layer, two trials each: sample 0 -> {1, 3}, sample 1 -> {5, 7}.
// per-sample means [2, 6]; mean 4; stddev of the means sqrt(((2-4)^2 + (6-4)^2) / 1) = sqrt(8);
// stderr sqrt(8) / sqrt(2) = 2.
TEST(AggregateProfileTest, HandComputedMeanAndStandardError) {
  const std::vector<TrialKl> results = {
      {.sample = 1, .layer = 0, .trial = 1, .kl = 7.0},
      {.sample = 0, .layer = 0, .trial = 0, .kl = 1.0},
      {.sample = 1, .layer = 0, .trial = 0, .kl = 5.0},
      {.sample = 0, .layer = 0, .trial = 1, .kl = 3.0},
  };
  StatusOr<std::vector<LayerSensitivity>> layers = AggregateProfile(results);
  ASSERT_TRUE(layers.ok()) << layers.status();
  ASSERT_EQ(layers->size(), 1u);
  const LayerSensitivity& l = (*layers)[0];
  EXPECT_EQ(l.layer, 0);
  EXPECT_EQ(l.mean_kl, 4.0);
  EXPECT_EQ(l.per_sample_mean, (std::vector<double>{2.0, 6.0}));
  EXPECT_DOUBLE_EQ(l.std_error, 2.0);
  EXPECT_EQ(l.count, 4);
}

TEST(AggregateProfileTest, OneSampleHasZeroStandardError) {
  const std::vector<TrialKl> results = {{.sample = 4, .layer = 2, .trial = 0, .kl = 0.25},
                                        {.sample = 4, .layer = 2, .trial = 1, .kl = 0.75}};
  StatusOr<std::vector<LayerSensitivity>> layers = AggregateProfile(results);
  ASSERT_TRUE(layers.ok()) << layers.status();
  EXPECT_EQ((*layers)[0].layer, 2);
  EXPECT_EQ((*layers)[0].mean_kl, 0.5);
  EXPECT_EQ((*layers)[0].std_error, 0.0);
  EXPECT_EQ((*layers)[0].per_sample_mean, std::vector<double>{0.5});
}

std::vector<TrialKl> RandomGrid(int samples, int layers, int trials, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> exponent(-9.0, 2.0);
  std::vector<TrialKl> out;
  for (int s = 0; s < samples; ++s) {
    for (int l = 0; l < layers; ++l) {
      for (int t = 0; t < trials; ++t) {
        out.push_back({.sample = s, .layer = l, .trial = t, .kl = std::pow(10.0, exponent(rng))});
      }
    }
  }
  return out;
}

TEST(AggregateProfileTest, ResultIsBitIdenticalWhateverTheInputOrder) {
  std::vector<TrialKl> results = RandomGrid(/*samples=*/9, /*layers=*/6, /*trials=*/4, 1);
  StatusOr<std::vector<LayerSensitivity>> reference = AggregateProfile(results);
  ASSERT_TRUE(reference.ok()) << reference.status();

  // The values span 11 decades, so summing them in another order really does change the bits:
  // the canonical order is what makes the result reproducible.
  bool naive_sum_differs = false;
  std::mt19937_64 rng(2);
  for (int round = 0; round < 50; ++round) {
    std::shuffle(results.begin(), results.end(), rng);
    std::vector<double> naive(6, 0.0);
    for (const TrialKl& r : results) naive[r.layer] += r.kl;
    for (int l = 0; l < 6; ++l) {
      naive_sum_differs |= Bits(naive[l] / 36) != Bits((*reference)[l].mean_kl);
    }
    StatusOr<std::vector<LayerSensitivity>> shuffled = AggregateProfile(results);
    ASSERT_TRUE(shuffled.ok()) << shuffled.status();
    ASSERT_EQ(shuffled->size(), reference->size());
    for (size_t l = 0; l < reference->size(); ++l) {
      const LayerSensitivity& a = (*reference)[l];
      const LayerSensitivity& b = (*shuffled)[l];
      ASSERT_EQ(a.layer, b.layer);
      ASSERT_EQ(Bits(a.mean_kl), Bits(b.mean_kl)) << "round " << round << " layer " << l;
      ASSERT_EQ(Bits(a.std_error), Bits(b.std_error));
      ASSERT_EQ(a.count, b.count);
      ASSERT_EQ(a.per_sample_mean.size(), b.per_sample_mean.size());
      for (size_t s = 0; s < a.per_sample_mean.size(); ++s) {
        ASSERT_EQ(Bits(a.per_sample_mean[s]), Bits(b.per_sample_mean[s]));
      }
    }
  }
  EXPECT_TRUE(naive_sum_differs);
}

TEST(AggregateProfileTest, AggregatedLayersMakeAValidProfile) {
  const std::vector<TrialKl> results = RandomGrid(3, 4, 2, 5);
  StatusOr<std::vector<LayerSensitivity>> layers = AggregateProfile(results);
  ASSERT_TRUE(layers.ok()) << layers.status();
  SensitivityProfile p = SampleProfile();
  p.params.layers = {0, 1, 2, 3};
  p.layers = *layers;
  EXPECT_TRUE(ValidateProfile(p).ok()) << ValidateProfile(p);
  ExpectSameProfile(p, *ProfileFromJson(*ProfileToJson(p)));
}

TEST(AssembleProfileTest, FillsLayersFromTheResultsAndTheVersionFromTheBuild) {
  // Layers 0, 1 and 3 measured (as SampleProfile's params say), 3 samples x 2 trials.
  std::vector<TrialKl> results;
  for (const TrialKl& r : RandomGrid(3, 4, 2, 7)) {
    if (r.layer != 2) results.push_back(r);
  }
  SensitivityProfile sample = SampleProfile();
  ProfileParams params = sample.params;
  params.layers = {7};  // ignored: the results decide
  auto p = AssembleProfile(sample.model, params, results, "2026-12-01T00:00:00Z");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->params.layers, (std::vector<int64_t>{0, 1, 3}));
  EXPECT_EQ(p->tool_version, "ripplekv " + std::string(Version()));
  EXPECT_EQ(p->created_at, "2026-12-01T00:00:00Z");
  auto layers = AggregateProfile(results);
  ASSERT_TRUE(layers.ok());
  ASSERT_EQ(p->layers.size(), layers->size());
  for (size_t i = 0; i < layers->size(); ++i) {
    EXPECT_EQ(Bits(p->layers[i].mean_kl), Bits((*layers)[i].mean_kl));
  }
  // Parameters that disagree with the results' grid are refused, naming the field.
  params.trials = 3;
  auto bad = AssembleProfile(sample.model, params, results, "2026-12-01T00:00:00Z");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("count"));
}

// A response calibration of two samples over the grid {32, 64, 128} (context 128), layers 0 and
// 1. Layer 0: sample 0 -> {0.5, 0.25, 0}, sample 1 -> {1.5, 0.75, 0}: at 32 the mean is 1 and the
// standard error sqrt(((0.5-1)^2 + (1.5-1)^2) / 1) / sqrt(2) = 0.5; at 64 mean 0.5, error 0.25;
// at 128 (the full cache) 0 and 0. Layer 1 is layer 0 times 2.
TEST(AssembleProfileTest, ResponsePointsAreHandComputed) {
  const double kl[2][3] = {{0.5, 0.25, 0.0}, {1.5, 0.75, 0.0}};
  std::vector<TrialKl> results;
  for (int64_t layer : {1, 0}) {
    for (int64_t sample : {1, 0}) {
      for (int64_t trial : {2, 0, 1}) {
        results.push_back({.sample = sample,
                           .layer = layer,
                           .trial = trial,
                           .kl = kl[sample][trial] * static_cast<double>(layer + 1)});
      }
    }
  }
  const SensitivityProfile sample = SampleProfile();
  ProfileParams params = sample.params;
  static_cast<CalibrationParams&>(params) = ResolveResponseGrid({.objective = Objective::kResponse,
                                                                 .samples = 2,
                                                                 .context_len = 128,
                                                                 .probe_len = 16,
                                                                 .budgets = {32, 64}});
  ASSERT_EQ(params.trials, 3);
  StatusOr<SensitivityProfile> p =
      AssembleProfile(sample.model, params, results, "2026-12-01T00:00:00Z");
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->layers.size(), 2u);
  for (const LayerSensitivity& l : p->layers) {
    SCOPED_TRACE(l.layer);
    const double scale = static_cast<double>(l.layer + 1);
    ASSERT_EQ(l.response.size(), 3u);
    EXPECT_EQ(l.response[0].budget, 32);
    EXPECT_EQ(l.response[0].mean_kl, 1.0 * scale);
    EXPECT_DOUBLE_EQ(l.response[0].std_error, 0.5 * scale);
    EXPECT_EQ(l.response[1].budget, 64);
    EXPECT_EQ(l.response[1].mean_kl, 0.5 * scale);
    EXPECT_DOUBLE_EQ(l.response[1].std_error, 0.25 * scale);
    EXPECT_EQ(l.response[2].budget, 128);
    EXPECT_EQ(l.response[2].mean_kl, 0.0);
    EXPECT_EQ(l.response[2].std_error, 0.0);
    // The layer's mean_kl is the mean over the grid (trial t is budget t).
    EXPECT_EQ(l.mean_kl, 0.5 * scale);
    EXPECT_EQ(l.count, 6);
  }
  // One sample: every standard error is 0.
  std::vector<TrialKl> one_sample;
  for (const TrialKl& r : results) {
    if (r.sample == 0) one_sample.push_back(r);
  }
  params.samples = 1;
  p = AssembleProfile(sample.model, params, one_sample, "2026-12-01T00:00:00Z");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->layers[0].response[0].mean_kl, 0.5);
  EXPECT_EQ(p->layers[0].response[0].std_error, 0.0);
  EXPECT_EQ(p->layers[0].response[1].std_error, 0.0);
}

// A per-head response of two samples over the sample model's 3 KV heads: head h at budget g of
// sample s measured (s + 1) * (h + 1) * {0.25, 0.125, 0}[g] in layer 0 (trial h * 3 + g).
// Head h's point at 32: mean over samples (h + 1) * 0.25 * 1.5, error (h + 1) * 0.25 * 0.5; the
// layer's point is the per-sample sum over the heads, (s + 1) * 6 * 0.25 -> mean 2.25, error 0.75.
TEST(AssembleProfileTest, PerHeadPointsAreHandComputedAndTheLayerIsTheirSum) {
  const double grid[3] = {0.25, 0.125, 0.0};
  std::vector<TrialKl> results;
  for (int64_t sample : {1, 0}) {
    for (int64_t h = 2; h >= 0; --h) {
      for (int64_t g : {1, 2, 0}) {
        results.push_back({.sample = sample,
                           .layer = 0,
                           .trial = h * 3 + g,
                           .kl = static_cast<double>((sample + 1) * (h + 1)) * grid[g]});
      }
    }
  }
  const SensitivityProfile sample = SampleProfile();
  ProfileParams params = sample.params;
  static_cast<CalibrationParams&>(params) = ResolveResponseGrid({.objective = Objective::kResponse,
                                                                 .samples = 2,
                                                                 .context_len = 128,
                                                                 .probe_len = 16,
                                                                 .budgets = {32, 64},
                                                                 .kv_heads = 3});
  ASSERT_EQ(params.trials, 9);
  StatusOr<SensitivityProfile> p =
      AssembleProfile(sample.model, params, results, "2026-12-01T00:00:00Z");
  ASSERT_TRUE(p.ok()) << p.status();
  const LayerSensitivity& l = p->layers.at(0);
  ASSERT_EQ(l.head_response.size(), 3u);
  for (size_t h = 0; h < 3; ++h) {
    SCOPED_TRACE(h);
    const double scale = static_cast<double>(h + 1);
    ASSERT_EQ(l.head_response[h].size(), 3u);
    EXPECT_EQ(l.head_response[h][0].budget, 32);
    EXPECT_DOUBLE_EQ(l.head_response[h][0].mean_kl, scale * 0.25 * 1.5);
    EXPECT_DOUBLE_EQ(l.head_response[h][0].std_error, scale * 0.25 * 0.5);
    EXPECT_DOUBLE_EQ(l.head_response[h][1].mean_kl, scale * 0.125 * 1.5);
    EXPECT_EQ(l.head_response[h][2].budget, 128);
    EXPECT_EQ(l.head_response[h][2].mean_kl, 0.0);
  }
  ASSERT_EQ(l.response.size(), 3u);
  EXPECT_DOUBLE_EQ(l.response[0].mean_kl, 2.25);
  EXPECT_DOUBLE_EQ(l.response[0].std_error, 0.75);
  EXPECT_DOUBLE_EQ(l.response[1].mean_kl, 1.125);
  EXPECT_EQ(l.response[2].mean_kl, 0.0);
  EXPECT_EQ(l.count, 18);
  // The per-layer grid's trial count does not match a per-head calibration's results.
  params.kv_heads = 0;
  params.trials = 3;
  StatusOr<SensitivityProfile> bad =
      AssembleProfile(sample.model, params, results, "2026-12-01T00:00:00Z");
  EXPECT_THAT(bad.status().message(),
              HasSubstr("params.budgets has 3 budgets, the results 9 trials per (sample, layer)"));
}

TEST(AssembleProfileTest, ResponsePointsAreBitIdenticalWhateverTheInputOrder) {
  // 9 samples, 4 layers, the grid {16, 32, 64, 128, 256} with the full cache's KL 0; values over
  // 11 decades, so another order of additions would change the bits.
  std::vector<TrialKl> results = RandomGrid(/*samples=*/9, /*layers=*/4, /*trials=*/5, 11);
  for (TrialKl& r : results) {
    if (r.trial == 4) r.kl = 0.0;
  }
  const SensitivityProfile sample = SampleProfile();
  ProfileParams params = sample.params;
  static_cast<CalibrationParams&>(params) = ResolveResponseGrid({.objective = Objective::kResponse,
                                                                 .samples = 9,
                                                                 .context_len = 256,
                                                                 .selector = ResponseSelector::kH2o,
                                                                 .budgets = {16, 32, 64, 128}});
  StatusOr<SensitivityProfile> reference =
      AssembleProfile(sample.model, params, results, "2026-12-01T00:00:00Z");
  ASSERT_TRUE(reference.ok()) << reference.status();
  std::mt19937_64 rng(12);
  for (int round = 0; round < 20; ++round) {
    std::shuffle(results.begin(), results.end(), rng);
    StatusOr<SensitivityProfile> shuffled =
        AssembleProfile(sample.model, params, results, "2026-12-01T00:00:00Z");
    ASSERT_TRUE(shuffled.ok()) << shuffled.status();
    ExpectSameProfile(*reference, *shuffled);
  }
  EXPECT_EQ(reference->layers[3].response[4].budget, 256);
}

TEST(AssembleProfileTest, NoiseProfileHasNoResponse) {
  const SensitivityProfile sample = SampleProfile();
  StatusOr<SensitivityProfile> p =
      AssembleProfile(sample.model, sample.params, RandomGrid(3, 4, 2, 13), "2026-12-01T00:00:00Z");
  ASSERT_TRUE(p.ok()) << p.status();
  for (const LayerSensitivity& l : p->layers) EXPECT_TRUE(l.response.empty());
}

TEST(AssembleProfileTest, ResponseNeedsOneTrialPerBudget) {
  const SensitivityProfile sample = SampleProfile();
  ProfileParams params = sample.params;
  static_cast<CalibrationParams&>(params) = ResolveResponseGrid(
      {.objective = Objective::kResponse, .samples = 3, .budgets = {32, 64}});  // {32, 64, 512}
  std::vector<TrialKl> results = RandomGrid(3, 2, 2, 14);
  StatusOr<SensitivityProfile> p =
      AssembleProfile(sample.model, params, results, "2026-12-01T00:00:00Z");
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(p.status().message(),
              HasSubstr("a response profile has one trial per budget: params.budgets has 3 "
                        "budgets, the results 2 trials per (sample, layer)"));
  // Three trials, but numbered past the grid.
  results = RandomGrid(3, 2, 3, 14);
  for (TrialKl& r : results) {
    if (r.trial == 2) r.trial = 7;
  }
  p = AssembleProfile(sample.model, params, results, "2026-12-01T00:00:00Z");
  EXPECT_THAT(p.status().message(),
              HasSubstr("(sample 0, layer 0, trial 7) is past the response grid's 3 budgets"));
  // A full-cache KL that is not 0 fails the profile's validation.
  results = RandomGrid(3, 2, 3, 14);
  p = AssembleProfile(sample.model, params, results, "2026-12-01T00:00:00Z");
  EXPECT_THAT(p.status().message(), HasSubstr("must be 0 at the full cache (budget 512)"));
}

TEST(AggregateProfileTest, RejectsBadResults) {
  auto error = [](std::vector<TrialKl> results) {
    StatusOr<std::vector<LayerSensitivity>> layers = AggregateProfile(results);
    EXPECT_FALSE(layers.ok());
    EXPECT_EQ(layers.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(layers.status().message());
  };
  EXPECT_THAT(error({}), HasSubstr("no trial results"));
  EXPECT_THAT(error({{0, 0, 0, 0.1}, {0, 0, 0, 0.2}}),
              HasSubstr("duplicate result for (sample 0, layer 0, trial 0)"));
  EXPECT_THAT(error({{0, 1, 0, -0.1}}), HasSubstr("at (sample 0, layer 1, trial 0): KL -0.1"));
  EXPECT_THAT(error({{0, 1, 0, std::nan("")}}), HasSubstr("must be finite"));
  EXPECT_THAT(error({{0, 1, 0, 1e308}}), HasSubstr("<= 10000 nats"));
  EXPECT_THAT(error({{0, 1, 0, std::numeric_limits<double>::infinity()}}),
              HasSubstr("must be finite"));
  EXPECT_THAT(error({{0, -1, 0, 0.1}}), HasSubstr("negative index"));
  // Sample 1 of layer 0 lacks trial 1.
  EXPECT_THAT(error({{0, 0, 0, 0.1}, {0, 0, 1, 0.1}, {1, 0, 0, 0.1}}),
              HasSubstr("(sample 1, layer 0) has 1 trials, expected 2"));
  // Layer 1 lacks sample 1.
  EXPECT_THAT(error({{0, 0, 0, 0.1}, {1, 0, 0, 0.1}, {0, 1, 0, 0.1}}),
              HasSubstr("layer 1 has 1 samples, layer 0 has 2"));
}

}  // namespace
}  // namespace ripplekv::method
