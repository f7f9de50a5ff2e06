#include "worker/model/gguf_reader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "kernels/dequant/fp16.h"
#include "tests/worker/model/gguf_test_writer.h"

namespace ripplekv::worker {
namespace {

using kernels::GgmlType;
using testing::FindBytes;
using testing::GgufWriter;
using ::testing::HasSubstr;
using testing::Patch;

std::string Msg(const Status& s) { return std::string(s.message()); }

StatusOr<std::unique_ptr<GgufFile>> Parse(const std::vector<uint8_t>& bytes) {
  return GgufFile::FromBuffer(bytes, "test.gguf");
}

std::string TempPath(const std::string& name) {
  return (std::filesystem::path(::testing::TempDir()) / name).string();
}

// A small but complete file: every scalar type, arrays, two tensors.
GgufWriter ValidWriter() {
  GgufWriter w;
  w.String("general.architecture", "llama")
      .U8("t.u8", 200)
      .I8("t.i8", -100)
      .U16("t.u16", 60000)
      .I16("t.i16", -30000)
      .U32("t.u32", 4000000000u)
      .I32("t.i32", -2000000000)
      .F32("t.f32", 0.25f)
      .Bool("t.bool", true)
      .U64("t.u64", std::numeric_limits<uint64_t>::max())
      .I64("t.i64", std::numeric_limits<int64_t>::min())
      .F64("t.f64", -1.0e300)
      .StringArray("t.strings", {"a", "", "héllo"})
      .ScalarArray<float>("t.floats", GgufValueType::kFloat32, {1.5f, -2.0f})
      .ScalarArray<int32_t>("t.ints", GgufValueType::kInt32, {7, -8, 9});
  w.TensorF32("small", {3, 2}, {1, 2, 3, 4, 5, 6});
  std::vector<uint8_t> q8(34);  // one q8_0 block: d = 0.5, q[i] = i - 16
  q8[1] = 0x38;
  for (int i = 0; i < 32; ++i) q8[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(i - 16));
  w.Tensor("quant", {32}, GgmlType::kQ8_0, q8);
  return w;
}

// ---------------------------------------------------------------- well-formed files

TEST(GgufReaderTest, ReadsEveryMetadataTypeFromAFile) {
  const std::string path = TempPath("valid.gguf");
  testing::WriteFile(path, ValidWriter().Build());
  StatusOr<std::unique_ptr<GgufFile>> opened = GgufFile::Open(path);
  ASSERT_TRUE(opened.ok()) << opened.status();
  const GgufFile& f = **opened;
  EXPECT_EQ(f.path(), path);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.metadata().size(), 15u);
  EXPECT_EQ(*f.GetString("general.architecture"), "llama");
  EXPECT_EQ(*f.GetInt("t.u8"), 200);
  EXPECT_EQ(*f.GetInt("t.i8"), -100);
  EXPECT_EQ(*f.GetInt("t.u16"), 60000);
  EXPECT_EQ(*f.GetInt("t.i16"), -30000);
  EXPECT_EQ(*f.GetInt("t.u32"), 4000000000);
  EXPECT_EQ(*f.GetInt("t.i32"), -2000000000);
  EXPECT_EQ(*f.GetInt("t.i64"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(*f.GetFloat("t.f32"), 0.25);
  EXPECT_EQ(*f.GetFloat("t.f64"), -1.0e300);
  EXPECT_EQ(*f.GetFloat("t.u16"), 60000.0);  // integers read as floats too
  EXPECT_TRUE(*f.GetBool("t.bool"));
  EXPECT_THAT(*f.GetStringArray("t.strings"), ::testing::ElementsAre("a", "", "héllo"));
  EXPECT_THAT(*f.GetFloatArray("t.floats"), ::testing::ElementsAre(1.5, -2.0));
  EXPECT_THAT(*f.GetIntArray("t.ints"), ::testing::ElementsAre(7, -8, 9));

  // The exact file type and the variant alternative are kept.
  const GgufValue* u64 = f.Find("t.u64");
  ASSERT_NE(u64, nullptr);
  EXPECT_EQ(u64->type, GgufValueType::kUint64);
  EXPECT_EQ(std::get<uint64_t>(u64->value), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(f.Find("t.i8")->type, GgufValueType::kInt8);
  EXPECT_EQ(std::get<int64_t>(f.Find("t.i8")->value), -100);
  const auto& ints = std::get<std::shared_ptr<GgufArray>>(f.Find("t.ints")->value);
  EXPECT_EQ(ints->element_type, GgufValueType::kInt32);
  EXPECT_EQ(f.Find("missing"), nullptr);
}

TEST(GgufReaderTest, GettersReportMissingKeysAndWrongTypes) {
  auto f = Parse(ValidWriter().Build());
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->GetInt("nope").status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Msg((*f)->GetInt("nope").status()), HasSubstr("'nope'"));
  const Status wrong = (*f)->GetString("t.u32").status();
  EXPECT_EQ(wrong.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(wrong), HasSubstr("test.gguf: metadata 't.u32' is uint32, expected a string"));
  // uint64 max does not fit an int64: refused, not wrapped.
  EXPECT_EQ((*f)->GetInt("t.u64").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*f)->GetInt("t.f32").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*f)->GetBool("t.u8").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*f)->GetStringArray("t.ints").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*f)->GetIntArray("t.floats").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*f)->GetFloatArray("t.strings").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*f)->GetIntArray("t.u8").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(GgufReaderTest, ReadsTensorInfosDataAndDequantizedValues) {
  auto f = Parse(ValidWriter().Build());
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_EQ((*f)->tensors().size(), 2u);
  const GgufTensorInfo* small = (*f)->FindTensor("small");
  ASSERT_NE(small, nullptr);
  EXPECT_EQ(small->dims, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(small->type, GgmlType::kF32);
  EXPECT_EQ(small->size_bytes, 24u);
  EXPECT_EQ((*f)->TensorData(*small).size(), 24u);
  StatusOr<kernels::Tensor> t = (*f)->LoadTensor(*small);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->shape(), (kernels::Shape{2, 3}));  // row-major: {ne1, ne0}
  EXPECT_EQ(std::vector<float>(t->data(), t->data() + 6), (std::vector<float>{1, 2, 3, 4, 5, 6}));

  const GgufTensorInfo* quant = (*f)->FindTensor("quant");
  ASSERT_NE(quant, nullptr);
  EXPECT_EQ(quant->offset % 32, 0u);
  EXPECT_EQ(quant->size_bytes, 34u);
  StatusOr<kernels::Tensor> q = (*f)->LoadTensor(*quant);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->shape(), (kernels::Shape{32}));
  EXPECT_EQ(q->data()[0], -8.0f);
  EXPECT_EQ(q->data()[31], 7.5f);
  EXPECT_EQ((*f)->FindTensor("absent"), nullptr);
}

