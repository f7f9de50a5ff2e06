#include "worker/model/safetensors_reader.h"

#include <fcntl.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <deque>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/worker/model/hf_test_writer.h"

namespace ripplekv::worker {
namespace {

using testing::F32Bytes;
using ::testing::HasSubstr;
using testing::SafetensorsBytes;
using testing::SafetensorsFromParts;
using testing::TempDir;
using testing::TestTensor;
using testing::U16Bytes;
using testing::WriteFile;

// Parses `bytes` from memory. FromBuffer() needs the bytes to outlive the file, so they are kept
// for the life of the test program.
StatusOr<std::unique_ptr<SafetensorsFile>> FromString(std::string bytes,
                                                      const std::string& name = "mem.safetensors") {
  static std::deque<std::string> kept;
  const std::string& stored = kept.emplace_back(std::move(bytes));
  return SafetensorsFile::FromBuffer(
      {reinterpret_cast<const uint8_t*>(stored.data()), stored.size()}, name);
}

// A header describing one tensor, with its data.
std::string OneTensor(const std::string& entry, const std::string& data) {
  return SafetensorsFromParts("{\"t\":" + entry + "}", data);
}

TEST(SafetensorsFileTest, LoadsF32TensorWithShapeAndValues) {
  TempDir dir;
  const std::vector<float> v = {1.5f, -2.0f, 3.25f, 0.0f, 7.0f, -0.125f};
  WriteFile(dir.File("a.safetensors"), SafetensorsBytes({{"w", "F32", {2, 3}, F32Bytes(v)},
                                                         {"b", "F32", {1}, F32Bytes({{9.0f}})}}));
  auto file = SafetensorsFile::Open(dir.File("a.safetensors"));
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_EQ((*file)->tensors().size(), 2u);
  EXPECT_EQ((*file)->tensors()[0].name, "b");  // sorted by name
  const SafetensorsTensorInfo* info = (*file)->FindTensor("w");
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->dtype, SafetensorsDtype::kF32);
  EXPECT_EQ(info->size_bytes(), 24u);
  auto t = (*file)->LoadTensor("w");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->shape(), (kernels::Shape{2, 3}));
  EXPECT_EQ(std::vector<float>(t->span().begin(), t->span().end()), v);
}

TEST(SafetensorsFileTest, ConvertsF16AndBf16BitPatternsExactly) {
  // 1, -2, smallest subnormal 2^-24, 65504 (largest finite), +inf.
  const std::vector<uint16_t> half = {0x3C00, 0xC000, 0x0001, 0x7BFF, 0x7C00};
  // 1, -3, 2^-133 (a bf16 subnormal), 3.140625.
  const std::vector<uint16_t> bf16 = {0x3F80, 0xC040, 0x0001, 0x4049};
  auto file = FromString(
      SafetensorsBytes({{"h", "F16", {5}, U16Bytes(half)}, {"b", "BF16", {2, 2}, U16Bytes(bf16)}}));
  ASSERT_TRUE(file.ok()) << file.status();
  auto h = (*file)->LoadTensor("h");
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->data()[0], 1.0f);
  EXPECT_EQ(h->data()[1], -2.0f);
  EXPECT_EQ(h->data()[2], std::ldexp(1.0f, -24));
  EXPECT_EQ(h->data()[3], 65504.0f);
  EXPECT_TRUE(std::isinf(h->data()[4]) && h->data()[4] > 0);
  auto b = (*file)->LoadTensor("b");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->shape(), (kernels::Shape{2, 2}));
  EXPECT_EQ(b->data()[0], 1.0f);
  EXPECT_EQ(b->data()[1], -3.0f);
  EXPECT_EQ(b->data()[2], std::ldexp(1.0f, -133));
  EXPECT_EQ(b->data()[3], 3.140625f);
}

TEST(SafetensorsFileTest, ReadsUnalignedDataSection) {
  // A 13-byte header puts the data at file offset 21: no element is naturally aligned.
  const std::vector<float> v = {1.0f, 2.0f, 3.0f};
  std::string header = "{\"t\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]}}";
  header += std::string((4 - (8 + header.size()) % 4) % 4 + 1, ' ');  // force misalignment
  auto file = FromString(SafetensorsFromParts(header, F32Bytes(v)));
  ASSERT_TRUE(file.ok()) << file.status();
  auto t = (*file)->LoadTensor("t");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(std::vector<float>(t->span().begin(), t->span().end()), v);
}

