#include "worker/data/data_dirs.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace ripplekv::worker {
namespace {

namespace fs = std::filesystem;

// A private temporary tree:
//   root/data/in.txt ("inside"), root/data/sub/deep.jsonl, root/data/sub/ (a directory),
//   root/datax/trick.txt (a sibling whose name extends "data"), root/outside/secret.txt
class DataDirsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = (fs::temp_directory_path() / "ripplekv_data_dirs_XXXXXX").string();
    ASSERT_NE(::mkdtemp(templ.data()), nullptr);
    root_ = fs::canonical(templ);
    fs::create_directories(root_ / "data" / "sub");
    fs::create_directories(root_ / "datax");
    fs::create_directories(root_ / "outside");
    Write(root_ / "data" / "in.txt", "inside");
    Write(root_ / "data" / "sub" / "deep.jsonl", "{\"text\": \"x\"}\n");
    Write(root_ / "datax" / "trick.txt", "sibling");
    Write(root_ / "outside" / "secret.txt", "secret");
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  static void Write(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }
  DataDirs Open() {
    auto dirs = DataDirs::Open({(root_ / "data").string()});
    EXPECT_TRUE(dirs.ok()) << dirs.status();
    return dirs.ok() ? *dirs : DataDirs();
  }
  std::string P(const std::string& rel) const { return (root_ / rel).string(); }

  fs::path root_;
};

TEST_F(DataDirsTest, AcceptsARegularFileInsideAndReturnsItsResolvedPath) {
  const DataDirs dirs = Open();
  auto r = dirs.Resolve(P("data/in.txt"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, P("data/in.txt"));
  auto deep = dirs.ReadFile(P("data/./sub//deep.jsonl"), 1 << 20);
  ASSERT_TRUE(deep.ok()) << deep.status();
  EXPECT_EQ(*deep, "{\"text\": \"x\"}\n");
  auto bytes = dirs.ReadFile(P("data/in.txt"), 1 << 20);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(*bytes, "inside");
}

TEST_F(DataDirsTest, RefusesAFileOutside) {
  const DataDirs dirs = Open();
  auto r = dirs.Resolve(P("outside/secret.txt"));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kPermissionDenied) << r.status();
  EXPECT_FALSE(dirs.ReadFile(P("outside/secret.txt"), 1 << 20).ok());
}

TEST_F(DataDirsTest, RefusesDotDotEscapes) {
  const DataDirs dirs = Open();
  auto r = dirs.ReadFile(P("data/../outside/secret.txt"), 1 << 20);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kPermissionDenied) << r.status();
  EXPECT_FALSE(dirs.Resolve(P("data/sub/../../outside/secret.txt")).ok());
}

