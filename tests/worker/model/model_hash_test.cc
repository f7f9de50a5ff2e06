#include "worker/model/model_hash.h"

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/worker/model/hf_test_writer.h"

namespace ripplekv::worker {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;
using testing::WriteFile;

// Runs a shell command and returns its stdout; empty when it fails.
std::string Shell(const std::string& command) {
  std::string out;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  char buf[256];
  while (std::fgets(buf, sizeof(buf), pipe) != nullptr) out += buf;
  if (::pclose(pipe) != 0) return "";
  return out;
}

// The first field of `sha256sum` output.
std::string CoreutilsSha256(const std::string& command) {
  std::string out = Shell(command);
  return out.size() >= 64 ? out.substr(0, 64) : "";
}

bool HaveSha256sum() { return !Shell("sha256sum /dev/null").empty(); }

std::string RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

TEST(Sha256Test, MatchesKnownVectors) {
  EXPECT_EQ(*Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(*Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(Sha256Test, FileHashOfAbcMatchesKnownVector) {
  TempDir dir;
  WriteFile(dir.File("abc"), "abc");
  EXPECT_EQ(*Sha256FileHex(dir.File("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Sha256Test, MultiChunkFileMatchesSha256sum) {
  if (!HaveSha256sum()) GTEST_SKIP() << "sha256sum (coreutils) not on PATH";
  TempDir dir;
  // Two full 4 MiB chunks and a ragged tail, so chunk boundaries are exercised.
  const std::string path = dir.File("big.gguf");
  WriteFile(path, RandomBytes(2 * kHashChunkBytes + 12345, 5));
  auto hash = Sha256FileHex(path);
  ASSERT_TRUE(hash.ok()) << hash.status();
  EXPECT_EQ(*hash, CoreutilsSha256("sha256sum '" + path + "'"));
  EXPECT_EQ(*ModelHash(path), *hash);  // a single file's model hash is its sha256sum
}

TEST(ModelHashTest, SingleSafetensorsDirectoryHashesItsWeightFileOnly) {
  if (!HaveSha256sum()) GTEST_SKIP() << "sha256sum (coreutils) not on PATH";
  TempDir dir;
  WriteFile(dir.File("model.safetensors"), RandomBytes(100000, 1));
  WriteFile(dir.File("config.json"), "{}");
  auto hash = ModelHash(dir.path());
  ASSERT_TRUE(hash.ok()) << hash.status();
  EXPECT_EQ(*hash, CoreutilsSha256("sha256sum '" + dir.File("model.safetensors") + "'"));
  WriteFile(dir.File("config.json"), "{\"changed\": true}");
  WriteFile(dir.File("tokenizer.json"), "{}");
  EXPECT_EQ(*ModelHash(dir.path()), *hash);
}

// Writes shards whose byte-wise order ("B" < "a") differs from a case-insensitive one, an index
// naming them, an unlisted extra weight file and non-weight files.
void WriteShardedModel(const TempDir& dir) {
  WriteFile(dir.File("a-00002.safetensors"), RandomBytes(70000, 2));
  WriteFile(dir.File("B-00001.safetensors"), RandomBytes(50000, 3));
  WriteFile(dir.File("model.safetensors.index.json"),
            R"({"weight_map": {"x": "a-00002.safetensors", "y": "B-00001.safetensors",
                               "z": "a-00002.safetensors"}})");
  WriteFile(dir.File("consolidated.safetensors"), RandomBytes(1000, 4));
  WriteFile(dir.File("config.json"), "{}");
  WriteFile(dir.File("tokenizer.json"), "{\"model\": {}}");
}

TEST(ModelHashTest, ShardedDirectoryMatchesTheCoreutilsRecipe) {
  if (!HaveSha256sum()) GTEST_SKIP() << "sha256sum (coreutils) not on PATH";
  TempDir dir;
  WriteShardedModel(dir);
  auto hash = ModelHash(dir.path());
  ASSERT_TRUE(hash.ok()) << hash.status();
  // docs/MODEL_HASH.md: sha256sum the shards the index names, sorted byte-wise, then hash that.
  const std::string recipe = "cd '" + dir.path() +
                             "' && printf '%s\\n' B-00001.safetensors a-00002.safetensors"
                             " | LC_ALL=C sort | xargs sha256sum | sha256sum";
  EXPECT_EQ(*hash, CoreutilsSha256(recipe));
  // The manifest, spelled out.
  const std::string manifest =
      *Sha256FileHex(dir.File("B-00001.safetensors")) + "  B-00001.safetensors\n" +
      *Sha256FileHex(dir.File("a-00002.safetensors")) + "  a-00002.safetensors\n";
  EXPECT_EQ(*hash, *Sha256Hex(manifest));
}

TEST(ModelHashTest, ShardedHashChangesWithAnyShardByteButNotWithOtherFiles) {
  TempDir dir;
  WriteShardedModel(dir);
  const std::string before = *ModelHash(dir.path());
  WriteFile(dir.File("config.json"), "{\"x\": 1}");
  WriteFile(dir.File("consolidated.safetensors"), "changed");
  EXPECT_EQ(*ModelHash(dir.path()), before);
  std::string shard = testing::ReadFile(dir.File("a-00002.safetensors"));
  shard[shard.size() / 2] ^= 1;
  WriteFile(dir.File("a-00002.safetensors"), shard);
  EXPECT_NE(*ModelHash(dir.path()), before);
}

TEST(ModelHashTest, RenamingAShardChangesTheHash) {
  TempDir dir;
  WriteFile(dir.File("s1.safetensors"), "one");
  WriteFile(dir.File("s2.safetensors"), "two");
  WriteFile(dir.File("model.safetensors.index.json"),
            R"({"weight_map": {"x": "s1.safetensors", "y": "s2.safetensors"}})");
  const std::string before = *ModelHash(dir.path());
  std::rename(dir.File("s2.safetensors").c_str(), dir.File("s3.safetensors").c_str());
  WriteFile(dir.File("model.safetensors.index.json"),
            R"({"weight_map": {"x": "s1.safetensors", "y": "s3.safetensors"}})");
  EXPECT_NE(*ModelHash(dir.path()), before);
}

TEST(ModelHashTest, FilesDigestListsEveryVisibleFileAndAgreesWithModelHash) {
  TempDir dir;
  WriteShardedModel(dir);
  WriteFile(dir.File(".gitattributes"), "*.safetensors filter=lfs");
  auto digest = ModelFilesDigest(dir.path());
  ASSERT_TRUE(digest.ok()) << digest.status();
  EXPECT_EQ(digest->model_hash, *ModelHash(dir.path()));
  std::vector<std::string> names;
  std::vector<std::string> weights;
  for (const FileDigest& f : digest->files) {
    names.push_back(f.name);
    if (f.in_model_hash) weights.push_back(f.name);
    EXPECT_EQ(f.sha256, *Sha256FileHex(dir.File(f.name))) << f.name;
  }
  EXPECT_EQ(names, (std::vector<std::string>{"B-00001.safetensors", "a-00002.safetensors",
                                             "config.json", "consolidated.safetensors",
                                             "model.safetensors.index.json", "tokenizer.json"}));
  EXPECT_EQ(weights, (std::vector<std::string>{"B-00001.safetensors", "a-00002.safetensors"}));
  EXPECT_EQ(digest->files[0].size_bytes, 50000u);
}

TEST(ModelHashTest, FilesDigestOfASingleFile) {
  TempDir dir;
  WriteFile(dir.File("m.gguf"), "abc");
  auto digest = ModelFilesDigest(dir.File("m.gguf"));
  ASSERT_TRUE(digest.ok()) << digest.status();
  ASSERT_EQ(digest->files.size(), 1u);
  EXPECT_EQ(digest->files[0].name, "m.gguf");
  EXPECT_TRUE(digest->files[0].in_model_hash);
  EXPECT_EQ(digest->model_hash, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(ModelHashTest, MissingPathsAndEmptyDirectoriesAreNotFound) {
  TempDir dir;
  EXPECT_EQ(ModelHash(dir.File("absent.gguf")).status().code(), absl::StatusCode::kNotFound);
  auto empty = ModelHash(dir.path());
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(empty.status().message(), HasSubstr("model.safetensors"));
  EXPECT_EQ(ModelFilesDigest(dir.path()).status().code(), absl::StatusCode::kNotFound);
}

TEST(ModelHashTest, IndexNamingAMissingShardIsNotFound) {
  TempDir dir;
  WriteFile(dir.File("model.safetensors.index.json"),
            R"({"weight_map": {"x": "gone.safetensors"}})");
  auto hash = ModelHash(dir.path());
  EXPECT_EQ(hash.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(hash.status().message(), HasSubstr("gone.safetensors"));
}

}  // namespace
}  // namespace ripplekv::worker
