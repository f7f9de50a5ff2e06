// Token ids on the real SmolLM2 GGUF against llama.cpp's (label `model`).
//
// Needs RIPPLEKV_SMOLLM2_GGUF (the SmolLM2-135M-Instruct GGUF); skips without it. The reference
// ids are tests/fixtures/llamacpp/tokens.json, made with llama.cpp from the same file:
//   {"model_sha256": "<sha256 of the GGUF>",
//    "cases": [{"text": "...", "add_special": bool, "parse_special": bool, "ids": [...]}, ...]}
// RIPPLEKV_LLAMACPP_TOKENS may name another file of that format (e.g. a larger local one).

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "fmt/format.h"
#include "fmt/ranges.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "worker/model/gguf_reader.h"
#include "worker/model/model_hash.h"
#include "worker/tokenizer/tokenizer.h"

namespace ripplekv::worker {
namespace {

struct Case {
  std::string text;
  bool add_special = false;
  bool parse_special = false;
  std::vector<int32_t> ids;
};

// Printable form of a test string: control bytes escaped, UTF-8 kept.
std::string Escape(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7F) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

class LlamaCppTokensTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const char* model = std::getenv("RIPPLEKV_SMOLLM2_GGUF");
    if (model == nullptr || *model == '\0') return;
    model_path_ = model;
    auto file = GgufFile::Open(model_path_);
    if (!file.ok()) {
      setup_error_ = "cannot open " + model_path_ + ": " + file.status().ToString();
      return;
    }
    auto tokenizer = TokenizerFromGguf(**file);
    if (!tokenizer.ok()) {
      setup_error_ = "cannot build the tokenizer: " + tokenizer.status().ToString();
      return;
    }
    tokenizer_ = std::move(*tokenizer).release();

    const char* override_path = std::getenv("RIPPLEKV_LLAMACPP_TOKENS");
    const std::string fixture = override_path != nullptr && *override_path != '\0'
                                    ? override_path
                                    : RIPPLEKV_FIXTURES_DIR "/llamacpp/tokens.json";
    std::ifstream in(fixture);
    if (!in) {
      setup_error_ =
          "missing fixture " + fixture + " (llama.cpp token ids for " + model_path_ + ")";
      return;
    }
    const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.contains("cases") || !j["cases"].is_array()) {
      setup_error_ = "fixture " + fixture + " is not valid JSON with a \"cases\" array";
      return;
    }
    fixture_sha256_ = j.value("model_sha256", "");
    cases_ = new std::vector<Case>();
    for (const auto& c : j["cases"]) {
      cases_->push_back({c.at("text").get<std::string>(), c.at("add_special").get<bool>(),
                         c.at("parse_special").get<bool>(),
                         c.at("ids").get<std::vector<int32_t>>()});
    }
  }

  static void TearDownTestSuite() {
    delete tokenizer_;
    tokenizer_ = nullptr;
    delete cases_;
    cases_ = nullptr;
  }

  void SetUp() override {
    if (model_path_.empty()) GTEST_SKIP() << "RIPPLEKV_SMOLLM2_GGUF is not set";
    ASSERT_TRUE(setup_error_.empty()) << setup_error_;
    ASSERT_FALSE(cases_->empty()) << "the fixture has no cases";
  }

  static std::string model_path_;
  static std::string setup_error_;
  static std::string fixture_sha256_;
  static const Tokenizer* tokenizer_;
  static std::vector<Case>* cases_;
};

std::string LlamaCppTokensTest::model_path_;
std::string LlamaCppTokensTest::setup_error_;
std::string LlamaCppTokensTest::fixture_sha256_;
const Tokenizer* LlamaCppTokensTest::tokenizer_ = nullptr;
std::vector<Case>* LlamaCppTokensTest::cases_ = nullptr;

TEST_F(LlamaCppTokensTest, FixtureWasMadeFromThisModel) {
  if (fixture_sha256_.empty()) GTEST_SKIP() << "the fixture names no model_sha256";
  auto sha = Sha256FileHex(model_path_);
  ASSERT_TRUE(sha.ok()) << sha.status();
  EXPECT_EQ(*sha, fixture_sha256_) << model_path_ << " is not the model the fixture was made from";
}