TEST(GgufReaderTest, HonoursCustomAlignment) {
  GgufWriter w;
  w.Alignment(128);
  w.TensorF32("a", {3}, {1, 2, 3});
  w.TensorF32("b", {5}, {1, 2, 3, 4, 5});
  const std::vector<uint8_t> bytes = w.Build();
  auto f = Parse(bytes);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->alignment(), 128u);
  EXPECT_EQ((*f)->FindTensor("b")->offset, 128u);
  const uint8_t* data = (*f)->TensorData(*(*f)->FindTensor("a")).data();
  EXPECT_EQ((data - bytes.data()) % 128, 0);
  EXPECT_EQ((*f)->LoadTensor(*(*f)->FindTensor("b"))->data()[4], 5.0f);
}

TEST(GgufReaderTest, ReadsVersion2AndFilesWithoutTensors) {
  GgufWriter w;
  w.Version(2).String("general.name", "x");
  auto f = Parse(w.Build());
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->version(), 2u);
  EXPECT_TRUE((*f)->tensors().empty());
}

TEST(GgufReaderTest, ReadsNestedArrays) {
  testing::ByteSink inner;
  inner.Put<uint32_t>(static_cast<uint32_t>(GgufValueType::kArray)).Put<uint64_t>(2);
  inner.Put<uint32_t>(static_cast<uint32_t>(GgufValueType::kUint8))
      .Put<uint64_t>(1)
      .Put<uint8_t>(5);
  inner.Put<uint32_t>(static_cast<uint32_t>(GgufValueType::kString))
      .Put<uint64_t>(1)
      .PutString("z");
  GgufWriter w;
  w.RawKv("nested", static_cast<uint32_t>(GgufValueType::kArray), inner.bytes());
  auto f = Parse(w.Build());
  ASSERT_TRUE(f.ok()) << f.status();
  const auto& outer = std::get<std::shared_ptr<GgufArray>>((*f)->Find("nested")->value);
  ASSERT_EQ(outer->elements.size(), 2u);
  const auto& second = std::get<std::shared_ptr<GgufArray>>(outer->elements[1].value);
  EXPECT_EQ(std::get<std::string>(second->elements[0].value), "z");
}

