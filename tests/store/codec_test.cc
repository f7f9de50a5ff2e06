#include "store/codec.h"

#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace ripplekv::store {
namespace {

Job FullJob() {
  Job job;
  job.id = 42;
  job.spec.model_path = "/models/smöllm2 \"q4\".gguf";
  job.spec.model_hash = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
  job.spec.data_inline = "{\"text\": \"line one\"}\n{\"text\": \"two\\u0000\"}\n";
  job.spec.data_path = "";
  job.spec.data_format = DataFormat::kJsonl;
  job.spec.data_strict = true;
  job.spec.params = {.mode = method::PerturbMode::kPrefill,
                     .alpha = 0.1,
                     .trials = 7,
                     .seed = std::numeric_limits<uint64_t>::max(),
                     .samples = 16,
                     .context_len = 1024,
                     .probe_len = 64,
                     .layers = {0, 5, 29},
                     .data_seed = 0xfeedfacecafebeefull,
                     .until_stable = true,
                     .max_samples = 48};
  job.spec.priority = -3;
  job.spec.idempotency_key = "req-✓-17";
  job.spec.verify_fraction = 0.25;
  job.state = JobState::kFailed;
  job.created_at_ms = 1'700'000'000'123;
  job.updated_at_ms = 1'700'000'999'999;
  job.tasks_total = 90;
  job.tasks_done = 12;
  job.results_stored = 84;
  job.duplicate_results = 5;
  job.conflicting_results = 1;
  job.profile_version = 0;
  job.error = "worker w3: model hash mismatch";
  job.data_description = "sherlock-holmes@0: 8 samples of 512 + 32 tokens, fingerprint 0123";
  job.samples_planned = 32;
  return job;
}

Status DecodeJobText(const std::string& text) { return DecodeJob(1, text).status(); }

TEST(StoreCodecTest, JobRoundTripsEveryField) {
  const Job job = FullJob();
  StatusOr<std::string> encoded = EncodeJob(job);
  ASSERT_TRUE(encoded.ok()) << encoded.status();
  StatusOr<Job> decoded = DecodeJob(job.id, *encoded);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_TRUE(decoded->spec.data_inline.empty());  // kept in its own record
  decoded->spec.data_inline = job.spec.data_inline;
  EXPECT_EQ(*decoded, job);

  StatusOr<std::string> data = EncodeJobData(job.spec.data_inline);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(encoded->find("line one"), std::string::npos);
  StatusOr<std::string> data_back = DecodeJobData(*data);
  ASSERT_TRUE(data_back.ok()) << data_back.status();
  EXPECT_EQ(*data_back, job.spec.data_inline);
}

TEST(StoreCodecTest, JobRecordsWrittenBeforeTheDataFieldsReadWithDefaults) {
  Job job = FullJob();
  job.spec.data_format = DataFormat::kText;
  job.spec.data_strict = true;
  job.spec.data_builtin = "tom-sawyer";
  StatusOr<std::string> encoded = EncodeJob(job);
  ASSERT_TRUE(encoded.ok()) << encoded.status();
  nlohmann::json j = nlohmann::json::parse(*encoded);
  ASSERT_EQ(j["spec"]["data_format"], "text");
  ASSERT_EQ(j["spec"]["data_builtin"], "tom-sawyer");
  for (const char* field : {"data_format", "data_strict", "data_builtin"}) j["spec"].erase(field);
  StatusOr<Job> decoded = DecodeJob(job.id, j.dump());
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->spec.data_format, DataFormat::kAuto);
  EXPECT_FALSE(decoded->spec.data_strict);
  EXPECT_TRUE(decoded->spec.data_builtin.empty());
  j["spec"]["data_format"] = "yaml";
  StatusOr<Job> bad = DecodeJob(job.id, j.dump());
  ASSERT_TRUE(absl::IsDataLoss(bad.status()));
  EXPECT_NE(bad.status().message().find("spec.data_format"), std::string_view::npos);
}