TEST(SafetensorsFileTest, IgnoresMetadataAndAcceptsScalarsAndEmptyTensors) {
  auto file = FromString(
      SafetensorsBytes({{"scalar", "F32", {}, F32Bytes({{4.0f}})}, {"empty", "F32", {0, 3}, ""}},
                       "\"__metadata__\":{\"format\":\"pt\"}"));
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->tensors().size(), 2u);
  EXPECT_EQ((*file)->FindTensor("__metadata__"), nullptr);
  auto s = (*file)->LoadTensor("scalar");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->numel(), 1);
  EXPECT_EQ(s->data()[0], 4.0f);
  auto e = (*file)->LoadTensor("empty");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->shape(), (kernels::Shape{0, 3}));
}

TEST(SafetensorsFileTest, OpensOtherDtypesButRefusesToLoadThem) {
  auto file = FromString(SafetensorsBytes(
      {{"ids", "I64", {2}, std::string(16, '\0')}, {"w", "F32", {1}, F32Bytes({{1.0f}})}}));
  ASSERT_TRUE(file.ok()) << file.status();
  auto t = (*file)->LoadTensor("ids");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(t.status().message(), HasSubstr("'ids'"));
  EXPECT_THAT(t.status().message(), HasSubstr("I64"));
  EXPECT_TRUE((*file)->LoadTensor("w").ok());
}

TEST(SafetensorsFileTest, UnknownDtypeIsUnimplementedNamingTensorAndDtype) {
  auto file = FromString(OneTensor(R"({"dtype":"F4","shape":[2],"data_offsets":[0,1]})", "x"));
  EXPECT_EQ(file.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(file.status().message(), HasSubstr("'t'"));
  EXPECT_THAT(file.status().message(), HasSubstr("'F4'"));
}

TEST(SafetensorsFileTest, UnknownTensorIsNotFound) {
  auto file = FromString(SafetensorsBytes({{"w", "F32", {1}, F32Bytes({{1.0f}})}}));
  ASSERT_TRUE(file.ok());
  auto t = (*file)->LoadTensor("nope");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(t.status().message(), HasSubstr("'nope'"));
}

TEST(SafetensorsFileTest, MissingFileIsNotFoundAndDirectoryIsInvalid) {
  TempDir dir;
  EXPECT_EQ(SafetensorsFile::Open(dir.File("absent.safetensors")).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(SafetensorsFile::Open(dir.path()).status().code(), absl::StatusCode::kInvalidArgument);
}

void ExpectInvalid(const std::string& bytes, const std::string& needle) {
  auto file = FromString(bytes, "bad.safetensors");
  ASSERT_FALSE(file.ok()) << "accepted a file that should fail with: " << needle;
  EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument) << file.status();
  EXPECT_THAT(file.status().message(), HasSubstr("bad.safetensors"));
  EXPECT_THAT(file.status().message(), HasSubstr(needle));
}

TEST(SafetensorsFileTest, RejectsFileShorterThanLengthPrefix) {
  ExpectInvalid("", "too small");
  ExpectInvalid("\x02\x00\x00", "too small");
}

TEST(SafetensorsFileTest, RejectsHeaderLengthBeyondFile) {
  std::string bytes = SafetensorsFromParts("{}", "");
  bytes[0] = 3;  // claims 3 header bytes, 2 follow
  ExpectInvalid(bytes, "header length 3");
}

TEST(SafetensorsFileTest, RejectsHeaderLengthAboveLimitWithoutReadingIt) {
  // A sparse file: big enough to hold the claimed header, but nothing is allocated for it.
  TempDir dir;
  const std::string path = dir.File("huge.safetensors");
  const uint64_t n = SafetensorsFile::kMaxHeaderBytes + 1;
  std::string prefix(8, '\0');
  std::memcpy(prefix.data(), &n, 8);
  WriteFile(path, prefix);
  ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(8 + n + 16)), 0);
  auto file = SafetensorsFile::Open(path);
  EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(file.status().message(), HasSubstr("exceeds the limit"));
}