TEST_F(LlamaCppTokensTest, IdsMatchLlamaCppOnEveryCase) {
  int mismatches = 0;
  for (const Case& c : *cases_) {
    const std::vector<int32_t> ids = tokenizer_->Encode(
        c.text, {.add_special = c.add_special, .parse_special = c.parse_special});
    if (ids == c.ids) continue;
    size_t first = 0;
    while (first < ids.size() && first < c.ids.size() && ids[first] == c.ids[first]) ++first;
    if (++mismatches <= 25) {
      ADD_FAILURE() << "text " << Escape(c.text) << " (add_special=" << c.add_special
                    << ", parse_special=" << c.parse_special << ")\n  llama.cpp: ["
                    << fmt::format("{}", fmt::join(c.ids, ", ")) << "]\n  ours:      ["
                    << fmt::format("{}", fmt::join(ids, ", ")) << "]\n  first difference at index "
                    << first;
    }
  }
  EXPECT_EQ(mismatches, 0) << "of " << cases_->size() << " cases";
}

TEST_F(LlamaCppTokensTest, DecodeInvertsEncodeOnEveryFixtureText) {
  // Bytes the vocabulary has a token for (SmolLM2 lacks a few, e.g. 0x04 and 0xF1; Encode drops
  // them as llama.cpp does, so texts holding them cannot come back).
  std::vector<bool> has_byte(256, false);
  for (int32_t id = 0; id < tokenizer_->vocab_size(); ++id) {
    const std::string piece = tokenizer_->TokenToPiece(id);
    if (piece.size() == 1) has_byte[static_cast<uint8_t>(piece[0])] = true;
  }
  std::set<std::string> seen;
  int checked = 0;
  for (const Case& c : *cases_) {
    if (!seen.insert(c.text).second) continue;
    bool representable = true;
    for (unsigned char b : c.text) representable = representable && has_byte[b];
    if (!representable) continue;
    ++checked;
    const std::vector<int32_t> ids = tokenizer_->Encode(c.text, {.add_special = false});
    EXPECT_EQ(tokenizer_->Decode(ids), c.text) << "text " << Escape(c.text);
  }
  EXPECT_GT(checked, 0);
}

TEST_F(LlamaCppTokensTest, SpecialIdsMatchLlamaCpp) {
  // llama.cpp on SmolLM2-135M-Instruct: BOS <|im_start|> (1), EOS <|im_end|> (2), no BOS added,
  // EOG = <|endoftext|> (0), <|im_end|> (2) and <reponame> (4, its FIM-repo heuristic).
  EXPECT_EQ(tokenizer_->vocab_size(), 49152);
  EXPECT_EQ(tokenizer_->bos_id(), 1);
  EXPECT_EQ(tokenizer_->eos_id(), 2);
  EXPECT_FALSE(tokenizer_->add_bos());
  EXPECT_FALSE(tokenizer_->add_eos());
  std::vector<int32_t> eog;
  for (int32_t id = 0; id < tokenizer_->vocab_size(); ++id) {
    if (tokenizer_->IsEog(id)) eog.push_back(id);
  }
  EXPECT_EQ(eog, (std::vector<int32_t>{0, 2, 4}));
  EXPECT_EQ(tokenizer_->TokenToPiece(1), "<|im_start|>");
}

TEST_F(LlamaCppTokensTest, ChatTemplateIsChatMl) {
  auto info = DetectChatTemplate(tokenizer_->chat_template());
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->default_system_prompt,
            "You are a helpful AI assistant named SmolLM, trained by Hugging Face");
  const std::vector<ChatMessage> messages = {{"user", "Hi"}};
  const std::vector<int32_t> ids =
      tokenizer_->Encode(ApplyChatML(messages, true), {.add_special = true, .parse_special = true});
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.front(), 1);                            // <|im_start|>
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 2), 1);  // one <|im_end|>
}

TEST_F(LlamaCppTokensTest, EncodesAHundredKilobytesWellUnderASecond) {
  std::string text;
  while (text.size() < 100 * 1024) {
    for (const Case& c : *cases_) text += c.text;
  }
  text.resize(100 * 1024);
  const auto start = std::chrono::steady_clock::now();
  const std::vector<int32_t> ids = tokenizer_->Encode(text, {.add_special = false});
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 1.0) << ids.size() << " tokens";
  RecordProperty("encode_100kb_seconds", std::to_string(seconds));
}

}  // namespace
}  // namespace ripplekv::worker
