// Answer metrics against hand-computed values and values printed by the Python reference code
// (LongBench's metric functions with rouge 1.0.1, fuzzywuzzy 0.18 + python-Levenshtein; RULER's
// string_match_*). Where a value comes from Python, the comment says so.

#include "eval/metrics.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ripplekv::eval {
namespace {

TEST(NormalizeAnswerTest, LowersDropsPunctuationArticlesAndExtraSpace) {
  EXPECT_EQ(NormalizeAnswer("The  Quick, brown fox -- an 'animal'!"), "quick brown fox animal");
  EXPECT_EQ(NormalizeAnswer("theatre anthem"), "theatre anthem");  // articles only as words
  EXPECT_EQ(NormalizeAnswer("Über CAFÉ"), "über café");
}

TEST(NormalizeAnswerTest, ZhVariantDropsCjkPunctuationAndAllWhitespace) {
  EXPECT_EQ(NormalizeZhAnswer("北京，是 首都。"), "北京是首都");
  EXPECT_EQ(NormalizeZhAnswer("《红楼梦》"), "《红楼梦");  // LongBench's list lacks 《
}

TEST(QaF1Test, MatchesSquadF1) {
  // Python: 0.6666666666666666, 0.33333333333333337, 0.6666666666666666, 1.0.
  EXPECT_NEAR(QaF1Score("The Eiffel Tower, in Paris!", "the eiffel tower"), 2.0 / 3, 1e-12);
  EXPECT_NEAR(QaF1Score("Paris is the capital of France", "Paris"), 1.0 / 3, 1e-12);
  EXPECT_NEAR(QaF1Score("an apple a day", "the apple"), 2.0 / 3, 1e-12);
  EXPECT_DOUBLE_EQ(QaF1Score("Über café", "über CAFÉ"), 1.0);
  EXPECT_DOUBLE_EQ(QaF1Score("nothing shared", "else"), 0.0);
  EXPECT_DOUBLE_EQ(QaF1Score("", ""), 0.0);
}

TEST(QaF1Test, CountsRepeatedTokensOnce) {
  // pred [a, b, b], truth [b]: one shared token, P = 1/3, R = 1, F1 = 0.5 ("a" is not an article
  // here because it is "x").
  EXPECT_DOUBLE_EQ(QaF1Score("x y y", "y"), 0.5);
}

TEST(QaF1Test, ZhVariantUsesCharacterSegments) {
  // Segments: [北, 京, 是, 首, 都] vs [北, 京]: P = 2/5, R = 1, F1 = 4/7.
  EXPECT_NEAR(QaF1ZhScore("北京是首都。", "北京"), 4.0 / 7, 1e-12);
  EXPECT_THAT(SegmentZh("GPT4 模型 ok!"), ::testing::ElementsAre("GPT4", "模", "型", "ok", "!"));
}

TEST(RougeLTest, MatchesTheRougePackage) {
  // Python rouge 1.0.1 rouge-l f.
  EXPECT_NEAR(RougeLScore("the cat sat on the mat. the dog", "the cat is on the mat"),
              0.7272727223140496, 1e-12);
  EXPECT_NEAR(RougeLScore("A B C D. E F", "A C E. B D F G"), 0.9230769181065088, 1e-12);
  EXPECT_NEAR(RougeLScore("Alice met Bob in the park", "Bob met Alice at the park. They talked."),
              0.4285714236734694, 1e-12);
  EXPECT_DOUBLE_EQ(RougeLScore(" . ", "a b"), 0.0);
}

TEST(RougeLTest, IsZeroWhenATextHasNoSentence) {
  EXPECT_DOUBLE_EQ(RougeLScore("...", "x"), 0.0);  // rouge raises; LongBench returns 0
  EXPECT_DOUBLE_EQ(RougeLScore("", "x"), 0.0);
  EXPECT_DOUBLE_EQ(RougeLScore("x", ""), 0.0);
}

TEST(RougeLTest, IdenticalTextScoresOne) {
  EXPECT_NEAR(RougeLScore("one two three. four", "one two three. four"), 1.0, 1e-8);
  EXPECT_NEAR(RougeLZhScore("今天天气很好", "今天天气很好"), 1.0, 1e-8);
}

TEST(ClassificationTest, FollowsLongBenchIncludingItsRemovalQuirk) {
  // Python: 0.5, 0.0, 0.5, 0.0.
  const std::vector<std::string> trec = {"Abbreviation", "Location", "Abbrev"};
  EXPECT_DOUBLE_EQ(ClassificationScore("Location and Abbreviation", "Abbreviation", trec), 0.5);
  const std::vector<std::string> two = {"Abbrev", "Abbreviation"};
  EXPECT_DOUBLE_EQ(ClassificationScore("The answer is Abbrev", "Abbreviation", two), 0.0);
  // "a" is removed, which makes Python skip "ab": matches stay [ab, abc].
  const std::vector<std::string> nested = {"a", "ab", "abc"};
  EXPECT_DOUBLE_EQ(ClassificationScore("ab abc", "abc", nested), 0.5);
  const std::vector<std::string> other = {"Entity", "Description"};
  EXPECT_DOUBLE_EQ(ClassificationScore("Entity", "Description", other), 0.0);
  EXPECT_DOUBLE_EQ(ClassificationScore("Description", "Description", other), 1.0);
}

TEST(RetrievalTest, ScoresTheShareOfNumbersEqualToTheParagraph) {
  EXPECT_DOUBLE_EQ(RetrievalScore("Paragraph 12", "Paragraph 12"), 1.0);
  EXPECT_DOUBLE_EQ(RetrievalScore("Paragraph 3 or Paragraph 12", "Paragraph 12"), 0.5);
  EXPECT_DOUBLE_EQ(RetrievalScore("no idea", "Paragraph 12"), 0.0);
  EXPECT_DOUBLE_EQ(RetrievalScore("12", "no paragraph here"), 0.0);  // LongBench raises
  EXPECT_DOUBLE_EQ(RetrievalZhScore("段落7", "段落7"), 1.0);
  // \d is Unicode: a full-width digit is a number that is not "12".
  EXPECT_DOUBLE_EQ(RetrievalScore("12 and ３", "Paragraph 12"), 0.5);
}

TEST(CountTest, ScoresTheShareOfNumbersEqualToTheCount) {
  EXPECT_DOUBLE_EQ(CountScore("There are 13 passages", "13"), 1.0);
  EXPECT_DOUBLE_EQ(CountScore("13 or 14 or 15", "13"), 1.0 / 3);
  EXPECT_DOUBLE_EQ(CountScore("many", "13"), 0.0);
  EXPECT_DOUBLE_EQ(CountScore("113", "13"), 0.0);  // whole runs of digits only
}

TEST(FuzzRatioTest, MatchesFuzzywuzzyWithLevenshtein) {
  // Python fuzz.ratio.
  EXPECT_EQ(FuzzRatio("abcd", "abce"), 75);
  EXPECT_EQ(FuzzRatio("kitten", "sitting"), 62);
  EXPECT_EQ(FuzzRatio("ab", "abcdef"), 50);
  EXPECT_EQ(FuzzRatio("abc", "xyzabc"), 67);
  EXPECT_EQ(FuzzRatio("return x + 1", "return x+1"), 91);
  EXPECT_EQ(FuzzRatio("same", "same"), 100);
  EXPECT_EQ(FuzzRatio("", ""), 100);
  EXPECT_EQ(FuzzRatio("", "x"), 0);
}

TEST(FuzzRatioTest, RoundsHalfToEvenAsPython) {
  EXPECT_EQ(FuzzRatio("a", "abcdefghijklmno"), 12);  // 12.5 -> 12
  EXPECT_EQ(FuzzRatio("abc", "abcdefghijklm"), 38);  // 37.5 -> 38
}

TEST(CodeSimTest, ComparesTheFirstLineThatIsNotACommentOrFence) {
  // Python: 0.77, 0.0.
  EXPECT_DOUBLE_EQ(CodeSimScore("\n\n# comment\n    return x + 1\nfoo", "return x+1"), 0.77);
  EXPECT_DOUBLE_EQ(CodeSimScore("```python\n// c\n", "x = 1"), 0.0);
  EXPECT_DOUBLE_EQ(CodeSimScore("x = 1\ny = 2", "x = 1"), 1.0);
}

TEST(StringMatchTest, FollowsRuler) {
  const std::vector<std::string> refs = {"71432", "Blue"};
  EXPECT_DOUBLE_EQ(StringMatchAll("the key is 71432, the colour is blue", refs), 1.0);
  EXPECT_DOUBLE_EQ(StringMatchAll("71432", refs), 0.5);
  EXPECT_DOUBLE_EQ(StringMatchPart("71432", refs), 1.0);
  EXPECT_DOUBLE_EQ(StringMatchPart("nothing", refs), 0.0);
  EXPECT_DOUBLE_EQ(StringMatchAll("anything", {}), 0.0);
}

TEST(PostprocessTest, RulerStripsAndTurnsControlCharactersIntoNewlines) {
  EXPECT_EQ(RulerPostprocess("  \t71432\x01x\n "), "71432\nx");
  EXPECT_EQ(RulerPostprocess("\xC2\xA0 ok \xE3\x80\x80"), "ok");  // Unicode spaces strip too
}

TEST(PostprocessTest, FirstLineSkipsLeadingNewlinesOnly) {
  EXPECT_EQ(FirstLine("\n\nanswer\nmore"), "answer");
  EXPECT_EQ(FirstLine(" answer\nmore"), " answer");
  EXPECT_EQ(FirstLine("\n\n"), "");
}

TEST(ScoreAnswerTest, AppliesPostprocessingAndMaxOverAnswers) {
  EvalExample ex;
  ex.metric = MetricKind::kQaF1;
  ex.answers = {"Paris", "the city of Paris"};
  EXPECT_DOUBLE_EQ(ScoreAnswer(ex, "city of Paris"), 1.0);  // the second answer matches fully
  ex.first_line_only = true;
  EXPECT_DOUBLE_EQ(ScoreAnswer(ex, "\nParis\nLondon Berlin"), 1.0);
  ex.first_line_only = false;
  EXPECT_NEAR(ScoreAnswer(ex, "\nParis\nLondon Berlin"), 0.5, 1e-12);  // best: P 1/3, R 1

  EvalExample passkey;
  passkey.metric = MetricKind::kStringMatchAll;
  passkey.answers = {"71432"};
  EXPECT_DOUBLE_EQ(ScoreAnswer(passkey, " 71432.\n"), 1.0);
  EXPECT_DOUBLE_EQ(ScoreAnswer(passkey, "71423"), 0.0);
}

TEST(ScoreAnswerTest, InvalidUtf8IsReadAsReplacementCharacters) {
  EvalExample ex;
  ex.metric = MetricKind::kQaF1;
  ex.answers = {"ok"};
  EXPECT_DOUBLE_EQ(ScoreAnswer(ex, "ok \xFF\xFE"), 2.0 / 3);  // tokens [ok, \uFFFD\uFFFD]
}

TEST(MetricKindTest, NamesRoundTrip) {
  for (MetricKind k : {MetricKind::kStringMatchAll, MetricKind::kQaF1, MetricKind::kRougeLZh,
                       MetricKind::kCodeSim, MetricKind::kFidelity}) {
    EXPECT_EQ(ParseMetricKind(MetricKindName(k)), k);
  }
  EXPECT_EQ(ParseMetricKind("bleu"), std::nullopt);
}

}  // namespace
}  // namespace ripplekv::eval