TEST(SafetensorsFileTest, JsonSyntaxErrorNamesFileAndByteOffset) {
  // The stray '}' is header byte 9, file byte 8 + 9 = 17.
  ExpectInvalid(SafetensorsFromParts("{\"a\": [1,}", ""), "byte offset 17");
  ExpectInvalid(SafetensorsFromParts("[1, 2]", ""), "not a JSON object");
  ExpectInvalid(SafetensorsFromParts("{\"a\":\"\xff\"}", ""), "not valid JSON");
}

TEST(SafetensorsFileTest, RejectsDuplicateTensorNames) {
  const std::string e = R"({"dtype":"F32","shape":[1],"data_offsets":[0,4]})";
  ExpectInvalid(SafetensorsFromParts("{\"t\":" + e + ",\"t\":" + e + "}", F32Bytes({{1.0f}})),
                "'t' twice");
}

TEST(SafetensorsFileTest, RejectsMalformedTensorEntries) {
  const std::string d8(8, '\0');
  ExpectInvalid(OneTensor("3", d8), "not a JSON object");
  ExpectInvalid(OneTensor(R"({"shape":[2],"data_offsets":[0,8]})", d8), "'dtype'");
  ExpectInvalid(OneTensor(R"({"dtype":7,"shape":[2],"data_offsets":[0,8]})", d8), "'dtype'");
  ExpectInvalid(OneTensor(R"({"dtype":"F32","data_offsets":[0,8]})", d8), "'shape'");
  ExpectInvalid(OneTensor(R"({"dtype":"F32","shape":[-2],"data_offsets":[0,8]})", d8), "-2");
  ExpectInvalid(OneTensor(R"({"dtype":"F32","shape":[2.0],"data_offsets":[0,8]})", d8), "shape");
  ExpectInvalid(OneTensor(R"({"dtype":"F32","shape":[2]})", d8), "'data_offsets'");
  ExpectInvalid(OneTensor(R"({"dtype":"F32","shape":[2],"data_offsets":[0]})", d8),
                "'data_offsets'");
  ExpectInvalid(OneTensor(R"({"dtype":"F32","shape":[2],"data_offsets":[0,-8]})", d8),
                "'data_offsets'");
}

TEST(SafetensorsFileTest, RejectsOffsetsOutOfOrderOrOutOfBounds) {
  const std::string d8(8, '\0');
  ExpectInvalid(OneTensor(R"({"dtype":"F32","shape":[0],"data_offsets":[8,4]})", d8),
                "ends before it begins");
  ExpectInvalid(OneTensor(R"({"dtype":"F32","shape":[4],"data_offsets":[0,16]})", d8),
                "run past the data section");
  ExpectInvalid(
      OneTensor(R"({"dtype":"F32","shape":[1],"data_offsets":[18446744073709551615,4]})", d8),
      "ends before it begins");
}

TEST(SafetensorsFileTest, RejectsSizeThatDisagreesWithShape) {
  ExpectInvalid(
      OneTensor(R"({"dtype":"F32","shape":[3],"data_offsets":[0,8]})", std::string(12, '\0')),
      "needs 12");
  ExpectInvalid(
      OneTensor(R"({"dtype":"BF16","shape":[2,2],"data_offsets":[0,4]})", std::string(8, '\0')),
      "needs 8");
}

TEST(SafetensorsFileTest, RejectsShapeWhoseByteSizeOverflows) {
  ExpectInvalid(
      OneTensor(R"({"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]})", ""),
      "overflows");
  ExpectInvalid(
      OneTensor(R"({"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,0]})", ""),
      "overflows");
}

TEST(SafetensorsFileTest, RejectsOverlappingTensors) {
  const std::string header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                             R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})";
  ExpectInvalid(SafetensorsFromParts(header, std::string(12, '\0')), "overlap");
}