TEST_F(DataDirsTest, RefusesASymlinkInsidePointingOutside) {
  fs::create_symlink(root_ / "outside" / "secret.txt", root_ / "data" / "link.txt");
  fs::create_directory_symlink(root_ / "outside", root_ / "data" / "linkdir");
  const DataDirs dirs = Open();
  EXPECT_EQ(dirs.Resolve(P("data/link.txt")).status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_FALSE(dirs.ReadFile(P("data/linkdir/secret.txt"), 1 << 20).ok());
}

// Decided (data_dirs.h): containment is judged on the target, so a link from outside to a file
// inside reads that file, which the operator allowed.
TEST_F(DataDirsTest, AcceptsASymlinkOutsidePointingInside) {
  fs::create_symlink(root_ / "data" / "in.txt", root_ / "outside" / "to_inside.txt");
  const DataDirs dirs = Open();
  auto r = dirs.Resolve(P("outside/to_inside.txt"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, P("data/in.txt"));
  EXPECT_EQ(dirs.ReadFile(P("outside/to_inside.txt"), 1 << 20).value_or(""), "inside");
}

TEST_F(DataDirsTest, ComparesWholeComponentsNotStringPrefixes) {
  const DataDirs dirs = Open();  // root/data must not admit root/datax
  EXPECT_EQ(dirs.Resolve(P("datax/trick.txt")).status().code(),
            absl::StatusCode::kPermissionDenied);
  // A data directory given with a trailing slash is the same directory.
  auto slash = DataDirs::Open({P("data") + "/"});
  ASSERT_TRUE(slash.ok()) << slash.status();
  EXPECT_FALSE(slash->Resolve(P("datax/trick.txt")).ok());
  EXPECT_TRUE(slash->Resolve(P("data/in.txt")).ok());
}

TEST_F(DataDirsTest, RefusesADirectoryAndTheDataDirectoryItself) {
  const DataDirs dirs = Open();
  EXPECT_EQ(dirs.Resolve(P("data/sub")).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(dirs.Resolve(P("data")).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(dirs.ReadFile(P("data/sub"), 1 << 20).ok());
}

TEST_F(DataDirsTest, RefusesAMissingFileAndARelativePath) {
  const DataDirs dirs = Open();
  EXPECT_EQ(dirs.Resolve(P("data/nope.txt")).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(dirs.Resolve("data/in.txt").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(DataDirsTest, RefusesAnUnreadableFile) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads files whatever their mode";
  fs::permissions(root_ / "data" / "in.txt", fs::perms::none);
  const DataDirs dirs = Open();
  EXPECT_EQ(dirs.ReadFile(P("data/in.txt"), 1 << 20).status().code(),
            absl::StatusCode::kPermissionDenied);
}

TEST_F(DataDirsTest, RefusesAFileOverTheSizeLimit) {
  const DataDirs dirs = Open();
  EXPECT_EQ(dirs.ReadFile(P("data/in.txt"), 3).status().code(),
            absl::StatusCode::kResourceExhausted);
}

TEST_F(DataDirsTest, NoDirectoriesRefuseEveryPath) {
  const DataDirs none;
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(none.Resolve(P("data/in.txt")).status().code(), absl::StatusCode::kFailedPrecondition);
  auto opened = DataDirs::Open({});
  ASSERT_TRUE(opened.ok());
  EXPECT_TRUE(opened->empty());
  EXPECT_FALSE(opened->ReadFile(P("data/in.txt"), 1 << 20).ok());
}

TEST_F(DataDirsTest, OpenFailsNamingAMissingDirectoryOrAFile) {
  auto missing = DataDirs::Open({P("data"), P("nope")});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find(P("nope")), std::string::npos) << missing.status();
  auto file = DataDirs::Open({P("data/in.txt")});
  EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument) << file.status();
}

TEST_F(DataDirsTest, ADataDirectoryGivenThroughASymlinkIsResolvedOnce) {
  fs::create_directory_symlink(root_ / "data", root_ / "alias");
  auto dirs = DataDirs::Open({P("alias")});
  ASSERT_TRUE(dirs.ok()) << dirs.status();
  ASSERT_EQ(dirs->dirs().size(), 1u);
  EXPECT_EQ(dirs->dirs()[0], P("data"));
  EXPECT_TRUE(dirs->Resolve(P("alias/in.txt")).ok());
  EXPECT_TRUE(dirs->Resolve(P("data/in.txt")).ok());
}

// Every read resolves again: a file accepted once and then replaced by a symlink to outside is
// refused. (The O_NOFOLLOW walk that covers a swap between ReadFile's own resolve and open is not
// reachable deterministically from a test.)
TEST_F(DataDirsTest, AFileReplacedByASymlinkToOutsideIsRefusedOnTheNextRead) {
  const DataDirs dirs = Open();
  ASSERT_TRUE(dirs.Resolve(P("data/in.txt")).ok());
  fs::remove(root_ / "data" / "in.txt");
  fs::create_symlink(root_ / "outside" / "secret.txt", root_ / "data" / "in.txt");
  auto bytes = dirs.ReadFile(P("data/in.txt"), 1 << 20);
  EXPECT_FALSE(bytes.ok());
  EXPECT_NE(bytes.value_or(""), "secret");
}

}  // namespace
}  // namespace ripplekv::worker
