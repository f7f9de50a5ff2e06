// The rollout and rollout node values (store/codec.h; docs/STORE.md): every field round-trips,
// the text is what docs/STORE.md shows, and decoding is strict.

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "store/codec.h"
#include "tests/store/rollout_samples.h"

namespace ripplekv::store {
namespace {

using ::ripplekv::store::testing::SampleNode;
using ::ripplekv::store::testing::SampleRollout;
using ::testing::HasSubstr;

void ExpectDataLoss(const Status& s, const std::string& names) {
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr(names));
}

TEST(RolloutCodecTest, EveryFieldRoundTrips) {
  RolloutRecord r = SampleRollout("model");
  r.id = 9;
  r.previous_version = "fedcba9876543210";
  r.stages = {{.nodes = 2}, {.percent = 33.3}, {.percent = 100}};
  r.soak_ms = 1'500;
  r.min_ack_share = 0.1;
  r.state = RolloutState::kRolledBack;
  r.stage = 1;
  r.pause_reason = "nœud \"n1\" failed\n";
  StatusOr<std::string> encoded = EncodeRollout(r);
  ASSERT_TRUE(encoded.ok()) << encoded.status();
  StatusOr<RolloutRecord> decoded = DecodeRollout(9, *encoded);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, r);

  RolloutNodeRecord n = SampleNode("n1", NodeMapState::kFailed);
  n.in_rollout = false;
  StatusOr<std::string> node = EncodeRolloutNode(n);
  ASSERT_TRUE(node.ok()) << node.status();
  EXPECT_EQ(*DecodeRolloutNode("n1", *node), n);
}

TEST(RolloutCodecTest, ValuesAreTheDocumentedJson) {
  EXPECT_EQ(*EncodeRollout(SampleRollout()),
            R"({"created_at_ms":1700000000000,"map_version":"0123456789abcdef",)"
            R"("min_ack_share":1.0,"model_hash":"ab","pause_reason":"","previous_version":"",)"
            R"("soak_ms":0,"stage":0,"stage_started_at_ms":1700000000000,)"
            R"("stage_timeout_ms":300000,"stages":[{"nodes":1},{"percent":100.0}],)"
            R"("state":"running","updated_at_ms":1700000000000,"v":1})");
  EXPECT_EQ(*EncodeRolloutNode(SampleNode("n1", NodeMapState::kApplied)),
            R"({"assigned_version":"0123456789abcdef","error":"",)"
            R"("held_version":"0123456789abcdef","in_rollout":true,"state":"applied",)"
            R"("updated_at_ms":1700000000500,"v":1})");
}

TEST(RolloutCodecTest, DecodingIsStrict) {
  const std::string good = *EncodeRollout(SampleRollout());
  const auto replaced = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    s.replace(s.find(from), from.size(), to);
    return s;
  };
  ExpectDataLoss(DecodeRollout(1, replaced(R"("v":1)", R"("v":2)")).status(),
                 "value format version 2");
  ExpectDataLoss(DecodeRollout(1, replaced(R"("stage":0,)", "")).status(),
                 "field 'stage' is missing");
  ExpectDataLoss(DecodeRollout(1, replaced(R"("stage":0,)", R"("stage":0,"extra":1,)")).status(),
                 "field 'extra' is not a known field");
  ExpectDataLoss(DecodeRollout(1, replaced(R"("running")", R"("resting")")).status(),
                 "field 'state' has an unknown value 'resting'");
  ExpectDataLoss(DecodeRollout(1, replaced(R"({"nodes":1})", R"({"nodes":0})")).status(),
                 "field 'stages[0].nodes' is 0");
  ExpectDataLoss(
      DecodeRollout(1, replaced(R"({"nodes":1})", R"({"nodes":1,"percent":5})")).status(),
      "stages[0] has both nodes and percent");
  ExpectDataLoss(DecodeRollout(1, replaced(R"({"nodes":1})", R"({"count":1})")).status(),
                 "field 'stages[0].count' is not a known field");
  ExpectDataLoss(DecodeRollout(1, replaced(R"("stage":0)", R"("stage":2)")).status(),
                 "stage is 2, not an index into 2 stages");
  ExpectDataLoss(
      DecodeRollout(1, replaced(R"("min_ack_share":1.0)", R"("min_ack_share":0)")).status(),
      "min_ack_share is 0, outside (0, 1]");
  ExpectDataLoss(DecodeRolloutNode("n1", R"({"v":1,"state":"applied"})").status(), "is missing");
  ExpectDataLoss(DecodeRolloutNode("n1", "not json").status(), "not valid JSON");
}

}  // namespace
}  // namespace ripplekv::store
