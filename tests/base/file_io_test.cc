// base/file_io.h: the path join, the errno -> Status mapping of docs/ERRORS.md, bounded
// whole-file and prefix reads, atomic writes.

#include "base/file_io.h"

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ripplekv {
namespace {

using ::testing::HasSubstr;

class FileIoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        std::filesystem::path(::testing::TempDir()) /
        (std::string("file_io_") + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& bytes) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }

  std::filesystem::path dir_;
};

TEST(JoinPathTest, JoinsWithExactlyOneSlash) {
  EXPECT_EQ(JoinPath("a", "b"), "a/b");
  EXPECT_EQ(JoinPath("a/", "b"), "a/b");
  EXPECT_EQ(JoinPath("/", "b"), "/b");
  EXPECT_EQ(JoinPath("", "b"), "b");
  EXPECT_EQ(JoinPath("dir/sub", "model.safetensors"), "dir/sub/model.safetensors");
  EXPECT_EQ(JoinPath("a", ""), "a/");
}

TEST(FileErrnoStatusTest, MapsErrnoToOneCodeAndNamesPathAndAction) {
  const Status missing = FileErrnoStatus(ENOENT, "x.gguf", "open");
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.message()), HasSubstr("x.gguf: cannot open: "));
  EXPECT_EQ(FileErrnoStatus(ENOTDIR, "a/b", "open").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(FileErrnoStatus(EACCES, "p", "open").code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(FileErrnoStatus(EPERM, "p", "open").code(), absl::StatusCode::kPermissionDenied);
  // A failed fstat/stat/read is mapped by its errno like any other call: an I/O error is
  // Unavailable (retry), whichever reader hit it; a size that does not fit is ResourceExhausted.
  const Status stat_failed = FileErrnoStatus(EIO, "m.safetensors", "stat");
  EXPECT_EQ(stat_failed.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(stat_failed.message()), HasSubstr("m.safetensors: cannot stat"));
  EXPECT_EQ(FileErrnoStatus(EIO, "f", "read").code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(FileErrnoStatus(EOVERFLOW, "f", "stat").code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(FileErrnoStatus(EISDIR, "d", "read").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FileErrnoStatus(ENOMEM, "f", "map 9 bytes").code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(FileErrnoStatus(ENOSPC, "f", "write").code(), absl::StatusCode::kResourceExhausted);
}

TEST_F(FileIoTest, ReadFileBoundedReadsWholeFilesUpToTheCap) {
  const std::string path = Write("f.txt", "hello\nworld");
  auto whole = ReadFileBounded(path, 11);
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(*whole, "hello\nworld");
  auto empty = ReadFileBounded(Write("empty", ""), 0);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(*empty, "");

  auto too_large = ReadFileBounded(path, 10);
  EXPECT_EQ(too_large.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(too_large.status().message()), HasSubstr(path));
  EXPECT_THAT(std::string(too_large.status().message()), HasSubstr("11 bytes"));
}

TEST_F(FileIoTest, ReadErrorsFollowDocsErrorsMd) {
  const std::string missing = (dir_ / "nope").string();
  for (auto read : {ReadFileBounded(missing, 100), ReadFilePrefix(missing, 4)}) {
    EXPECT_EQ(read.status().code(), absl::StatusCode::kNotFound);
    EXPECT_THAT(std::string(read.status().message()), HasSubstr(missing + ": cannot open"));
  }
  for (auto read : {ReadFileBounded(dir_.string(), 100), ReadFilePrefix(dir_.string(), 4)}) {
    EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(read.status().message()), HasSubstr("not a regular file"));
  }
}

TEST_F(FileIoTest, ReadFilePrefixReadsAtMostTheFirstBytes) {
  const std::string path = Write("model.gguf", "GGUF and then a great many bytes");
  auto magic = ReadFilePrefix(path, 4);
  ASSERT_TRUE(magic.ok()) << magic.status();
  EXPECT_EQ(*magic, "GGUF");
  auto short_file = ReadFilePrefix(Write("short", "GG"), 4);
  ASSERT_TRUE(short_file.ok());
  EXPECT_EQ(*short_file, "GG");
}

TEST_F(FileIoTest, WriteFileAtomicallyReplacesTheFileAndReportsMissingDirectories) {
  const std::string path = (dir_ / "out.json").string();
  ASSERT_TRUE(WriteFileAtomically(path, "one").ok());
  ASSERT_TRUE(WriteFileAtomically(path, "two!").ok());
  EXPECT_EQ(*ReadFileBounded(path, 100), "two!");
  const Status no_dir = WriteFileAtomically((dir_ / "no/such/out.json").string(), "x");
  EXPECT_EQ(no_dir.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(no_dir.message()), HasSubstr("no/such/out.json"));
}

}  // namespace
}  // namespace ripplekv