TEST(SafetensorsFileTest, ZeroSizedTensorInsideAnotherIsNotAnOverlap) {
  const std::string header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                             R"("b":{"dtype":"F32","shape":[0],"data_offsets":[4,4]}})";
  EXPECT_TRUE(FromString(SafetensorsFromParts(header, std::string(8, '\0'))).ok());
}

TEST(SafetensorsFileTest, EveryTruncationAndByteFlipFailsCleanlyOrLoads) {
  const std::vector<float> v = {1, 2, 3, 4, 5, 6};
  const std::string good = SafetensorsBytes(
      {{"a", "F32", {2, 3}, F32Bytes(v)}, {"b", "BF16", {2}, std::string(4, '\x3f')}});
  for (size_t n = 0; n < good.size(); ++n) {
    // Dropping bytes either cuts the header (invalid JSON / length) or the data (out of bounds).
    EXPECT_FALSE(FromString(good.substr(0, n)).ok()) << "prefix " << n;
  }
  std::mt19937 rng(1);
  for (int trial = 0; trial < 2000; ++trial) {
    std::string bad = good;
    bad[rng() % bad.size()] = static_cast<char>(rng());
    auto file = FromString(bad);
    if (!file.ok()) continue;
    for (const auto& info : (*file)->tensors()) (void)(*file)->LoadTensor(info);
  }
}

// ---------------------------------------------------------------------------------------------
// SafetensorsModelFiles

std::vector<TestTensor> Tensors(std::initializer_list<std::string> names) {
  std::vector<TestTensor> out;
  float x = 1.0f;
  for (const auto& n : names) out.push_back({n, "F32", {1}, F32Bytes({{x++}})});
  return out;
}

void WriteIndex(const TempDir& dir, const std::string& weight_map) {
  WriteFile(dir.File("model.safetensors.index.json"),
            "{\"metadata\":{},\"weight_map\":{" + weight_map + "}}");
}

TEST(SafetensorsModelFilesTest, OpensSingleFileDirectory) {
  TempDir dir;
  WriteFile(dir.File("model.safetensors"), SafetensorsBytes(Tensors({"x", "y"})));
  auto files = SafetensorsModelFiles::Open(dir.path());
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_FALSE((*files)->sharded());
  EXPECT_EQ((*files)->file_names(), std::vector<std::string>{"model.safetensors"});
  EXPECT_EQ((*files)->TensorNames(), (std::vector<std::string>{"x", "y"}));
  auto y = (*files)->LoadTensor("y");
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->data()[0], 2.0f);
  EXPECT_EQ((*files)->LoadTensor("z").status().code(), absl::StatusCode::kNotFound);
}

TEST(SafetensorsModelFilesTest, LooksUpTensorsAcrossShards) {
  TempDir dir;
  WriteFile(dir.File("s2.safetensors"), SafetensorsBytes(Tensors({"c"})));
  WriteFile(dir.File("s1.safetensors"), SafetensorsBytes(Tensors({"a", "b"})));
  WriteIndex(dir, R"("a":"s1.safetensors","c":"s2.safetensors","b":"s1.safetensors")");
  auto files = SafetensorsModelFiles::Open(dir.path());
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_TRUE((*files)->sharded());
  EXPECT_EQ((*files)->file_names(), (std::vector<std::string>{"s1.safetensors", "s2.safetensors"}));
  auto c = (*files)->LoadTensor("c");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->data()[0], 1.0f);
  auto b = (*files)->LoadTensor("b");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->data()[0], 2.0f);
  EXPECT_NE((*files)->FindTensor("a"), nullptr);
}

TEST(SafetensorsModelFilesTest, SingleFileWinsOverIndexAsInTransformers) {
  TempDir dir;
  WriteFile(dir.File("model.safetensors"), SafetensorsBytes(Tensors({"x"})));
  WriteIndex(dir, R"("x":"missing.safetensors")");
  auto files = SafetensorsModelFiles::Open(dir.path());
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_FALSE((*files)->sharded());
}

