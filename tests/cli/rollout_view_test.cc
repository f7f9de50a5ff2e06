// The pure parts of `ripplekv map` and `ripplekv rollout` (cli/rollout_view.h): flag parsing and
// the text the commands print.
#include "cli/rollout_view.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "method/budget_map.h"
#include "method/frozen_map.h"

namespace ripplekv::cli {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// ---------------------------------------------------------------------------------------------
// --stages

TEST(ParseStageListTest, CountsAndPercentsInOrder) {
  auto stages = ParseStageList("1,10%,50%,100%", "--stages");
  ASSERT_TRUE(stages.ok()) << stages.status();
  ASSERT_EQ(stages->size(), 4u);
  EXPECT_TRUE((*stages)[0].has_nodes());
  EXPECT_EQ((*stages)[0].nodes(), 1);
  EXPECT_TRUE((*stages)[1].has_percent());
  EXPECT_DOUBLE_EQ((*stages)[1].percent(), 10.0);
  EXPECT_DOUBLE_EQ((*stages)[2].percent(), 50.0);
  EXPECT_DOUBLE_EQ((*stages)[3].percent(), 100.0);
}

TEST(ParseStageListTest, AcceptsSpacesAndFractionalPercents) {
  auto stages = ParseStageList(" 2 , 12.5% ,40", "--stages");
  ASSERT_TRUE(stages.ok()) << stages.status();
  ASSERT_EQ(stages->size(), 3u);
  EXPECT_EQ((*stages)[0].nodes(), 2);
  EXPECT_DOUBLE_EQ((*stages)[1].percent(), 12.5);
  EXPECT_EQ((*stages)[2].nodes(), 40);
}

TEST(ParseStageListTest, RejectsMalformedListsNamingTheFlag) {
  const std::vector<std::string> bad = {
      "",     "  ",     "1,,10%", "1,", "0",   "-1",   "+3",   "abc",        "1.5",   "0%", "0.0%",
      "150%", "100.5%", "10%%",   "%",  "-5%", "1e2%", "nan%", "3000000000", "10 %x", "1;2"};
  for (const std::string& text : bad) {
    auto stages = ParseStageList(text, "--stages");
    ASSERT_FALSE(stages.ok()) << "accepted \"" << text << "\"";
    EXPECT_EQ(stages.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(std::string(stages.status().message()), StartsWith("--stages: ")) << text;
  }
}

TEST(ParseStageListTest, MessageSaysWhichStageAndWhy) {
  auto stages = ParseStageList("1,150%", "--stages");
  ASSERT_FALSE(stages.ok());
  EXPECT_THAT(std::string(stages.status().message()), HasSubstr("stage 2"));
  EXPECT_THAT(std::string(stages.status().message()), HasSubstr("(0%, 100%]"));
}

TEST(ParseStageListTest, AtMostSixteenStages) {
  std::string sixteen = "1";
  for (int i = 2; i <= 16; ++i) sixteen += "," + std::to_string(i);
  EXPECT_TRUE(ParseStageList(sixteen, "--stages").ok());
  EXPECT_FALSE(ParseStageList(sixteen + ",17", "--stages").ok());
}

// ---------------------------------------------------------------------------------------------
// Durations

TEST(ParseDurationTest, UnitsAndCompounds) {
  const std::vector<std::pair<std::string, int64_t>> good = {
      {"0", 0},          {"0s", 0},       {"500ms", 500},     {"30s", 30000},
      {"5m", 300000},    {"2h", 7200000}, {"1h30m", 5400000}, {"1m30s", 90000},
      {"1s250ms", 1250}, {"90s", 90000},  {"007s", 7000}};
  for (const auto& [text, ms] : good) {
    auto d = ParseDuration(text, "--soak");
    ASSERT_TRUE(d.ok()) << text << ": " << d.status();
    EXPECT_EQ(d->count(), ms) << text;
  }
}

TEST(ParseDurationTest, RejectsMalformedDurationsNamingTheFlag) {
  const std::vector<std::string> bad = {"",
                                        "5",
                                        "5x",
                                        "s",
                                        "ms",
                                        "-5s",
                                        "1.5s",
                                        "5 s",
                                        " 5s",
                                        "5s ",
                                        "5S",
                                        "1d",
                                        "5sec",
                                        "m5",
                                        "5mss",
                                        "9999999999999999999h",
                                        "3000000000000h"};
  for (const std::string& text : bad) {
    auto d = ParseDuration(text, "--stage-timeout");
    ASSERT_FALSE(d.ok()) << "accepted \"" << text << "\"";
    EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(std::string(d.status().message()), StartsWith("--stage-timeout: ")) << text;
  }
}

TEST(FormatDurationTest, ShortestReadableForm) {
  EXPECT_EQ(FormatDuration(milliseconds(0)), "0s");
  EXPECT_EQ(FormatDuration(milliseconds(-5)), "0s");
  EXPECT_EQ(FormatDuration(milliseconds(500)), "500ms");
  EXPECT_EQ(FormatDuration(milliseconds(1500)), "1.5s");
  EXPECT_EQ(FormatDuration(milliseconds(1005)), "1.005s");
  EXPECT_EQ(FormatDuration(milliseconds(30000)), "30s");
  EXPECT_EQ(FormatDuration(milliseconds(90000)), "1m30s");
  EXPECT_EQ(FormatDuration(milliseconds(300000)), "5m");
  EXPECT_EQ(FormatDuration(milliseconds(3600000)), "1h");
  EXPECT_EQ(FormatDuration(milliseconds(3605000)), "1h0m5s");
  EXPECT_EQ(FormatDuration(milliseconds(5400000)), "1h30m");
}

TEST(FormatDurationTest, ParsesBackToTheSameDuration) {
  for (int64_t ms : {1, 999, 1000, 59000, 60000, 61000, 3599000, 3600000, 3661000, 86400000}) {
    auto back = ParseDuration(FormatDuration(milliseconds(ms)), "--soak");
    ASSERT_TRUE(back.ok()) << ms << ": " << back.status();
    EXPECT_EQ(back->count(), ms);
  }
}

// ---------------------------------------------------------------------------------------------
// Other flags

TEST(ParseKeyValueTest, SplitsAtTheFirstEquals) {
  auto kv = ParseKeyValue("window=32", "--selection-param");
  ASSERT_TRUE(kv.ok());
  EXPECT_EQ(kv->first, "window");
  EXPECT_EQ(kv->second, "32");
  kv = ParseKeyValue("expr=a=b", "--selection-param");
  ASSERT_TRUE(kv.ok());
  EXPECT_EQ(kv->first, "expr");
  EXPECT_EQ(kv->second, "a=b");
  kv = ParseKeyValue("empty=", "--selection-param");
  ASSERT_TRUE(kv.ok());
  EXPECT_EQ(kv->second, "");
  for (const char* bad : {"window", "=32", ""}) {
    auto r = ParseKeyValue(bad, "--selection-param");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_THAT(std::string(r.status().message()), StartsWith("--selection-param: "));
  }
}

TEST(CheckMapFormatTest, KnowsTheServingFormatsAndTheDocument) {
  for (const char* format : {"native", "kvpress", "trtllm", "document"}) {
    EXPECT_TRUE(CheckMapFormat(format, "--format").ok()) << format;
  }
  for (const char* format : {"json", "", "Native", "doc"}) {
    Status s = CheckMapFormat(format, "--format");
    ASSERT_FALSE(s.ok()) << format;
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.message()), StartsWith("--format: "));
  }
}