// ---------------------------------------------------------------- malformed files

TEST(GgufReaderTest, EveryTruncationIsAnErrorNeverACrash) {
  const std::vector<uint8_t> bytes = ValidWriter().Build();
  auto full = Parse(bytes);
  ASSERT_TRUE(full.ok()) << full.status();
  const GgufTensorInfo* quant = (*full)->FindTensor("quant");
  // The last byte any tensor needs; beyond it is only alignment padding.
  const size_t needed =
      static_cast<size_t>((*full)->TensorData(*quant).data() - bytes.data()) + quant->size_bytes;
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::vector<uint8_t> prefix(bytes.begin(), bytes.begin() + n);
    auto f = Parse(prefix);
    if (n < needed) {
      EXPECT_FALSE(f.ok()) << "prefix of " << n << " bytes parsed";
      if (!f.ok()) {
        EXPECT_THAT(Msg(f.status()), HasSubstr("test.gguf: ")) << n;
      }
    } else {
      EXPECT_TRUE(f.ok()) << n << ": " << f.status();
    }
  }
}

TEST(GgufReaderTest, TruncatedFileOnDiskIsDataLoss) {
  const std::vector<uint8_t> bytes = ValidWriter().Build();
  const std::string path = TempPath("truncated.gguf");
  testing::WriteFile(path, std::vector<uint8_t>(bytes.begin(), bytes.end() - 40));
  auto f = GgufFile::Open(path);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(Msg(f.status()), HasSubstr(path));
  EXPECT_THAT(Msg(f.status()), HasSubstr("tensor 'quant' offset at byte"));
}

TEST(GgufReaderTest, OpenReportsMissingEmptyAndNonRegularFiles) {
  EXPECT_EQ(GgufFile::Open(TempPath("does-not-exist.gguf")).status().code(),
            absl::StatusCode::kNotFound);
  const std::string empty = TempPath("empty.gguf");
  testing::WriteFile(empty, {});
  EXPECT_EQ(GgufFile::Open(empty).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(GgufFile::Open(::testing::TempDir()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(GgufReaderTest, RejectsBadMagic) {
  std::vector<uint8_t> bytes = ValidWriter().Build();
  bytes[3] = 'X';
  auto f = Parse(bytes);
  EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(f.status()), HasSubstr("test.gguf: magic at byte 0: expected \"GGUF\""));
}

TEST(GgufReaderTest, RejectsVersion1WithAClearMessage) {
  GgufWriter w;
  w.Version(1);
  auto f = Parse(w.Build());
  EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(f.status()), HasSubstr("version at byte 4: GGUF version 1"));
}

TEST(GgufReaderTest, RejectsUnknownAndBigEndianVersions) {
  EXPECT_THAT(Msg(Parse(GgufWriter().Version(4).Build()).status()),
              HasSubstr("unsupported GGUF version 4"));
  EXPECT_THAT(Msg(Parse(GgufWriter().Version(0x03000000).Build()).status()),
              HasSubstr("big-endian"));
}

TEST(GgufReaderTest, RejectsHugeCountsBeforeAllocating) {
  std::vector<uint8_t> bytes = ValidWriter().Build();
  Patch<uint64_t>(bytes, 16, uint64_t{1} << 60);
  EXPECT_THAT(Msg(Parse(bytes).status()), HasSubstr("kv_count at byte 16"));

  bytes = ValidWriter().Build();
  Patch<uint64_t>(bytes, 8, ~uint64_t{0});
  EXPECT_THAT(Msg(Parse(bytes).status()), HasSubstr("tensor_count at byte 8"));

  bytes = ValidWriter().Build();
  const size_t key = FindBytes(bytes, "t.strings");
  const size_t count_at = key + 9 + 4 + 4;  // key, value type, element type
  Patch<uint64_t>(bytes, count_at, uint64_t{1} << 58);
  const Status s = Parse(bytes).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(s),
              HasSubstr("metadata 't.strings' array count at byte " + std::to_string(count_at)));
}

TEST(GgufReaderTest, RejectsStringLengthPastTheEnd) {
  std::vector<uint8_t> bytes = ValidWriter().Build();
  const size_t length_at = FindBytes(bytes, "general.architecture") + 20 + 4;
  Patch<uint64_t>(bytes, length_at, bytes.size());
  const Status s = Parse(bytes).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(s), HasSubstr("metadata 'general.architecture' string length at byte " +
                                std::to_string(length_at)));
  EXPECT_THAT(Msg(s), HasSubstr("runs past the end of the file"));

  // Same inside an array element, and for a key's own length.
  bytes = ValidWriter().Build();
  const size_t element_at = FindBytes(bytes, "t.strings") + 9 + 4 + 4 + 8;
  Patch<uint64_t>(bytes, element_at + 9, ~uint64_t{0} - 3);  // second element ("")
  EXPECT_THAT(Msg(Parse(bytes).status()), HasSubstr("metadata 't.strings'[1] string length"));
  bytes = ValidWriter().Build();
  Patch<uint64_t>(bytes, 24, uint64_t{1} << 40);
  EXPECT_THAT(Msg(Parse(bytes).status()), HasSubstr("metadata key #0 length at byte 24"));
}

