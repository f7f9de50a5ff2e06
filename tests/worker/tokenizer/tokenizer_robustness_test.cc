// Arbitrary input never crashes, and concurrent use from several threads gives the same ids.

#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/worker/tokenizer/test_vocab.h"
#include "worker/tokenizer/tokenizer.h"

namespace ripplekv::worker {
namespace {

using testing::AddToken;
using testing::ByteLevelSpec;

std::unique_ptr<Tokenizer> ByteLevelTokenizer(std::string pre) {
  TokenizerSpec spec = ByteLevelSpec(
      {{"t", "h"}, {"th", "e"}, {" ", "the"}, {"1", "2"}, {"\xC3", "\xA9"}, {" ", " "}}, pre);
  AddToken(&spec, "<|im_start|>", TokenType::kControl);
  AddToken(&spec, "<tool>", TokenType::kUserDefined);
  auto tokenizer = CreateTokenizer(std::move(spec));
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  return *std::move(tokenizer);
}

std::unique_ptr<Tokenizer> SentencePieceTokenizer() {
  TokenizerSpec spec;
  spec.model = "llama";
  spec.tokens = {"<unk>", "<s>", "</s>", "\xE2\x96\x81",   "t",
                 "h",     "e",   "th",   "\xE2\x96\x81th", "<0x41>"};
  spec.scores = {0, 0, 0, -1, -2, -2, -2, -1.5, -0.5, 0};
  spec.token_types = {2, 3, 3, 1, 1, 1, 1, 1, 1, 6};
  spec.unk_id = 0;
  spec.bos_id = 1;
  spec.eos_id = 2;
  spec.add_bos = true;
  auto tokenizer = CreateTokenizer(std::move(spec));
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  return *std::move(tokenizer);
}

std::string RandomBytes(std::mt19937& rng, size_t max_len) {
  static const std::string kPieces[] = {"the",
                                        " ",
                                        "  ",
                                        "\n",
                                        "12",
                                        "\xC3\xA9",
                                        "<|im_start|>",
                                        "<tool>",
                                        "\xE2\x96\x81",
                                        "'s",
                                        "\xF0\x9F\x98\x80"};
  std::string s;
  const size_t len = rng() % max_len;
  while (s.size() < len) {
    if (rng() % 3 == 0) {
      s += kPieces[rng() % std::size(kPieces)];
    } else {
      s.push_back(static_cast<char>(rng() % 256));
    }
  }
  return s;
}

TEST(TokenizerRobustnessTest, ArbitraryBytesEncodeAndDecodeWithoutCrashing) {
  std::vector<std::unique_ptr<Tokenizer>> tokenizers;
  for (const char* pre : {"smollm", "gpt-2", "llama3", "qwen2", "default"}) {
    tokenizers.push_back(ByteLevelTokenizer(pre));
  }
  tokenizers.push_back(SentencePieceTokenizer());
  std::mt19937 rng(42);
  for (int i = 0; i < 2000; ++i) {
    const std::string text = RandomBytes(rng, 64);
    for (const auto& tok : tokenizers) {
      for (bool parse_special : {false, true}) {
        const std::vector<int32_t> ids =
            tok->Encode(text, {.add_special = true, .parse_special = parse_special});
        for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < tok->vocab_size());
        (void)tok->Decode(ids);
      }
    }
  }
}

TEST(TokenizerRobustnessTest, ValidUtf8RoundTripsThroughEveryByteLevelPreTokenizer) {
  std::mt19937 rng(3);
  for (const char* pre : {"smollm", "gpt-2", "llama3", "qwen2", "default"}) {
    auto tok = ByteLevelTokenizer(pre);
    for (int i = 0; i < 300; ++i) {
      std::string text;
      for (int k = rng() % 40; k > 0; --k) {
        static const char* const kParts[] = {"the",
                                             " ",
                                             "\t",
                                             "\n\n",
                                             "1234",
                                             "\xC3\xA9",
                                             "x",
                                             "'S",
                                             "!?",
                                             "\xE4\xB8\xAD",
                                             "\xF0\x9F\x98\x80"};
        text += kParts[rng() % std::size(kParts)];
      }
      EXPECT_EQ(tok->Decode(tok->Encode(text, {.add_special = false})), text) << pre;
    }
  }
}

TEST(TokenizerRobustnessTest, ConcurrentEncodeGivesTheSameIds) {
  auto tok = ByteLevelTokenizer("smollm");
  std::mt19937 rng(5);
  std::vector<std::string> texts;
  for (int i = 0; i < 200; ++i) texts.push_back(RandomBytes(rng, 200));
  std::vector<std::vector<int32_t>> expected;
  for (const std::string& t : texts) {
    expected.push_back(tok->Encode(t, {.add_special = true, .parse_special = true}));
  }
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 5; ++round) {
        for (size_t i = 0; i < texts.size(); ++i) {
          const auto ids = tok->Encode(texts[i], {.add_special = true, .parse_special = true});
          if (ids != expected[i]) ++mismatches[t];
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(mismatches, std::vector<int>(4, 0));
}

}  // namespace
}  // namespace ripplekv::worker