TEST(ServerErrorTest, NamesTheCodeAndKeepsIt) {
  Status s = ServerError(absl::NotFoundError("no map version abc"));
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "NOT_FOUND: no map version abc");
  EXPECT_TRUE(ServerError(absl::OkStatus()).ok());
}

// ---------------------------------------------------------------------------------------------
// Rollout status

const char kHash[] = "3f2a9c1b04de77aa3f2a9c1b04de77aa3f2a9c1b04de77aa3f2a9c1b04de77aa";

v1::Rollout FourStageRollout() {
  v1::Rollout r;
  r.set_rollout_id("r12");
  r.set_model_hash(kHash);
  r.set_map_version("9a1b2c3d4e5f6a7b");
  r.set_previous_version("0011223344556677");
  r.add_stages()->set_nodes(1);
  r.add_stages()->set_percent(10);
  r.add_stages()->set_percent(50);
  r.add_stages()->set_percent(100);
  r.mutable_soak()->set_seconds(30);
  r.mutable_stage_timeout()->set_seconds(300);
  r.set_min_ack_share(0.9);
  r.set_connected_nodes(24);
  return r;
}

TEST(RolloutStatusTest, RunningStageWithSoakLeft) {
  v1::Rollout r = FourStageRollout();
  r.set_state(v1::ROLLOUT_STATE_RUNNING);
  r.set_stage(1);
  r.set_stage_nodes(3);
  r.set_acknowledged(3);
  r.mutable_soak_left()->set_seconds(11);
  r.mutable_soak_left()->set_nanos(200000000);  // 11.2 s: shown rounded up
  const std::vector<std::string> expected = {
      "rollout    r12",
      std::string("model      ") + kHash,
      "map        9a1b2c3d4e5f6a7b (previous 0011223344556677)",
      "state      RUNNING",
      "stage      2/4: 10% (3 nodes)",
      "nodes      3 acknowledged, 0 pending, 0 failed (advances at 90%)",
      "connected  24 nodes",
      "soak       30s (12s left)",
      "timeout    5m per stage",
  };
  EXPECT_EQ(RolloutStatusLines(r), expected);
  EXPECT_EQ(RolloutSummaryLine(r),
            "r12 RUNNING stage 2/4 (10%, 3 nodes): 3 acknowledged, 0 pending, 0 failed; "
            "24 connected; soak 12s left");
}

