// agent/map_file.h: atomic replacement of the map file, the sidecar and what it says the node
// holds, durable removal.

#include "agent/map_file.h"

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace ripplekv::agent {
namespace {

using ::testing::HasSubstr;

const std::string kModel(64, 'a');

class MapFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern =
        (std::filesystem::path(::testing::TempDir()) / "map_file_XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    path_ = (dir_ / "budgets.json").string();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  static std::string Read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  static void Put(const std::string& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary) << bytes;
  }
  HeldMap Held(const std::string& version) const {
    return {.model_hash = kModel,
            .version = version,
            .rollout_id = "r7",
            .format = "trtllm",
            .sha256 = "",
            .applied = false};
  }
  // Names in the directory, sorted (to see that no temporary file is left behind).
  std::vector<std::string> Listing() const {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(dir_)) {
      names.push_back(e.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
  }

  std::filesystem::path dir_;
  std::string path_;
};

TEST(Sha256HexTest, MatchesKnownDigest) {
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(HeldMapJsonTest, RoundTrips) {
  const HeldMap held{.model_hash = kModel,
                     .version = "0123456789abcdef",
                     .rollout_id = "r3",
                     .format = "kvpress",
                     .sha256 = Sha256Hex("x"),
                     .applied = true};
  const std::string text = HeldMapToJson(held);
  EXPECT_EQ(text.find('\n'), text.size() - 1);  // one line
  auto back = HeldMapFromJson(text);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, held);
}

TEST(HeldMapJsonTest, RejectsMissingAndMistypedFields) {
  const HeldMap held = {
      .model_hash = kModel, .version = "v", .format = "native", .sha256 = Sha256Hex("")};
  const nlohmann::json good = nlohmann::json::parse(HeldMapToJson(held));
  ASSERT_TRUE(HeldMapFromJson(good.dump()).ok());
  EXPECT_THAT(HeldMapFromJson("{").status().message(), HasSubstr("not valid JSON"));
  EXPECT_THAT(HeldMapFromJson("[]").status().message(), HasSubstr("not a JSON object"));
  nlohmann::json no_applied = good;
  no_applied.erase("applied");
  EXPECT_THAT(HeldMapFromJson(no_applied.dump()).status().message(),
              HasSubstr("missing \"applied\""));
  nlohmann::json numeric_version = good;
  numeric_version["version"] = 7;
  EXPECT_THAT(HeldMapFromJson(numeric_version.dump()).status().message(),
              HasSubstr("\"version\" is not a string"));
  nlohmann::json short_hash = good;
  short_hash["sha256"] = "abc";
  EXPECT_THAT(HeldMapFromJson(short_hash.dump()).status().message(), HasSubstr("\"sha256\""));
}

TEST_F(MapFileTest, MissingFilesHoldNothing) {
  const HeldMapRead read = ReadHeldMap(path_, kModel, "trtllm");
  EXPECT_EQ(read.held.version, "");
  EXPECT_EQ(read.reason, "");
  EXPECT_FALSE(read.files_exist);
}

TEST_F(MapFileTest, WriteReplacesContentAndSidecarRoundTrips) {
  Put(path_, "old contents");
  ASSERT_TRUE(WriteMapFile(path_, "{\"max_attention_window\": [1, 2]}\n", Held("v1")).ok());
  EXPECT_EQ(Read(path_), "{\"max_attention_window\": [1, 2]}\n");
  HeldMapRead read = ReadHeldMap(path_, kModel, "trtllm");
  EXPECT_EQ(read.reason, "");
  EXPECT_TRUE(read.files_exist);
  EXPECT_EQ(read.held.version, "v1");
  EXPECT_EQ(read.held.rollout_id, "r7");
  EXPECT_EQ(read.held.sha256, Sha256Hex(Read(path_)));
  EXPECT_FALSE(read.held.applied);

  ASSERT_TRUE(WriteMapFile(path_, "second", Held("v2")).ok());
  EXPECT_EQ(Read(path_), "second");
  HeldMap applied = ReadHeldMap(path_, kModel, "trtllm").held;
  EXPECT_EQ(applied.version, "v2");
  applied.applied = true;
  ASSERT_TRUE(WriteSidecar(path_, applied).ok());
  EXPECT_EQ(ReadHeldMap(path_, kModel, "trtllm").held, applied);
  // Only the two files: no temporary file is left behind.
  EXPECT_EQ(Listing(), (std::vector<std::string>{"budgets.json", "budgets.json.state.json"}));
}

TEST_F(MapFileTest, FileChangedBehindTheSidecarHoldsNothing) {
  ASSERT_TRUE(WriteMapFile(path_, "the map", Held("v1")).ok());
  Put(path_, "edited by hand");
  const HeldMapRead read = ReadHeldMap(path_, kModel, "trtllm");
  EXPECT_EQ(read.held.version, "");
  EXPECT_TRUE(read.files_exist);
  EXPECT_THAT(read.reason, HasSubstr("does not match the SHA-256"));
}

TEST_F(MapFileTest, MalformedSidecarHoldsNothingAndNamesTheFile) {
  ASSERT_TRUE(WriteMapFile(path_, "the map", Held("v1")).ok());
  for (const std::string& garbage : {std::string("{\"model_hash\": "), std::string(""),
                                     std::string("\xff\xfe garbage"), std::string("null")}) {
    Put(SidecarPath(path_), garbage);
    const HeldMapRead read = ReadHeldMap(path_, kModel, "trtllm");
    EXPECT_EQ(read.held.version, "") << garbage;
    EXPECT_THAT(read.reason, HasSubstr(SidecarPath(path_))) << garbage;
    EXPECT_THAT(read.reason, HasSubstr("malformed")) << garbage;
  }
}

TEST_F(MapFileTest, OtherModelOrFormatHoldsNothing) {
  ASSERT_TRUE(WriteMapFile(path_, "the map", Held("v1")).ok());
  EXPECT_EQ(ReadHeldMap(path_, kModel, "trtllm").held.version, "v1");
  const HeldMapRead other_model = ReadHeldMap(path_, std::string(64, 'b'), "trtllm");
  EXPECT_EQ(other_model.held.version, "");
  EXPECT_THAT(other_model.reason, HasSubstr("is for model"));
  const HeldMapRead other_format = ReadHeldMap(path_, kModel, "kvpress");
  EXPECT_EQ(other_format.held.version, "");
  EXPECT_THAT(other_format.reason, HasSubstr("is for format trtllm"));
}

TEST_F(MapFileTest, OneFileWithoutTheOtherHoldsNothing) {
  Put(path_, "a map nobody recorded");
  HeldMapRead read = ReadHeldMap(path_, kModel, "trtllm");
  EXPECT_EQ(read.held.version, "");
  EXPECT_TRUE(read.files_exist);
  EXPECT_THAT(read.reason, HasSubstr("has no sidecar"));

  ASSERT_TRUE(WriteMapFile(path_, "the map", Held("v1")).ok());
  std::filesystem::remove(path_);
  read = ReadHeldMap(path_, kModel, "trtllm");
  EXPECT_EQ(read.held.version, "");
  EXPECT_TRUE(read.files_exist);
  EXPECT_THAT(read.reason, HasSubstr("does not exist"));
}

TEST_F(MapFileTest, RemovalDeletesAndToleratesMissingFiles) {
  ASSERT_TRUE(WriteMapFile(path_, "the map", Held("v1")).ok());
  ASSERT_TRUE(RemoveFileDurably(path_).ok());
  ASSERT_TRUE(RemoveFileDurably(SidecarPath(path_)).ok());
  EXPECT_TRUE(Listing().empty());
  EXPECT_FALSE(ReadHeldMap(path_, kModel, "trtllm").files_exist);
  EXPECT_TRUE(RemoveFileDurably(path_).ok());  // already gone
}

TEST_F(MapFileTest, WriteIntoMissingDirectoryFailsNamingIt) {
  const std::string missing = (dir_ / "no" / "budgets.json").string();
  const Status s = WriteMapFile(missing, "x", Held("v1"));
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr(missing));
}

}  // namespace
}  // namespace ripplekv::agent
