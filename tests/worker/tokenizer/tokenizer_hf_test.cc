// TokenizerFromHfJson on small tokenizer.json / tokenizer_config.json files written by the test.

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/worker/tokenizer/test_vocab.h"
#include "worker/tokenizer/tokenizer.h"

namespace ripplekv::worker {
namespace {

using testing::ByteLevel;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Json = nlohmann::json;

constexpr EncodeOptions kPlain{.add_special = false, .parse_special = false};

class HfTokenizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::create_directories(dir_);
  }

  // SmolLM2-like: Digits(individual) then ByteLevel; ids 0..255 are the byte characters.
  static Json TokenizerJson() {
    Json vocab = Json::object();
    for (int b = 0; b < 256; ++b) vocab[ByteLevel(std::string(1, static_cast<char>(b)))] = b;
    vocab["ab"] = 256;
    vocab["12"] = 257;
    vocab[ByteLevel(" ab")] = 258;
    Json j;
    j["version"] = "1.0";
    j["added_tokens"] = Json::array({{{"id", 259}, {"content", "<|im_start|>"}, {"special", true}},
                                     {{"id", 260}, {"content", "<|im_end|>"}, {"special", true}},
                                     {{"id", 261}, {"content", "<tool>"}, {"special", false}}});
    j["normalizer"] = nullptr;
    j["pre_tokenizer"] = {
        {"type", "Sequence"},
        {"pretokenizers",
         Json::array({{{"type", "Digits"}, {"individual_digits", true}},
                      {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}})}};
    j["model"] = {{"type", "BPE"},
                  {"vocab", vocab},
                  {"merges", Json::array({"a b", Json::array({ByteLevel(" "), "ab"}), "1 2"})}};
    return j;
  }

  std::string Write(const std::string& name, const Json& j) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path) << j.dump();
    return path;
  }

  std::filesystem::path dir_;
};

TEST_F(HfTokenizerTest, ReadsVocabMergesAndPreTokenizerSteps) {
  auto tok = TokenizerFromHfJson(Write("tokenizer.json", TokenizerJson()), "");
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->vocab_size(), 262);
  // "ab" | " ab" | " " | "1" | "2": digits never merge (Digits step), " ab" uses the pair merge.
  EXPECT_THAT((*tok)->Encode("ab ab 12", kPlain), ElementsAre(256, 258, ' ', '1', '2'));
  EXPECT_FALSE((*tok)->add_bos());
  EXPECT_EQ((*tok)->bos_id(), -1);
}

TEST_F(HfTokenizerTest, AddedTokensAreSpecials) {
  auto tok = TokenizerFromHfJson(Write("tokenizer.json", TokenizerJson()), "");
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_THAT((*tok)->Encode("<|im_start|>ab", {.add_special = false, .parse_special = true}),
              ElementsAre(259, 256));
  EXPECT_THAT((*tok)->Encode("<tool>", kPlain), ElementsAre(261));
  EXPECT_TRUE((*tok)->IsEog(260));
}

TEST_F(HfTokenizerTest, ConfigGivesBosEosAndChatTemplate) {
  const Json config = {{"bos_token", "<|im_start|>"},
                       {"eos_token", {{"content", "<|im_end|>"}}},
                       {"add_bos_token", true},
                       {"chat_template", "{{'<|im_start|>' + m + '<|im_end|>'}}"}};
  auto tok = TokenizerFromHfJson(Write("tokenizer.json", TokenizerJson()),
                                 Write("tokenizer_config.json", config));
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->bos_id(), 259);
  EXPECT_EQ((*tok)->eos_id(), 260);
  EXPECT_TRUE((*tok)->add_bos());
  EXPECT_THAT((*tok)->Encode("ab", {}), ElementsAre(259, 256));
  EXPECT_TRUE(DetectChatTemplate((*tok)->chat_template()).ok());
}

TEST_F(HfTokenizerTest, TemplateProcessingAddsBosWhenTheConfigIsSilent) {
  Json j = TokenizerJson();
  j["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single", Json::array({{{"SpecialToken", {{"id", "<|im_start|>"}, {"type_id", 0}}}},
                              {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})}};
  auto tok = TokenizerFromHfJson(Write("tokenizer.json", j), (dir_ / "absent.json").string());
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_TRUE((*tok)->add_bos());
  EXPECT_THAT((*tok)->Encode("ab", {}), ElementsAre(259, 256));
}

TEST_F(HfTokenizerTest, SplitRegexStepIsApplied) {
  Json j = TokenizerJson();
  j["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       Json::array({{{"type", "Split"},
                     {"pattern",
                      {{"Regex",
                        "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
                        "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
                        "\\s+(?!\\S)|\\s+"}}},
                     {"behavior", "Isolated"},
                     {"invert", false}},
                    {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}})}};
  auto tok = TokenizerFromHfJson(Write("tokenizer.json", j), "");
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_THAT((*tok)->Encode("12 ab", kPlain), ElementsAre(257, 258));  // "12" stays one piece
}

TEST_F(HfTokenizerTest, UnsupportedAndMalformedFilesAreErrors) {
  EXPECT_EQ(TokenizerFromHfJson((dir_ / "missing.json").string(), "").status().code(),
            absl::StatusCode::kNotFound);

  const std::string bad = (dir_ / "bad.json").string();
  std::ofstream(bad) << "{\"model\": ";
  EXPECT_EQ(TokenizerFromHfJson(bad, "").status().code(), absl::StatusCode::kInvalidArgument);

  Json metaspace = TokenizerJson();
  metaspace["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "_"}};
  auto status = TokenizerFromHfJson(Write("metaspace.json", metaspace), "").status();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(status.message()), HasSubstr("Metaspace"));

  Json unigram = TokenizerJson();
  unigram["model"]["type"] = "Unigram";
  EXPECT_EQ(TokenizerFromHfJson(Write("unigram.json", unigram), "").status().code(),
            absl::StatusCode::kUnimplemented);

  Json wrong_types = TokenizerJson();
  wrong_types["model"]["vocab"]["ab"] = "not a number";
  EXPECT_EQ(TokenizerFromHfJson(Write("types.json", wrong_types), "").status().code(),
            absl::StatusCode::kInvalidArgument);

  Json huge_id = TokenizerJson();
  huge_id["added_tokens"][0]["id"] = 2000000000;
  EXPECT_EQ(TokenizerFromHfJson(Write("huge.json", huge_id), "").status().code(),
            absl::StatusCode::kInvalidArgument);

  Json bad_merge = TokenizerJson();
  bad_merge["model"]["merges"].push_back("x zz");
  auto merge_status = TokenizerFromHfJson(Write("merge.json", bad_merge), "").status();
  EXPECT_EQ(merge_status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(merge_status.message()), HasSubstr("merges[3]"));

  const Json config = {{"bos_token", "<not-a-token>"}};
  EXPECT_EQ(TokenizerFromHfJson(Write("t.json", TokenizerJson()), Write("c.json", config))
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ripplekv::worker