TEST(RolloutStatusTest, PausedShowsItsReason) {
  v1::Rollout r = FourStageRollout();
  r.set_previous_version("");
  r.set_state(v1::ROLLOUT_STATE_PAUSED);
  r.set_stage(0);
  r.set_stage_nodes(1);
  r.set_failed(1);
  r.set_pause_reason("node n3 failed: apply hook exited 3: bad config");
  const std::vector<std::string> lines = RolloutStatusLines(r);
  ASSERT_EQ(lines.size(), 10u);
  EXPECT_EQ(lines[2], "map        9a1b2c3d4e5f6a7b (previous none)");
  EXPECT_EQ(lines[3], "state      PAUSED");
  EXPECT_EQ(lines[4], "stage      1/4: 1 node");  // the count is the size: said once
  EXPECT_EQ(lines[5], "nodes      0 acknowledged, 0 pending, 1 failed (advances at 90%)");
  EXPECT_EQ(lines[7], "soak       30s");  // not soaking: no time left shown
  EXPECT_EQ(lines[9], "reason     node n3 failed: apply hook exited 3: bad config");
  EXPECT_EQ(RolloutSummaryLine(r),
            "r12 PAUSED stage 1/4 (1 node): 0 acknowledged, 0 pending, 1 failed; "
            "24 connected; reason: node n3 failed: apply hook exited 3: bad config");
}

TEST(RolloutStatusTest, SucceededOnItsLastStage) {
  v1::Rollout r = FourStageRollout();
  r.set_state(v1::ROLLOUT_STATE_SUCCEEDED);
  r.set_stage(3);
  r.set_stage_nodes(24);
  r.set_acknowledged(24);
  r.clear_soak();
  const std::vector<std::string> lines = RolloutStatusLines(r);
  ASSERT_EQ(lines.size(), 9u);
  EXPECT_EQ(lines[3], "state      SUCCEEDED");
  EXPECT_EQ(lines[4], "stage      4/4: 100% (24 nodes)");
  EXPECT_EQ(lines[5], "nodes      24 acknowledged, 0 pending, 0 failed (advances at 90%)");
  EXPECT_EQ(lines[7], "soak       0s");
  EXPECT_TRUE(IsFinished(r.state()));
  EXPECT_FALSE(IsFinished(v1::ROLLOUT_STATE_PAUSED));
  EXPECT_FALSE(IsFinished(v1::ROLLOUT_STATE_RUNNING));
  EXPECT_TRUE(IsFinished(v1::ROLLOUT_STATE_ROLLED_BACK));
}

TEST(RolloutStatusTest, NodeCountStageCoveringFewerNodesSaysSo) {
  v1::Rollout r = FourStageRollout();
  r.mutable_stages(0)->set_nodes(5);
  r.set_stage_nodes(2);  // only two nodes connected
  EXPECT_EQ(RolloutStatusLines(r)[4], "stage      1/4: 5 nodes (2 nodes)");
  EXPECT_THAT(RolloutSummaryLine(r), StartsWith("r12 UNSPECIFIED stage 1/4 (5 nodes, 2 nodes): "));
}

TEST(RolloutStatusTest, ChangeKeyIgnoresTheSoakCountdownOnly) {
  v1::Rollout a = FourStageRollout();
  a.set_state(v1::ROLLOUT_STATE_RUNNING);
  a.set_stage(1);
  a.set_stage_nodes(3);
  a.set_acknowledged(3);
  v1::Rollout b = a;
  a.mutable_soak_left()->set_seconds(20);
  b.mutable_soak_left()->set_seconds(19);
  EXPECT_NE(RolloutSummaryLine(a), RolloutSummaryLine(b));
  EXPECT_EQ(RolloutChangeKey(a), RolloutChangeKey(b));
  v1::Rollout not_soaking = b;
  not_soaking.clear_soak_left();
  EXPECT_NE(RolloutChangeKey(b), RolloutChangeKey(not_soaking));
  v1::Rollout one_more = b;
  one_more.set_failed(1);
  EXPECT_NE(RolloutChangeKey(b), RolloutChangeKey(one_more));
}

