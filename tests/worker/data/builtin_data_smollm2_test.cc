// The built-in calibration sets with the real SmolLM2 tokenizer (label model: needs
// RIPPLEKV_SMOLLM2_GGUF, skips without it; skips naming the Debian package when a corpus is not
// installed): each corpus of the default set holds more than 100 windows of 1024 + 32 tokens, and
// the default set is the mixed one, deterministic.

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/data/calibration_data.h"
#include "worker/data/corpora.h"
#include "worker/model/gguf_reader.h"
#include "worker/tokenizer/tokenizer.h"

namespace ripplekv::worker {
namespace {

using ::testing::HasSubstr;
using ::testing::SizeIs;

constexpr EncodeOptions kRawText{.add_special = false, .parse_special = false};

class BuiltinDataSmolLm2Test : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* model_path = std::getenv("RIPPLEKV_SMOLLM2_GGUF");
    if (model_path == nullptr || *model_path == '\0') {
      GTEST_SKIP() << "RIPPLEKV_SMOLLM2_GGUF is not set; point it at "
                      "SmolLM2-135M-Instruct.Q4_1.gguf (scripts/fetch-model)";
    }
    if (!std::filesystem::exists(std::string(kSherlockHolmes.path))) {
      GTEST_SKIP() << kSherlockHolmes.path << " is missing: install the Debian package "
                   << kSherlockHolmes.package;
    }
    for (const BuiltinFileSet& files : {kPythonStdlib, kCmakeManuals}) {
      if (auto dir = FindBuiltinFileSetDir(files); !dir.ok()) GTEST_SKIP() << dir.status();
    }
    auto gguf = GgufFile::Open(model_path);
    ASSERT_TRUE(gguf.ok()) << gguf.status();
    auto tokenizer = TokenizerFromGguf(**gguf);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    tokenizer_ = *std::move(tokenizer);
  }

  std::unique_ptr<Tokenizer> tokenizer_;
};

// The sizes docs/DATA.md quotes, printed; each corpus must give > 100 windows of 1024 + 32.
TEST_F(BuiltinDataSmolLm2Test, EachCorpusOfTheDefaultSetHoldsOverAHundredLongWindows) {
  auto book = ReadBuiltinCorpus(kSherlockHolmes);
  ASSERT_TRUE(book.ok()) << book.status();
  const size_t prose_tokens = tokenizer_->Encode(*book, kRawText).size();
  std::cout << "sherlock-holmes: " << prose_tokens << " tokens\n";
  EXPECT_GT(prose_tokens, 100u * 1056);
  for (const BuiltinFileSet& set : {kPythonStdlib, kCmakeManuals}) {
    auto files = ReadBuiltinFileSet(set);
    ASSERT_TRUE(files.ok()) << files.status();
    size_t tokens = 0;
    for (const CorpusFile& file : *files) tokens += tokenizer_->Encode(file.text, kRawText).size();
    std::cout << set.name << ": " << files->size() << " files, " << tokens << " tokens\n";
    EXPECT_GT(tokens, 100u * 1056) << set.name;
  }
  for (std::string_view name : {"sherlock-holmes", "code", "docs"}) {
    auto many = BuiltinCalibrationData(name, *tokenizer_,
                                       {.samples = 100, .context_len = 1024, .probe_len = 32});
    EXPECT_TRUE(many.ok()) << name << ": " << many.status();
  }
}

TEST_F(BuiltinDataSmolLm2Test, DefaultSetIsMixedAndDeterministic) {
  const DataOptions options{.samples = 16, .context_len = 1024, .probe_len = 32};
  auto set = DefaultCalibrationData(*tokenizer_, options);
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_THAT(set->samples, SizeIs(16));
  for (const CalibrationSample& s : set->samples) {
    EXPECT_THAT(s.context, SizeIs(1024));
    EXPECT_THAT(s.probe, SizeIs(32));
  }
  EXPECT_EQ(set->domain, "mixed");
  EXPECT_THAT(set->samples[0].source, ::testing::StartsWith(std::string(kSherlockHolmes.path)));
  EXPECT_THAT(set->samples[1].source, ::testing::MatchesRegex(".*/python3[.0-9]*/.*\\.py@[0-9]+"));
  EXPECT_THAT(set->samples[2].source, ::testing::MatchesRegex(".*/Help/manual/.*\\.rst@[0-9]+"));
  EXPECT_THAT(set->description, HasSubstr("golang-github-pierrec-lz4-dev"));
  EXPECT_THAT(set->description, HasSubstr("Debian package python3"));
  EXPECT_THAT(set->description, HasSubstr("Debian package cmake-data"));
  EXPECT_THAT(set->description, HasSubstr("spread seed 0 over "));
  EXPECT_THAT(set->description, HasSubstr("16 samples x (context 1024 + probe 32) tokens"));
  auto again = DefaultCalibrationData(*tokenizer_, options);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->fingerprint, set->fingerprint);
  EXPECT_EQ(again->description, set->description);
}

}  // namespace
}  // namespace ripplekv::worker