TEST(SafetensorsModelFilesTest, DirectoryWithoutWeightsIsNotFound) {
  TempDir dir;
  auto files = SafetensorsModelFiles::Open(dir.path());
  EXPECT_EQ(files.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(files.status().message(), HasSubstr("model.safetensors"));
}

TEST(SafetensorsModelFilesTest, MissingShardIsNotFoundNamingIt) {
  TempDir dir;
  WriteFile(dir.File("s1.safetensors"), SafetensorsBytes(Tensors({"a"})));
  WriteIndex(dir, R"("a":"s1.safetensors","b":"s2.safetensors")");
  auto files = SafetensorsModelFiles::Open(dir.path());
  EXPECT_EQ(files.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(files.status().message(), HasSubstr("'s2.safetensors'"));
}

TEST(SafetensorsModelFilesTest, TensorMissingFromItsShardIsNamed) {
  TempDir dir;
  WriteFile(dir.File("s1.safetensors"), SafetensorsBytes(Tensors({"a"})));
  WriteIndex(dir, R"("a":"s1.safetensors","ghost":"s1.safetensors")");
  auto files = SafetensorsModelFiles::Open(dir.path());
  EXPECT_EQ(files.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(files.status().message(), HasSubstr("'ghost'"));
  EXPECT_THAT(files.status().message(), HasSubstr("'s1.safetensors'"));
}

TEST(SafetensorsModelFilesTest, TensorInTheWrongShardIsNamed) {
  TempDir dir;
  WriteFile(dir.File("s1.safetensors"), SafetensorsBytes(Tensors({"a"})));
  WriteFile(dir.File("s2.safetensors"), SafetensorsBytes(Tensors({"b"})));
  WriteIndex(dir, R"("a":"s2.safetensors","b":"s2.safetensors")");
  auto files = SafetensorsModelFiles::Open(dir.path());
  EXPECT_EQ(files.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(files.status().message(), HasSubstr("'a'"));
}

TEST(SafetensorsModelFilesTest, TensorInTwoShardsIsADuplicate) {
  TempDir dir;
  WriteFile(dir.File("s1.safetensors"), SafetensorsBytes(Tensors({"a", "dup"})));
  WriteFile(dir.File("s2.safetensors"), SafetensorsBytes(Tensors({"b", "dup"})));
  WriteIndex(dir, R"("a":"s1.safetensors","b":"s2.safetensors")");
  auto files = SafetensorsModelFiles::Open(dir.path());
  EXPECT_EQ(files.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(files.status().message(), HasSubstr("'dup'"));
  EXPECT_THAT(files.status().message(), HasSubstr("s1.safetensors"));
  EXPECT_THAT(files.status().message(), HasSubstr("s2.safetensors"));
}

TEST(SafetensorsModelFilesTest, RejectsMalformedIndex) {
  TempDir dir;
  WriteFile(dir.File("s1.safetensors"), SafetensorsBytes(Tensors({"a"})));
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{\"weight_map\": [", "byte offset"},
      {"{\"metadata\": {}}", "'weight_map'"},
      {"{\"weight_map\": {}}", "empty"},
      {"{\"weight_map\": {\"a\": 3}}", "'a'"},
      {"{\"weight_map\": {\"a\": \"../s1.safetensors\"}}", "not a plain file name"},
      {"{\"weight_map\": {\"a\": \"/etc/passwd\"}}", "not a plain file name"},
  };
  for (const auto& [text, needle] : cases) {
    WriteFile(dir.File("model.safetensors.index.json"), text);
    auto files = SafetensorsModelFiles::Open(dir.path());
    EXPECT_EQ(files.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(files.status().message(), HasSubstr("model.safetensors.index.json")) << text;
    EXPECT_THAT(files.status().message(), HasSubstr(needle)) << text;
  }
}

TEST(SafetensorsModelFilesTest, ListsWeightFilesWithoutOpeningThem) {
  TempDir dir;
  WriteFile(dir.File("b.safetensors"), "not even a safetensors file");
  WriteFile(dir.File("A.safetensors"), "");
  WriteIndex(dir, R"("x":"b.safetensors","y":"A.safetensors","z":"b.safetensors")");
  auto list = ListSafetensorsWeightFiles(dir.path());
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_TRUE(list->sharded);
  EXPECT_EQ(list->names, (std::vector<std::string>{"A.safetensors", "b.safetensors"}));
}

}  // namespace
}  // namespace ripplekv::worker