TEST(RolloutNodeTableTest, OneAlignedRowPerNode) {
  v1::Rollout r = FourStageRollout();
  v1::RolloutNode* n = r.add_nodes();
  n->set_node_id("node-a");
  n->set_in_rollout(true);
  n->set_assigned_version("9a1b2c3d4e5f6a7b");
  n->set_held_version("9a1b2c3d4e5f6a7b");
  n->set_state(v1::NODE_MAP_STATE_APPLIED);
  n->set_connected(true);
  n->mutable_update_time()->set_seconds(1700000000);
  n = r.add_nodes();
  n->set_node_id("node-bb");
  n->set_in_rollout(true);
  n->set_assigned_version("9a1b2c3d4e5f6a7b");
  n->set_state(v1::NODE_MAP_STATE_FAILED);
  n->set_error("apply hook exited 3: bad config");
  n->mutable_update_time()->set_seconds(1700000060);
  n = r.add_nodes();
  n->set_node_id("n3");
  n->set_assigned_version("0011223344556677");
  n->set_held_version("0011223344556677");
  n->set_state(v1::NODE_MAP_STATE_APPLIED);
  n->set_connected(true);
  const std::vector<std::string> expected = {
      "node     in rollout  assigned          held              state    connected  updated   "
      "            error",
      "node-a   yes         9a1b2c3d4e5f6a7b  9a1b2c3d4e5f6a7b  APPLIED  yes        "
      "2023-11-14T22:13:20Z  -",
      "node-bb  yes         9a1b2c3d4e5f6a7b  -                 FAILED   no         "
      "2023-11-14T22:14:20Z  apply hook exited 3: bad config",
      "n3       no          0011223344556677  0011223344556677  APPLIED  yes        -       "
      "              -",
  };
  EXPECT_EQ(RolloutNodeTable(r), expected);
}

TEST(RolloutListTableTest, OneRowPerRolloutWithShortModelHash) {
  v1::Rollout r = FourStageRollout();
  r.set_state(v1::ROLLOUT_STATE_RUNNING);
  r.set_stage(1);
  r.set_stage_nodes(3);
  r.set_acknowledged(2);
  r.mutable_create_time()->set_seconds(1700000000);
  const std::vector<std::string> lines = RolloutListTable({r});
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0],
            "rollout  model         map               previous          state    stage  "
            "acknowledged  failed  created");
  EXPECT_EQ(lines[1],
            "r12      3f2a9c1b04de  9a1b2c3d4e5f6a7b  0011223344556677  RUNNING    2/4  "
            "         2/3       0  2023-11-14T22:13:20Z");
}

// ---------------------------------------------------------------------------------------------
// Maps

// A frozen map of 4 layers as the scheduler stores it.
v1::BudgetMapVersion StoredMap(bool with_context) {
  method::BudgetOptions options;
  options.average_tokens = 64;
  options.ratio = 4;
  if (with_context) options.max_context = 1024;
  const std::vector<double> sensitivity = {0.5, 0.1, 0.9, 0.3};
  auto map = method::ComputeBudgetMap(sensitivity, options);
  EXPECT_TRUE(map.ok()) << map.status();
  method::FrozenMap frozen;
  frozen.profile_version = 2;
  frozen.selection = {.method = "snapkv", .params = {{"window", "32"}, {"kernel", "7"}}};
  frozen.map = *map;
  frozen.map.model_hash = kHash;
  auto document = method::FrozenMapToJson(frozen);
  EXPECT_TRUE(document.ok()) << document.status();
  v1::BudgetMapVersion version;
  version.set_model_hash(kHash);
  version.set_version("9a1b2c3d4e5f6a7b");
  version.set_sequence(3);
  version.set_profile_version(2);
  version.mutable_params()->set_average_tokens(64);
  version.mutable_params()->set_ratio(4);
  version.mutable_params()->set_min_tokens(1);
  if (with_context) version.mutable_params()->set_context_len(1024);
  version.mutable_selection()->set_method("snapkv");
  (*version.mutable_selection()->mutable_params())["window"] = "32";
  (*version.mutable_selection()->mutable_params())["kernel"] = "7";
  version.set_total_tokens(map->total_tokens);
  for (int64_t t : map->tokens) version.add_tokens(t);
  version.set_document(*document);
  return version;
}

