// TokenizerFromGguf and TokenizerFactsFromGguf on small GGUF files built in memory (no model
// needed).

#include "worker/tokenizer/tokenizer_gguf.h"

#include <ostream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/worker/model/gguf_test_writer.h"
#include "tests/worker/tokenizer/test_vocab.h"
#include "worker/tokenizer/tokenizer.h"

namespace ripplekv::worker {

void PrintTo(const TokenizerFacts& f, std::ostream* os) {
  *os << "{vocab_size " << f.vocab_size << ", bos_id " << f.bos_id << ", eos_id " << f.eos_id
      << ", add_bos " << f.add_bos << "}";
}

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

// Both readers on one file: TokenizerFactsFromGguf, and the facts of TokenizerFromGguf's tokenizer.
struct BothFacts {
  StatusOr<TokenizerFacts> facts;
  StatusOr<TokenizerFacts> of_tokenizer;
};

BothFacts ReadBoth(const GgufWriter& writer) {
  const std::vector<uint8_t> bytes = writer.Build();
  auto file = GgufFile::FromBuffer(bytes, "test.gguf");
  if (!file.ok()) return {file.status(), file.status()};
  BothFacts both{TokenizerFactsFromGguf(**file), absl::UnknownError("unset")};
  StatusOr<std::unique_ptr<Tokenizer>> tok = TokenizerFromGguf(**file);
  if (tok.ok()) {
    both.of_tokenizer = TokenizerFacts{.vocab_size = (*tok)->vocab_size(),
                                       .bos_id = (*tok)->bos_id(),
                                       .eos_id = (*tok)->eos_id(),
                                       .add_bos = (*tok)->add_bos()};
  } else {
    both.of_tokenizer = tok.status();
  }
  return both;
}

// Expects both readers to give `expected`.
void ExpectFacts(const GgufWriter& writer, const TokenizerFacts& expected) {
  const BothFacts both = ReadBoth(writer);
  ASSERT_TRUE(both.of_tokenizer.ok()) << both.of_tokenizer.status();
  ASSERT_TRUE(both.facts.ok()) << both.facts.status();
  EXPECT_EQ(*both.facts, *both.of_tokenizer);
  EXPECT_EQ(*both.facts, expected);
}

// Expects both readers to fail with the same status, whose message names `key`.
void ExpectSameError(const GgufWriter& writer, absl::StatusCode code, std::string_view key) {
  const BothFacts both = ReadBoth(writer);
  ASSERT_FALSE(both.facts.ok()) << key;
  EXPECT_EQ(both.facts.status(), both.of_tokenizer.status());
  EXPECT_EQ(both.facts.status().code(), code) << both.facts.status();
  EXPECT_THAT(std::string(both.facts.status().message()), HasSubstr(key));
  EXPECT_THAT(std::string(both.facts.status().message()), HasSubstr("test.gguf"));
}

// A byte-level vocabulary (bytes 0..255, then "ab" = 256) with the bos/eos/add_bos keys absent
// and tokenizer.ggml.pre = `pre` (absent when empty).
GgufWriter Gpt2WithoutIds(const std::string& pre) {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back(ByteLevel(std::string(1, static_cast<char>(b))));
  tokens.push_back("ab");
  GgufWriter w;
  w.String("tokenizer.ggml.model", "gpt2");
  if (!pre.empty()) w.String("tokenizer.ggml.pre", pre);
  w.StringArray("tokenizer.ggml.tokens", tokens).StringArray("tokenizer.ggml.merges", {"a b"});
  return w;
}

TEST(GgufTokenizerFactsTest, EqualTheTokenizersFactsWithStoredKeys) {
  ExpectFacts(Gpt2Writer(), {.vocab_size = 261, .bos_id = 259, .eos_id = 260, .add_bos = false});
}

TEST(GgufTokenizerFactsTest, EqualTheTokenizersFactsWithDefaults) {
  // gpt2: bos = eos = 11; add_bos as the pre-tokenizer type says (true for llama3, false for
  // "default", which an absent tokenizer.ggml.pre means).
  ExpectFacts(Gpt2WithoutIds("llama3"),
              {.vocab_size = 257, .bos_id = 11, .eos_id = 11, .add_bos = true});
  ExpectFacts(Gpt2WithoutIds(""),
              {.vocab_size = 257, .bos_id = 11, .eos_id = 11, .add_bos = false});

  // llama: bos 1, eos 2, add_bos true; a default id outside the vocabulary means none.
  GgufWriter spm;
  spm.String("tokenizer.ggml.model", "llama")
      .StringArray("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "a"})
      .ScalarArray<float>("tokenizer.ggml.scores", GgufValueType::kFloat32, {0, 0, 0, -1})
      .ScalarArray<int32_t>("tokenizer.ggml.token_type", GgufValueType::kInt32, {2, 3, 3, 1});
  ExpectFacts(spm, {.vocab_size = 4, .bos_id = 1, .eos_id = 2, .add_bos = true});
  GgufWriter short_spm;
  short_spm.String("tokenizer.ggml.model", "llama")
      .StringArray("tokenizer.ggml.tokens", {"<unk>", "<s>"})
      .ScalarArray<int32_t>("tokenizer.ggml.token_type", GgufValueType::kInt32, {2, 3});
  ExpectFacts(short_spm, {.vocab_size = 2, .bos_id = 1, .eos_id = -1, .add_bos = true});

  // A negative stored id keeps the default; a stored add_bos overrides the pre-tokenizer's.
  GgufWriter negative = Gpt2WithoutIds("llama3");
  negative.I32("tokenizer.ggml.eos_token_id", -1).Bool("tokenizer.ggml.add_bos_token", false);
  ExpectFacts(negative, {.vocab_size = 257, .bos_id = 11, .eos_id = 11, .add_bos = false});
}

TEST(GgufTokenizerFactsTest, ErrorsEqualTheTokenizers) {
  ExpectSameError(Gpt2Writer({.eos_id = 9999}), absl::StatusCode::kInvalidArgument,
                  "tokenizer.ggml.eos_token_id = 9999 is out of range for 261 tokens");
  ExpectSameError(Gpt2Writer({.pre = "mystery"}), absl::StatusCode::kInvalidArgument,
                  "tokenizer.ggml.pre");
  GgufWriter none;
  none.String("general.architecture", "llama");
  ExpectSameError(none, absl::StatusCode::kInvalidArgument, "tokenizer.ggml.model");
  GgufWriter bert;
  bert.String("tokenizer.ggml.model", "bert").StringArray("tokenizer.ggml.tokens", {"a"});
  ExpectSameError(bert, absl::StatusCode::kUnimplemented, "bert");
  GgufWriter no_tokens;
  no_tokens.String("tokenizer.ggml.model", "llama");
  ExpectSameError(no_tokens, absl::StatusCode::kNotFound, "tokenizer.ggml.tokens");
  GgufWriter int_tokens;
  int_tokens.String("tokenizer.ggml.model", "llama")
      .ScalarArray<int32_t>("tokenizer.ggml.tokens", GgufValueType::kInt32, {1, 2});
  ExpectSameError(int_tokens, absl::StatusCode::kInvalidArgument, "tokenizer.ggml.tokens");
  GgufWriter string_bos = Gpt2WithoutIds("llama3");
  string_bos.String("tokenizer.ggml.bos_token_id", "1");
  ExpectSameError(string_bos, absl::StatusCode::kInvalidArgument, "tokenizer.ggml.bos_token_id");
}

TEST(GgufTokenizerFactsTest, DoNotCheckWhatTheyDoNotRead) {
  // Broken merges fail the tokenizer but not the facts, which never read them.
  const BothFacts both = ReadBoth(Gpt2Writer({.merges = {"nospace"}}));
  EXPECT_FALSE(both.of_tokenizer.ok());
  ASSERT_TRUE(both.facts.ok()) << both.facts.status();
  EXPECT_EQ(both.facts->vocab_size, 261);
}

}  // namespace
}  // namespace ripplekv::worker
