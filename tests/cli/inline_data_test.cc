// `ripplekv submit --data F` reads F on the client (cli/inline_data.h).
#include "cli/inline_data.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "scheduler/service/convert.h"

namespace ripplekv::cli {
namespace {

namespace fs = std::filesystem;

static_assert(kMaxInlineDataBytes == scheduler::service::kMaxInlineDataBytes,
              "the client's early check must use the scheduler's limit");

class InlineDataTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = (fs::temp_directory_path() / "ripplekv_inline_data_XXXXXX").string();
    ASSERT_NE(::mkdtemp(templ.data()), nullptr);
    dir_ = templ;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string Write(const std::string& name, const std::string& bytes) {
    const fs::path p = dir_ / name;
    std::ofstream(p, std::ios::binary) << bytes;
    return p.string();
  }
  fs::path dir_;
};

TEST_F(InlineDataTest, JsonlExtensionsInAnyCaseGiveLinesWithoutLineEnds) {
  for (const char* name : {"a.jsonl", "b.NDJSON", "c.Json"}) {
    auto d = ReadInlineData(Write(name, "{\"text\": \"x\"}\r\n\n{\"text\": \"y\"}"));
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_TRUE(d->jsonl) << name;
    EXPECT_EQ(d->lines, (std::vector<std::string>{"{\"text\": \"x\"}", "", "{\"text\": \"y\"}"}));
    EXPECT_EQ(d->inline_bytes, 14u + 1u + 14u);  // each line and its '\n'
  }
}

TEST_F(InlineDataTest, OtherFilesAreSentAsTextUnchanged) {
  const std::string text = "\xEF\xBB\xBFOne line.\r\nTwo.\n";
  auto d = ReadInlineData(Write("book.txt", text));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_FALSE(d->jsonl);
  EXPECT_EQ(d->text, text);
  EXPECT_EQ(d->inline_bytes, text.size());
}

TEST_F(InlineDataTest, AFileOverTheLimitNamesTheLimitAndItsSize) {
  const std::string path = Write("big.txt", std::string(100, 'a'));
  auto d = ReadInlineData(path, 64);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kResourceExhausted);
  const std::string m(d.status().message());
  for (const std::string& part : {path, std::string("100 bytes"), std::string("limit of 64 bytes"),
                                  std::string("--data-on-workers")}) {
    EXPECT_NE(m.find(part), std::string::npos) << part << " in " << m;
  }
}

TEST_F(InlineDataTest, UnreadableEmptyOrNonUtf8FilesAreErrorsNamingTheFile) {
  const std::string missing = (dir_ / "missing.jsonl").string();
  auto d = ReadInlineData(missing);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(d.status().message().find(missing), std::string::npos) << d.status();

  d = ReadInlineData(dir_.string());
  EXPECT_FALSE(d.ok());

  const std::string blank = Write("blank.jsonl", "\n  \n");
  d = ReadInlineData(blank);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(d.status().message().find(blank), std::string::npos) << d.status();

  const std::string latin1 = Write("latin1.txt", "caf\xE9");
  d = ReadInlineData(latin1);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(d.status().message().find("byte 3"), std::string::npos) << d.status();
}

}  // namespace
}  // namespace ripplekv::cli