TEST(RenderMapVersionTest, DocumentIsTheStoredBytesUnchanged) {
  v1::BudgetMapVersion map = StoredMap(true);
  map.set_document(map.document() + "  ");  // whatever is stored, byte for byte
  auto bytes = RenderMapVersion(map, "document");
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(*bytes, map.document());
}

TEST(RenderMapVersionTest, ServingFormatsAreWhatTheAgentRenders) {
  const v1::BudgetMapVersion map = StoredMap(true);
  auto frozen = method::FrozenMapFromJson(map.document());
  ASSERT_TRUE(frozen.ok()) << frozen.status();
  for (auto [name, format] : {std::pair{"native", method::BudgetFormat::kNative},
                              std::pair{"kvpress", method::BudgetFormat::kKvpress},
                              std::pair{"trtllm", method::BudgetFormat::kTrtllm}}) {
    auto expected = method::RenderFrozenMap(*frozen, format);
    ASSERT_TRUE(expected.ok()) << name << ": " << expected.status();
    auto bytes = RenderMapVersion(map, name);
    ASSERT_TRUE(bytes.ok()) << name << ": " << bytes.status();
    EXPECT_EQ(*bytes, *expected) << name;
  }
  auto trtllm = RenderMapVersion(map, "trtllm");
  ASSERT_TRUE(trtllm.ok());
  EXPECT_THAT(*trtllm, HasSubstr("max_attention_window"));
}

TEST(RenderMapVersionTest, KvpressWithoutContextLengthNamesTheFix) {
  auto bytes = RenderMapVersion(StoredMap(false), "kvpress");
  ASSERT_FALSE(bytes.ok());
  EXPECT_EQ(bytes.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bytes.status().message()), StartsWith("--format kvpress: "));
  EXPECT_THAT(std::string(bytes.status().message()), HasSubstr("--context-len"));
}

TEST(RenderMapVersionTest, CorruptStoredDocumentIsDataLoss) {
  v1::BudgetMapVersion map = StoredMap(true);
  map.set_document(map.document().substr(0, map.document().size() / 2));
  auto bytes = RenderMapVersion(map, "native");
  ASSERT_FALSE(bytes.ok());
  EXPECT_EQ(bytes.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(bytes.status().message()), HasSubstr("9a1b2c3d4e5f6a7b"));
  EXPECT_FALSE(RenderMapVersion(map, "yaml").ok());
}

TEST(MapVersionLinesTest, FactsThenPerLayerTokens) {
  const v1::BudgetMapVersion map = StoredMap(true);
  const std::vector<std::string> lines = MapVersionLines(map, true);
  ASSERT_EQ(lines.size(), 8u + 4u);
  EXPECT_EQ(lines[0], "version    9a1b2c3d4e5f6a7b");
  EXPECT_EQ(lines[1], "sequence   3");
  EXPECT_EQ(lines[2], "existing   yes");
  EXPECT_EQ(lines[3], "profile    2");
  EXPECT_EQ(lines[4], "selection  snapkv kernel=7 window=32");
  EXPECT_EQ(lines[5], "budget     average 64, ratio 4, min 1, max none, minmax, context 1024");
  EXPECT_EQ(lines[6], "total      256 tokens over 4 layers");
  EXPECT_EQ(lines[7], "layer  tokens");
  int64_t sum = 0;
  for (int l = 0; l < 4; ++l) {
    EXPECT_EQ(lines[8 + l], std::string(5 - 1, ' ') + std::to_string(l) + "  " +
                                std::string(6 - std::to_string(map.tokens(l)).size(), ' ') +
                                std::to_string(map.tokens(l)));
    sum += map.tokens(l);
  }
  EXPECT_EQ(sum, 256);
}

TEST(MapListTableTest, OneRowPerVersion) {
  v1::BudgetMapVersion a = StoredMap(true);
  a.mutable_create_time()->set_seconds(1700000000);
  v1::BudgetMapVersion b;
  b.set_version("00aa11bb22cc33dd");
  b.set_sequence(12);
  b.set_profile_version(1);
  b.set_total_tokens(4096);
  const std::vector<std::string> lines = MapListTable({a, b});
  const std::vector<std::string> expected = {
      "version           sequence  profile version  selection  total tokens  created",
      "9a1b2c3d4e5f6a7b         3                2  snapkv              256  2023-11-14T22:13:20Z",
      "00aa11bb22cc33dd        12                1  -                  4096  -",
  };
  EXPECT_EQ(lines, expected);
}

}  // namespace
}  // namespace ripplekv::cli