// Job records exactly as the build before the one codec of the calibration parameters
// (method/calibration_params_json.h) wrote them: they read with every value, and encode again
// byte for byte, so the stored form did not change.
TEST(StoreCodecTest, JobRecordsOfTheEarlierCodecReadAndEncodeByteForByte) {
  const std::string until_stable =
      R"({"conflicting_results":0,"created_at_ms":1700000000123,"data_description":"",)"
      R"("duplicate_results":0,"error":"","profile_version":0,"results_stored":9,)"
      R"("samples_planned":8,"spec":{"data_builtin":"","data_format":"text",)"
      R"("data_path":"/data/calib.txt","data_strict":false,"idempotency_key":"k",)"
      R"("model_hash":"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",)"
      R"("model_path":"/models/smollm2.gguf","params":{"alpha":0.10000000149011612,)"
      R"("context_len":256,"data_seed":9,"layers":[0,5,29],"max_samples":12,"mode":"prefill",)"
      R"("probe_len":16,"samples":4,"seed":18446744073709551615,"trials":3,"until_stable":true},)"
      R"("priority":2},"state":"running","tasks_done":3,"tasks_total":24,)"
      R"("updated_at_ms":1700000000456,"v":1})";
  StatusOr<Job> job = DecodeJob(7, until_stable);
  ASSERT_TRUE(job.ok()) << job.status();
  const method::CalibrationParams want{.mode = method::PerturbMode::kPrefill,
                                       .alpha = static_cast<double>(0.1f),
                                       .trials = 3,
                                       .seed = std::numeric_limits<uint64_t>::max(),
                                       .samples = 4,
                                       .context_len = 256,
                                       .probe_len = 16,
                                       .layers = {0, 5, 29},
                                       .data_seed = 9,
                                       .until_stable = true,
                                       .max_samples = 12};
  EXPECT_EQ(job->spec.params, want);
  EXPECT_EQ(job->samples_planned, 8u);
  EXPECT_EQ(*EncodeJob(*job), until_stable);

  const std::string plain =
      R"({"conflicting_results":0,"created_at_ms":0,"data_description":"",)"
      R"("duplicate_results":0,"error":"","profile_version":0,"results_stored":0,)"
      R"("spec":{"data_builtin":"","data_format":"auto","data_path":"","data_strict":false,)"
      R"("idempotency_key":"",)"
      R"("model_hash":"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",)"
      R"("model_path":"m","params":{"alpha":0.5,"context_len":512,"layers":[],"mode":"cache",)"
      R"("probe_len":32,"samples":8,"seed":0,"trials":2},"priority":0},"state":"pending",)"
      R"("tasks_done":0,"tasks_total":0,"updated_at_ms":0,"v":1})";
  job = DecodeJob(8, plain);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->spec.params, method::CalibrationParams());
  EXPECT_EQ(*EncodeJob(*job), plain);
}

TEST(StoreCodecTest, JobRecordsWrittenBeforeTheRoundFieldsReadWithDefaults) {
  const Job job = FullJob();
  StatusOr<std::string> encoded = EncodeJob(job);
  ASSERT_TRUE(encoded.ok()) << encoded.status();
  nlohmann::json j = nlohmann::json::parse(*encoded);
  ASSERT_EQ(j["spec"]["params"]["max_samples"], 48);
  ASSERT_EQ(j["samples_planned"], 32);
  for (const char* field : {"data_seed", "until_stable", "max_samples"}) {
    j["spec"]["params"].erase(field);
  }
  j.erase("samples_planned");
  StatusOr<Job> decoded = DecodeJob(job.id, j.dump());
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->spec.params.data_seed, 0u);
  EXPECT_FALSE(decoded->spec.params.until_stable);
  EXPECT_EQ(decoded->spec.params.max_samples, method::CalibrationParams().max_samples);
  EXPECT_EQ(decoded->samples_planned, job.spec.params.samples);  // absent: as submitted
  j["spec"]["params"]["until_stable"] = "yes";
  StatusOr<Job> bad = DecodeJob(job.id, j.dump());
  ASSERT_TRUE(absl::IsDataLoss(bad.status()));
  EXPECT_NE(bad.status().message().find("spec.params.until_stable"), std::string_view::npos);
}

