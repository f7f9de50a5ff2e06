// The built-in corpora: Project Gutenberg boilerplate stripping, the error for a corpus that is not
// installed, the versioned directory of a file set, and the installed books, code and docs
// (skipped when their Debian package is missing).

#include "worker/data/corpora.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
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

// A temporary directory holding versioned copies of a two-file set.
class BuiltinFileSetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ =
        std::filesystem::path(::testing::TempDir()) /
        (std::string("corpora_") + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_);
    prefix_ = (root_ / "lang").string();
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  void Write(const std::string& relative, const std::string& bytes) {
    const std::filesystem::path path = root_ / relative;
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << bytes;
  }
  BuiltinFileSet Set() const {
    return {.name = "code",
            .domain = kDomainCode,
            .title = "test files",
            .package = "some-debian-package",
            .dir_prefix = prefix_,
            .files = kFiles};
  }

  static constexpr std::string_view kFiles[] = {"b.py", "sub/a.py"};
  std::filesystem::path root_;
  std::string prefix_;
};

TEST_F(BuiltinFileSetTest, PicksTheHighestVersionHoldingEveryFile) {
  for (const char* version : {"3.9", "3.11"}) {
    Write(std::string("lang") + version + "/b.py", std::string("b ") + version);
    Write(std::string("lang") + version + "/sub/a.py", std::string("a ") + version);
  }
  Write("lang3.12/b.py", "incomplete");            // sub/a.py missing
  Write("lang3.99-config/b.py", "not a version");  // not digits and dots
  Write("lang3.99-config/sub/a.py", "not a version");
  Write("lang/b.py", "no version");
  Write("lang/sub/a.py", "no version");
  auto dir = FindBuiltinFileSetDir(Set());
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_EQ(*dir, prefix_ + "3.11");  // numerically above 3.9
  auto files = ReadBuiltinFileSet(Set());
  ASSERT_TRUE(files.ok()) << files.status();
  ASSERT_EQ(files->size(), 2u);
  EXPECT_EQ((*files)[0].path, prefix_ + "3.11/b.py");  // list order
  EXPECT_EQ((*files)[0].text, "b 3.11");
  EXPECT_EQ((*files)[1].path, prefix_ + "3.11/sub/a.py");
  EXPECT_EQ((*files)[1].text, "a 3.11");
}

TEST_F(BuiltinFileSetTest, NoCompleteDirectoryNamesThePackageAndTheMissingFile) {
  Write("lang3.12/b.py", "incomplete");
  auto dir = FindBuiltinFileSetDir(Set());
  ASSERT_FALSE(dir.ok());
  EXPECT_EQ(dir.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(dir.status().message(), HasSubstr("install the Debian package some-debian-package"));
  EXPECT_THAT(dir.status().message(), HasSubstr(prefix_ + "3.12/sub/a.py is missing"));
  std::filesystem::remove_all(root_);
  auto none = ReadBuiltinFileSet(Set());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(none.status().message(), HasSubstr("some-debian-package"));
}

TEST_F(BuiltinFileSetTest, ABlankFileIsAnError) {
  Write("lang1/b.py", "\xEF\xBB\xBF \n");
  Write("lang1/sub/a.py", "a");
  auto files = ReadBuiltinFileSet(Set());
  EXPECT_EQ(files.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(files.status().message(), HasSubstr("lang1/b.py"));
}

// The installed code and documentation (scripts/deps installs their packages): every listed
// file, in list order, the same bytes on every read.
TEST(BuiltinFileSetInstalledTest, CodeAndDocsAreReadInListOrderAndDeterministically) {
  for (const BuiltinFileSet& set : {kPythonStdlib, kCmakeManuals}) {
    SCOPED_TRACE(std::string(set.name));
    auto dir = FindBuiltinFileSetDir(set);
    if (!dir.ok()) GTEST_SKIP() << dir.status();
    EXPECT_TRUE(std::is_sorted(set.files.begin(), set.files.end()));
    auto files = ReadBuiltinFileSet(set);
    ASSERT_TRUE(files.ok()) << files.status();
    ASSERT_EQ(files->size(), set.files.size());
    size_t bytes = 0;
    for (size_t i = 0; i < files->size(); ++i) {
      EXPECT_EQ((*files)[i].path, *dir + "/" + std::string(set.files[i]));
      bytes += (*files)[i].text.size();
    }
    EXPECT_GT(bytes, 400000u);
    auto again = ReadBuiltinFileSet(set);
    ASSERT_TRUE(again.ok());
    for (size_t i = 0; i < files->size(); ++i) EXPECT_EQ((*again)[i].text, (*files)[i].text);
  }
  auto code = ReadBuiltinFileSet(kPythonStdlib);
  if (code.ok()) {
    EXPECT_THAT((*code)[0].text, HasSubstr("import "));
  }
  auto docs = ReadBuiltinFileSet(kCmakeManuals);
  if (docs.ok()) {
    EXPECT_THAT((*docs)[0].text, HasSubstr("cmake-buildsystem(7)"));
  }
}

}  // namespace
}  // namespace ripplekv::worker
