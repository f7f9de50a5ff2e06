// The built-in corpora: Project Gutenberg boilerplate stripping, the error for a corpus that is not
// installed, and the installed books (skipped when their Debian package is missing).

#include "worker/data/corpora.h"

#include <filesystem>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ripplekv::worker {
namespace {

using ::testing::HasSubstr;

TEST(GutenbergStripTest, KeepsOnlyTheBookBetweenTheMarkers) {
  const std::string book =
      "\xEF\xBB\xBFProject Gutenberg's Book, by Someone\r\n"
      "\r\n"
      "*** START OF THIS PROJECT GUTENBERG EBOOK BOOK ***\r\n"
      "\r\n"
      "Produced by a volunteer\r\n"
      "and another one\r\n"
      "\r\n"
      "\r\n"
      "CHAPTER I\r\n"
      "\r\n"
      "It was a dark night.\r\n"
      "\r\n"
      "End of the Project Gutenberg EBook of Book, by Someone\r\n"
      "\r\n"
      "*** END OF THIS PROJECT GUTENBERG EBOOK BOOK ***\r\n"
      "license text\r\n";
  EXPECT_EQ(StripGutenbergBoilerplate(book), "CHAPTER I\n\nIt was a dark night.");
}

TEST(GutenbergStripTest, TextWithoutMarkersOnlyLosesCreditsAndOuterBlankLines) {
  EXPECT_EQ(StripGutenbergBoilerplate("Produced by X.\n\n\n  TITLE\n\nBody.\n\n"),
            "  TITLE\n\nBody.");
  EXPECT_EQ(StripGutenbergBoilerplate("\n\nplain\ntext\n"), "plain\ntext");
  EXPECT_EQ(StripGutenbergBoilerplate(""), "");
}

TEST(BuiltinCorpusTest, MissingCorpusNamesThePackageToInstall) {
  constexpr BuiltinCorpus kAbsent{.name = "absent",
                                  .title = "Absent",
                                  .package = "some-debian-package",
                                  .path = "/nonexistent/ripplekv/corpus.txt"};
  auto text = ReadBuiltinCorpus(kAbsent);
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(text.status().message(), HasSubstr("install the Debian package some-debian-package"));
  EXPECT_THAT(text.status().message(), HasSubstr("/nonexistent/ripplekv/corpus.txt"));
}

// The installed books (scripts/deps installs their package): boilerplate gone, prose kept.
TEST(BuiltinCorpusTest, InstalledBooksAreStrippedProse) {
  for (const BuiltinCorpus& corpus : {kSherlockHolmes, kTomSawyer}) {
    if (!std::filesystem::exists(std::string(corpus.path))) {
      GTEST_SKIP() << corpus.path << " is missing: install " << corpus.package << " (scripts/deps)";
    }
    auto text = ReadBuiltinCorpus(corpus);
    ASSERT_TRUE(text.ok()) << text.status();
    EXPECT_GT(text->size(), 300000u) << corpus.name;
    EXPECT_EQ(text->find("Gutenberg"), std::string::npos) << corpus.name;
    EXPECT_EQ(text->find("Produced by"), std::string::npos) << corpus.name;
    EXPECT_EQ(text->find('\r'), std::string::npos) << corpus.name;
  }
  auto holmes = ReadBuiltinCorpus(kSherlockHolmes);
  ASSERT_TRUE(holmes.ok());
  EXPECT_TRUE(holmes->starts_with("THE ADVENTURES OF SHERLOCK HOLMES")) << holmes->substr(0, 80);
  EXPECT_TRUE(
      holmes->ends_with("Walsall, where I believe that she has met with considerable "
                        "success."))
      << holmes->substr(holmes->size() - 80);
}

}  // namespace
}  // namespace ripplekv::worker