// A job that uses none of the round fields encodes exactly as before they existed, so a build
// that predates them still reads it.
TEST(StoreCodecTest, JobsWithoutRoundsOrADataSeedEncodeWithoutTheNewFields) {
  Job job = FullJob();
  job.spec.params.data_seed = 0;
  job.spec.params.until_stable = false;
  job.spec.params.max_samples = method::CalibrationParams().max_samples;
  job.spec.verify_fraction = 0;
  job.samples_planned = job.spec.params.samples;
  StatusOr<std::string> encoded = EncodeJob(job);
  ASSERT_TRUE(encoded.ok()) << encoded.status();
  for (const char* field : {"data_seed", "until_stable", "max_samples", "samples_planned",
                            "verify_fraction", "objective", "selector", "budgets"}) {
    EXPECT_EQ(encoded->find(field), std::string::npos) << field << " in " << *encoded;
  }
  StatusOr<Job> decoded = DecodeJob(job.id, *encoded);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  decoded->spec.data_inline = job.spec.data_inline;
  EXPECT_EQ(*decoded, job);
}

// A response job (objective, selector and its resolved grid) is stored and read back whole.
TEST(StoreCodecTest, ResponseJobRoundTripsWithItsGrid) {
  Job job = FullJob();
  job.spec.params = method::ResolveResponseGrid({.objective = method::Objective::kResponse,
                                                 .samples = 16,
                                                 .context_len = 1024,
                                                 .probe_len = 64,
                                                 .layers = {0, 5, 29},
                                                 .selector = method::ResponseSelector::kStreaming,
                                                 .budgets = {8, 64}});
  ASSERT_EQ(job.spec.params.budgets, (std::vector<int64_t>{8, 64, 1024}));
  StatusOr<std::string> encoded = EncodeJob(job);
  ASSERT_TRUE(encoded.ok()) << encoded.status();
  nlohmann::json j = nlohmann::json::parse(*encoded);
  EXPECT_EQ(j["spec"]["params"]["objective"], "response");
  EXPECT_EQ(j["spec"]["params"]["selector"], "streaming");
  EXPECT_EQ(j["spec"]["params"]["budgets"], nlohmann::json::parse("[8, 64, 1024]"));
  StatusOr<Job> decoded = DecodeJob(job.id, *encoded);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  decoded->spec.data_inline = job.spec.data_inline;
  EXPECT_EQ(*decoded, job);

  j["spec"]["params"]["selector"] = "quest";
  StatusOr<Job> bad = DecodeJob(job.id, j.dump());
  ASSERT_TRUE(absl::IsDataLoss(bad.status())) << bad.status();
  EXPECT_NE(bad.status().message().find("spec.params.selector: unknown selector \"quest\""),
            std::string_view::npos)
      << bad.status();
}

TEST(StoreCodecTest, TaskRoundTripsAndKeyFieldsComeFromTheKey) {
  const Task task{.key = {.job = 9, .sample = 3, .layer = 300},
                  .state = TaskState::kLeased,
                  .lease_owner = "worker-a",
                  .lease_deadline_ms = 1234567890123,
                  .attempts = 3};
  StatusOr<std::string> encoded = EncodeTask(task);
  ASSERT_TRUE(encoded.ok()) << encoded.status();
  StatusOr<Task> decoded = DecodeTask(task.key, *encoded);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, task);
}

TEST(StoreCodecTest, ResultValuesKeepTheExactBitsOfEveryFiniteDouble) {
  std::mt19937_64 rng(7);
  std::vector<double> values = {0.0,
                                -0.0,
                                1.0,
                                0.1,
                                1e-310,
                                std::numeric_limits<double>::max(),
                                std::numeric_limits<double>::denorm_min(),
                                3.141592653589793};
  while (values.size() < 5000) {
    const double d = std::bit_cast<double>(rng());
    if (std::isfinite(d)) values.push_back(d);
  }
  for (double d : values) {
    StatusOr<double> back = DecodeResultValue(EncodeResultValue(d));
    ASSERT_TRUE(back.ok()) << back.status();
    ASSERT_EQ(std::bit_cast<uint64_t>(*back), std::bit_cast<uint64_t>(d)) << d;
  }
}