TEST(GgufReaderTest, RejectsTensorOffsetPastTheEnd) {
  GgufWriter w;
  w.TensorF32("ok", {4}, {1, 2, 3, 4}).TensorInfoOnly("far", {8}, 0, 1 << 20);
  const Status s = Parse(w.Build()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(Msg(s), HasSubstr("tensor 'far' offset at byte"));
  EXPECT_THAT(Msg(s), HasSubstr("runs past the end of the data section"));

  // An offset near 2^64 must not wrap around in the bounds check.
  GgufWriter wrap;
  wrap.TensorF32("ok", {4}, {1, 2, 3, 4}).TensorInfoOnly("wrap", {8}, 0, ~uint64_t{0} - 31);
  EXPECT_EQ(Parse(wrap.Build()).status().code(), absl::StatusCode::kDataLoss);
}

TEST(GgufReaderTest, RejectsMisalignedTensorOffset) {
  GgufWriter w;
  w.TensorF32("ok", {16}, std::vector<float>(16, 1.0f)).TensorInfoOnly("odd", {2}, 0, 8);
  const Status s = Parse(w.Build()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(s), HasSubstr("tensor 'odd' offset at byte"));
  EXPECT_THAT(Msg(s), HasSubstr("8 is not a multiple of the alignment 32"));
}

TEST(GgufReaderTest, RejectsUnknownAndUnsupportedTensorTypes) {
  GgufWriter unknown;
  unknown.TensorInfoOnly("t", {32}, 99, 0);
  const Status s = Parse(unknown.Build()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(s), HasSubstr("tensor 't' type at byte"));
  EXPECT_THAT(Msg(s), HasSubstr("unknown ggml tensor type id 99"));

  GgufWriter q2k;
  q2k.TensorInfoOnly("t", {256}, 10, 0);
  const Status u = Parse(q2k.Build()).status();
  EXPECT_EQ(u.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(Msg(u), HasSubstr("q2_k"));
}

TEST(GgufReaderTest, RejectsBadDimensions) {
  GgufWriter overflow;
  overflow.TensorInfoOnly("big", {uint64_t{1} << 32, uint64_t{1} << 32}, 0, 0);
  EXPECT_THAT(Msg(Parse(overflow.Build()).status()), HasSubstr("tensor 'big' dim 1 at byte"));
  EXPECT_THAT(Msg(Parse(overflow.Build()).status()), HasSubstr("overflows"));

  GgufWriter bytes_overflow;  // elements fit in int64 but f32 bytes do not
  bytes_overflow.TensorInfoOnly("big", {uint64_t{1} << 62}, 0, 0);
  EXPECT_EQ(Parse(bytes_overflow.Build()).status().code(), absl::StatusCode::kInvalidArgument);

  GgufWriter zero;
  zero.TensorInfoOnly("z", {4, 0}, 0, 0);
  EXPECT_THAT(Msg(Parse(zero.Build()).status()), HasSubstr("0 is not a positive size"));

  GgufWriter negative;
  negative.TensorInfoOnly("n", {~uint64_t{0}}, 0, 0);
  EXPECT_THAT(Msg(Parse(negative.Build()).status()), HasSubstr("is not a positive size"));

  GgufWriter five;
  five.TensorInfoOnly("five", {1, 1, 1, 1, 1}, 0, 0);
  EXPECT_THAT(Msg(Parse(five.Build()).status()), HasSubstr("tensor 'five' n_dims"));

  GgufWriter split;  // a q4_0 row of 16 values would split a 32-value block
  split.TensorInfoOnly("split", {16, 2}, 2, 0);
  EXPECT_THAT(Msg(Parse(split.Build()).status()), HasSubstr("not a whole number"));
}

TEST(GgufReaderTest, RejectsDuplicateKeysAndTensorNames) {
  GgufWriter keys;
  keys.U32("a.b", 1).String("a.b", "again");
  const Status s = Parse(keys.Build()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(s), HasSubstr("metadata key 'a.b' at byte"));
  EXPECT_THAT(Msg(s), HasSubstr("duplicate key"));

  GgufWriter tensors;
  tensors.TensorF32("w", {1}, {1}).TensorF32("w", {1}, {2});
  EXPECT_THAT(Msg(Parse(tensors.Build()).status()), HasSubstr("duplicate tensor name"));
}

TEST(GgufReaderTest, RejectsBadAlignment) {
  GgufWriter w;
  w.U32("general.alignment", 48);
  EXPECT_THAT(Msg(Parse(w.Build()).status()), HasSubstr("metadata 'general.alignment' at byte"));
  EXPECT_THAT(Msg(Parse(w.Build()).status()), HasSubstr("48 is not a positive power of two"));
  GgufWriter zero;
  zero.U32("general.alignment", 0);
  EXPECT_FALSE(Parse(zero.Build()).ok());
  GgufWriter text;
  text.String("general.alignment", "32");
  EXPECT_THAT(Msg(Parse(text.Build()).status()), HasSubstr("must be an integer"));
}

TEST(GgufReaderTest, RejectsOtherMalformedValues) {
  GgufWriter bad_type;
  bad_type.RawKv("k", 13, {0, 0, 0, 0});
  EXPECT_THAT(Msg(Parse(bad_type.Build()).status()), HasSubstr("unknown value type 13"));

  GgufWriter bad_bool;
  bad_bool.Scalar<uint8_t>("k", GgufValueType::kBool, 2);
  EXPECT_THAT(Msg(Parse(bad_bool.Build()).status()), HasSubstr("is not 0 or 1"));

  GgufWriter empty_key;
  empty_key.U64("", 1);
  EXPECT_THAT(Msg(Parse(empty_key.Build()).status()), HasSubstr("empty key"));

  GgufWriter long_name;
  long_name.TensorF32(std::string(64, 'n'), {1}, {1});
  EXPECT_THAT(Msg(Parse(long_name.Build()).status()), HasSubstr("exceeds the limit"));

  // Arrays of arrays of arrays ... beyond the nesting cap.
  testing::ByteSink deep;
  for (int i = 0; i < 8; ++i) {
    deep.Put<uint32_t>(static_cast<uint32_t>(GgufValueType::kArray)).Put<uint64_t>(1);
  }
  deep.Put<uint32_t>(0).Put<uint64_t>(0);
  GgufWriter nested;
  nested.RawKv("deep", static_cast<uint32_t>(GgufValueType::kArray), deep.bytes());
  EXPECT_THAT(Msg(Parse(nested.Build()).status()), HasSubstr("nested deeper"));
}

TEST(GgufReaderTest, RejectsOverlappingTensors) {
  GgufWriter w;
  w.TensorF32("a", {16}, std::vector<float>(16, 1.0f)).TensorInfoOnly("b", {4}, 0, 32);
  const Status s = Parse(w.Build()).status();
  EXPECT_THAT(Msg(s), HasSubstr("overlaps tensor"));
}

}  // namespace
}  // namespace ripplekv::worker
