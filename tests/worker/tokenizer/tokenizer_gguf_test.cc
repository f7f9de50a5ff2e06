// TokenizerFromGguf on small GGUF files built in memory (no model needed).

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/worker/model/gguf_test_writer.h"
#include "tests/worker/tokenizer/test_vocab.h"
#include "worker/tokenizer/tokenizer.h"

namespace ripplekv::worker {
namespace {

using testing::ByteLevel;
using ::testing::ElementsAre;
using testing::GgufWriter;
using ::testing::HasSubstr;

constexpr std::string_view kTemplate =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}";

// What Gpt2Writer writes; tests change one field to break the file.
struct Gpt2Keys {
  std::string pre = "smollm";
  std::vector<std::string> merges = {"a b", "1 2"};
  uint32_t eos_id = 260;
  bool token_type_as_strings = false;
};

// A SmolLM2-like byte-level vocabulary: bytes 0..255, "ab" (256), "12" (257), <|endoftext|>
// (258), <|im_start|> (259), <|im_end|> (260).
GgufWriter Gpt2Writer(const Gpt2Keys& keys = {}) {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back(ByteLevel(std::string(1, static_cast<char>(b))));
  tokens.insert(tokens.end(), {"ab", "12", "<|endoftext|>", "<|im_start|>", "<|im_end|>"});
  std::vector<int32_t> types(tokens.size(), 1);
  types[258] = types[259] = types[260] = 3;
  GgufWriter w;
  w.String("general.architecture", "llama")
      .String("tokenizer.ggml.model", "gpt2")
      .String("tokenizer.ggml.pre", keys.pre)
      .StringArray("tokenizer.ggml.tokens", tokens);
  if (keys.token_type_as_strings) {
    w.StringArray("tokenizer.ggml.token_type", {"x"});
  } else {
    w.ScalarArray<int32_t>("tokenizer.ggml.token_type", GgufValueType::kInt32, types);
  }
  w.StringArray("tokenizer.ggml.merges", keys.merges)
      .U32("tokenizer.ggml.bos_token_id", 259)
      .U32("tokenizer.ggml.eos_token_id", keys.eos_id)
      .Bool("tokenizer.ggml.add_bos_token", false)
      .String("tokenizer.chat_template", kTemplate);
  return w;
}

StatusOr<std::unique_ptr<Tokenizer>> Load(const GgufWriter& writer, std::vector<uint8_t>* storage) {
  *storage = writer.Build();
  auto file = GgufFile::FromBuffer(*storage, "test.gguf");
  if (!file.ok()) return file.status();
  return TokenizerFromGguf(**file);
}

TEST(GgufTokenizerTest, ReadsByteLevelVocabulary) {
  std::vector<uint8_t> bytes;
  auto tok = Load(Gpt2Writer(), &bytes);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->vocab_size(), 261);
  EXPECT_EQ((*tok)->bos_id(), 259);
  EXPECT_EQ((*tok)->eos_id(), 260);
  EXPECT_FALSE((*tok)->add_bos());
  // smollm: digits are split before merging, so "12" never forms.
  EXPECT_THAT((*tok)->Encode("ab12", {}), ElementsAre(256, '1', '2'));
  EXPECT_THAT((*tok)->Encode("<|im_start|>ab", {.add_special = true, .parse_special = true}),
              ElementsAre(259, 256));
  EXPECT_TRUE((*tok)->IsEog(258));
  EXPECT_TRUE((*tok)->IsEog(260));
  EXPECT_EQ((*tok)->chat_template(), kTemplate);
}

TEST(GgufTokenizerTest, SentencePieceDefaultsFollowLlamaCpp) {
  std::vector<std::string> tokens = {"<unk>",
                                     "<s>",
                                     "</s>",
                                     "\xE2\x96\x81",
                                     "a",
                                     "\xE2\x96\x81"
                                     "a"};
  GgufWriter w;
  w.String("tokenizer.ggml.model", "llama")
      .StringArray("tokenizer.ggml.tokens", tokens)
      .ScalarArray<float>("tokenizer.ggml.scores", GgufValueType::kFloat32, {0, 0, 0, -1, -2, -0.5})
      .ScalarArray<int32_t>("tokenizer.ggml.token_type", GgufValueType::kInt32, {2, 3, 3, 1, 1, 1});
  std::vector<uint8_t> bytes;
  auto tok = Load(w, &bytes);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->bos_id(), 1);
  EXPECT_EQ((*tok)->eos_id(), 2);
  EXPECT_TRUE((*tok)->add_bos());
  EXPECT_THAT((*tok)->Encode("a", {}), ElementsAre(1, 5));
}

TEST(GgufTokenizerTest, MissingOrUnsupportedTokenizerIsAnErrorNamingTheKey) {
  std::vector<uint8_t> bytes;
  GgufWriter none;
  none.String("general.architecture", "llama");
  auto status = Load(none, &bytes).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("tokenizer.ggml.model"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("test.gguf"));

  GgufWriter bert;
  bert.String("tokenizer.ggml.model", "bert").StringArray("tokenizer.ggml.tokens", {"a"});
  EXPECT_EQ(Load(bert, &bytes).status().code(), absl::StatusCode::kUnimplemented);
}

TEST(GgufTokenizerTest, BadKeysAreErrorsNamingTheKey) {
  std::vector<uint8_t> bytes;
  struct Case {
    Gpt2Keys keys;
    std::string key;
  };
  std::vector<Case> cases = {
      {{.eos_id = 9999}, "tokenizer.ggml.eos_token_id"},
      {{.pre = "mystery"}, "tokenizer.ggml.pre"},
      {{.merges = {"nospace"}}, "tokenizer.ggml.merges"},
      {{.merges = {"a zz"}}, "merges[0]"},
      {{.token_type_as_strings = true}, "tokenizer.ggml.token_type"},
  };
  for (Case& c : cases) {
    auto status = Load(Gpt2Writer(c.keys), &bytes).status();
    EXPECT_FALSE(status.ok()) << c.key;
    EXPECT_THAT(std::string(status.message()), HasSubstr(c.key));
  }
}

}  // namespace
}  // namespace ripplekv::worker