TEST(StoreCodecTest, ProfileAndBudgetMapRoundTrip) {
  const ProfileVersion profile{.model_hash = "ab",
                               .version = 3,
                               .profile_json = R"({"layers": [1.5, 2]})",
                               .job = 12,
                               .created_at_ms = 55};
  StatusOr<std::string> p = EncodeProfile(profile);
  ASSERT_TRUE(p.ok()) << p.status();
  StatusOr<ProfileVersion> p2 = DecodeProfile({.model_hash = "ab", .version = 3}, *p);
  ASSERT_TRUE(p2.ok()) << p2.status();
  EXPECT_EQ(*p2, profile);

  const BudgetMapRecord map{.model_hash = "ab",
                            .version = 8,
                            .profile_version = 3,
                            .budget_json = R"({"budgets": [64, 128]})",
                            .digest = BudgetMapDigest(R"({"budgets": [64, 128]})"),
                            .created_at_ms = 77};
  StatusOr<std::string> m = EncodeBudgetMap(map);
  ASSERT_TRUE(m.ok()) << m.status();
  StatusOr<BudgetMapRecord> m2 = DecodeBudgetMap({.model_hash = "ab", .version = 8}, *m);
  ASSERT_TRUE(m2.ok()) << m2.status();
  EXPECT_EQ(*m2, map);
}

TEST(StoreCodecTest, BudgetMapDigestIsTheFirst16HexDigitsOfSha256) {
  // sha256("") = e3b0c44298fc1c14 9afbf4c8996fb924...; sha256("{}") = 44136fa355b3678a ...
  EXPECT_EQ(BudgetMapDigest(""), "e3b0c44298fc1c14");
  EXPECT_EQ(BudgetMapDigest("{}"), "44136fa355b3678a");
  EXPECT_TRUE(IsMapDigest(BudgetMapDigest(R"({"b": [1]})")));
}

TEST(StoreCodecTest, BudgetMapWhoseDigestDoesNotMatchItsBytesIsDataLoss) {
  const VersionKeyParts key{.model_hash = "ab", .version = 1};
  const Status s = DecodeBudgetMap(key, R"({"v":1,"profile_version":1,"budget_json":"[]",)"
                                        R"("digest":"44136fa355b3678a","created_at_ms":1})")
                       .status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(s.message(),
            "field 'digest' is '44136fa355b3678a'; budget_json's is '4f53cda18c2baa0c'");
  // A record of schema version 2 has no digest: DataLoss here, read by the migration only.
  const std::string old = R"({"v":1,"profile_version":1,"budget_json":"{}","created_at_ms":1})";
  EXPECT_EQ(DecodeBudgetMap(key, old).status().message(), "field 'digest' is missing");
  StatusOr<BudgetMapRecord> migrated = DecodeV2BudgetMap(key, old);
  ASSERT_TRUE(migrated.ok()) << migrated.status();
  EXPECT_EQ(migrated->digest, "44136fa355b3678a");
  EXPECT_EQ(migrated->budget_json, "{}");
  EXPECT_EQ(migrated->created_at_ms, 1);
}

TEST(StoreCodecTest, MalformedValuesAreDataLossNamingTheField) {
  struct Case {
    std::string value;
    std::string expect;  // substring of the message
  };
  const std::vector<Case> cases = {
      {"", "not valid JSON"},
      {"{\"v\":1", "not valid JSON"},
      {"[1,2]", "not a JSON object"},
      {R"({"kl": 1.0})", "field 'v' is missing"},
      {R"({"v": 2, "kl": 1.0})", "value format version 2; this build reads 1"},
      {R"({"v": 1})", "field 'kl' is missing"},
      {R"({"v": 1, "kl": "1.0"})", "field 'kl' is not a number"},
      {R"({"v": 1, "kl": 1.0, "extra": true})", "field 'extra' is not a known field"},
  };
  for (const Case& c : cases) {
    const Status s = DecodeResultValue(c.value).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << c.value;
    EXPECT_NE(s.message().find(c.expect), absl::string_view::npos) << c.value << " -> " << s;
  }
}

TEST(StoreCodecTest, MalformedJobFieldsAreDataLossWithTheirPath) {
  const std::string good = *EncodeJob(FullJob());
  auto with = [&](const std::string& from, const std::string& to) {
    std::string text = good;
    const size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) text.replace(at, from.size(), to);
    return text;
  };
  struct Case {
    std::string value;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {with("\"trials\":7", "\"trials\":7.5"),
       "stored job: spec.params.trials: expected an integer, got number"},
      {with("\"seed\":18446744073709551615", "\"seed\":-1"),
       "stored job: spec.params.seed: integer -1 is negative"},
      {with("\"mode\":\"prefill\"", "\"mode\":\"other\""),
       "stored job: spec.params.mode: unknown mode \"other\""},
      {with("\"layers\":[0,5,29]", "\"layers\":[0,\"5\"]"),
       "stored job: spec.params.layers[1]: expected an integer, got string"},
      {with("\"probe_len\":64", "\"probe\":64"), "stored job: spec.params.probe: unknown field"},
      {with("\"priority\":-3", "\"priority\":3000000000"), "field 'spec.priority' is 3000000000"},
      {with("\"state\":\"failed\"", "\"state\":7"), "field 'state' is not a string"},
      {with("\"tasks_done\":12", "\"tasks_done\":91"), "'tasks_done' is 91, above tasks_total 90"},
      {with("\"error\":", "\"err\":"), "field 'err' is not a known field"},
  };
  for (const Case& c : cases) {
    const Status s = DecodeJobText(c.value);
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << c.value;
    EXPECT_NE(s.message().find(c.expect), absl::string_view::npos) << c.expect << " -> " << s;
  }
}

TEST(StoreCodecTest, LeasedTaskWithoutOwnerIsDataLoss) {
  const Status s =
      DecodeTask({.job = 1}, R"({"v":1,"state":"leased","lease_owner":"","lease_deadline_ms":5,)"
                             R"("attempts":1})")
          .status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("lease_owner"), absl::string_view::npos) << s;
}

TEST(StoreCodecTest, InvalidUtf8IsInvalidArgumentNamingFieldAndOffset) {
  Job job = FullJob();
  job.spec.data_path = std::string("data/\xC3\x28.jsonl");  // a broken two-byte sequence
  const Status s = EncodeJob(job).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "spec.data_path is not valid UTF-8 (byte offset 5)");
  EXPECT_EQ(EncodeJobData("ok\xFF").status().message(),
            "spec.data_inline is not valid UTF-8 (byte offset 2)");

  EXPECT_FALSE(CheckUtf8("\xC0\x80", "x").ok());          // overlong NUL
  EXPECT_FALSE(CheckUtf8("\xED\xA0\x80", "x").ok());      // UTF-16 surrogate
  EXPECT_FALSE(CheckUtf8("\xF4\x90\x80\x80", "x").ok());  // above U+10FFFF
  EXPECT_FALSE(CheckUtf8("abc\xE2\x9C", "x").ok());       // truncated
  EXPECT_TRUE(CheckUtf8("plain ✓ 𝄞", "x").ok());
}

TEST(StoreCodecTest, NonFiniteAlphaIsInvalidArgument) {
  Job job = FullJob();
  job.spec.params.alpha = std::nan("");
  EXPECT_EQ(EncodeJob(job).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(StoreCodecTest, CheckJsonDocumentAcceptsOnlyOneCompleteDocument) {
  EXPECT_TRUE(CheckJsonDocument(R"({"a": [1, 2]})", "doc").ok());
  const Status s = CheckJsonDocument(R"({"a": )", "profile_json");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("profile_json is not a JSON document"), absl::string_view::npos) << s;
  EXPECT_FALSE(CheckJsonDocument("{} {}", "doc").ok());
  EXPECT_FALSE(CheckJsonDocument("", "doc").ok());
}

}  // namespace
}  // namespace ripplekv::store
