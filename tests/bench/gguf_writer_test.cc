#include "bench/model/gguf_writer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "kernels/dequant/dequant.h"
#include "kernels/dequant/quantize.h"
#include "kernels/tensor/tensor.h"
#include "worker/model/gguf_reader.h"

namespace ripplekv::bench {
namespace {

using kernels::GgmlType;
using ::testing::HasSubstr;

class GgufWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "ripplekv_gguf_writer_XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }
  // Files in the directory (to see that no temporary file is left behind).
  std::vector<std::string> Files() const {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(dir_)) {
      out.push_back(e.path().filename().string());
    }
    return out;
  }

  std::string dir_;
};

std::vector<uint8_t> Bytes(size_t n, uint8_t seed) {
  std::vector<uint8_t> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(seed + i * 7);
  return b;
}

TEST_F(GgufWriterTest, MetadataAndTensorsRoundTripThroughTheReader) {
  GgufStreamWriter w;
  w.SetString("general.architecture", "llama");
  w.SetUint32("u32", 4000000000u);
  w.SetInt32("i32", -7);
  w.SetUint64("u64", uint64_t{1} << 40);
  w.SetFloat32("f32", 0.25f);
  w.SetBool("yes", true);
  const std::vector<std::string> strings = {"a", "", "Ġhello"};
  w.SetStringArray("strings", strings);
  w.SetStringArray("empty", std::vector<std::string>{});
  const std::vector<int32_t> ints = {1, -2, 3};
  w.SetInt32Array("ints", ints);
  const std::vector<float> floats = {0.5f, -1.5f};
  w.SetFloat32Array("floats", floats);
  ASSERT_TRUE(w.AddTensor("q4", {64, 3}, GgmlType::kQ4_0).ok());   // 2 blocks x 3 rows = 108 bytes
  ASSERT_TRUE(w.AddTensor("norm", {5}, GgmlType::kF32).ok());      // 20 bytes
  ASSERT_TRUE(w.AddTensor("h", {32, 2, 2}, GgmlType::kF16).ok());  // 256 bytes
  const std::string path = Path("m.gguf");
  ASSERT_TRUE(w.Open(path).ok());
  const std::vector<uint8_t> q4 = Bytes(108, 1), norm = Bytes(20, 2), h = Bytes(256, 3);
  // Pieces that straddle tensors: the writer pads between them.
  std::vector<uint8_t> all = q4;
  all.insert(all.end(), norm.begin(), norm.end());
  all.insert(all.end(), h.begin(), h.end());
  ASSERT_TRUE(w.Write(std::span(all).first(50)).ok());
  EXPECT_EQ(w.current_tensor(), 0u);
  ASSERT_TRUE(w.Write(std::span(all).subspan(50, 70)).ok());
  EXPECT_EQ(w.current_tensor(), 1u);
  ASSERT_TRUE(w.Write(std::span(all).subspan(120)).ok());
  EXPECT_EQ(w.current_tensor(), 3u);
  EXPECT_FALSE(std::filesystem::exists(path)) << "visible before Finish()";
  ASSERT_TRUE(w.Finish().ok());
  EXPECT_EQ(w.bytes_written(), w.file_size());
  EXPECT_EQ(std::filesystem::file_size(path), w.file_size());
  EXPECT_EQ(Files(), std::vector<std::string>{"m.gguf"});

  auto file = worker::GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  const worker::GgufFile& f = **file;
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(*f.GetString("general.architecture"), "llama");
  EXPECT_EQ(*f.GetInt("u32"), 4000000000);
  EXPECT_EQ(f.Find("u32")->type, worker::GgufValueType::kUint32);
  EXPECT_EQ(*f.GetInt("i32"), -7);
  EXPECT_EQ(f.Find("i32")->type, worker::GgufValueType::kInt32);
  EXPECT_EQ(*f.GetInt("u64"), int64_t{1} << 40);
  EXPECT_EQ(*f.GetFloat("f32"), 0.25);
  EXPECT_TRUE(*f.GetBool("yes"));
  EXPECT_EQ(*f.GetStringArray("strings"), strings);
  EXPECT_TRUE(f.GetStringArray("empty")->empty());
  EXPECT_EQ(*f.GetIntArray("ints"), (std::vector<int64_t>{1, -2, 3}));
  EXPECT_EQ(*f.GetFloatArray("floats"), (std::vector<double>{0.5, -1.5}));
  ASSERT_EQ(f.tensors().size(), 3u);
  const std::vector<uint8_t>* data[] = {&q4, &norm, &h};
  for (size_t i = 0; i < 3; ++i) {
    const worker::GgufTensorInfo& t = f.tensors()[i];
    EXPECT_EQ(t.name, w.tensors()[i].name);
    EXPECT_EQ(t.dims, w.tensors()[i].dims);
    EXPECT_EQ(t.type, w.tensors()[i].type);
    EXPECT_EQ(t.offset % 32, 0u);
    const std::span<const uint8_t> got = f.TensorData(t);
    EXPECT_EQ(std::vector<uint8_t>(got.begin(), got.end()), *data[i]) << t.name;
  }
}

TEST_F(GgufWriterTest, QuantizedTensorDecodesToItsValues) {
  std::vector<float> values(64);
  // Integers with 127 in each block: d = 1, so q8_0 holds them exactly.
  for (int i = 0; i < 64; ++i) values[i] = static_cast<float>((i * 37) % 255 - 127);
  values[0] = values[32] = 127.0f;
  std::vector<uint8_t> q(68);
  ASSERT_TRUE(kernels::QuantizeRow(GgmlType::kQ8_0, values, q).ok());
  GgufStreamWriter w;
  ASSERT_TRUE(w.AddTensor("w", {32, 2}, GgmlType::kQ8_0).ok());
  ASSERT_TRUE(w.Open(Path("q.gguf")).ok());
  ASSERT_TRUE(w.Write(q).ok());
  ASSERT_TRUE(w.Finish().ok());
  auto f = worker::GgufFile::Open(Path("q.gguf"));
  ASSERT_TRUE(f.ok()) << f.status();
  auto t = (*f)->LoadTensor((*f)->tensors()[0]);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->shape(), (kernels::Shape{2, 32}));
  EXPECT_EQ(std::vector<float>(t->data(), t->data() + 64), values);
}

TEST_F(GgufWriterTest, OtherAlignmentIsWrittenAsMetadata) {
  GgufStreamWriter w({.version = 2, .alignment = 64});
  ASSERT_TRUE(w.AddTensor("a", {3}, GgmlType::kF32).ok());
  ASSERT_TRUE(w.AddTensor("b", {3}, GgmlType::kF32).ok());
  EXPECT_EQ(w.tensors()[1].offset, 64u);
  ASSERT_TRUE(w.Open(Path("a.gguf")).ok());
  ASSERT_TRUE(w.Write(Bytes(24, 9)).ok());
  ASSERT_TRUE(w.Finish().ok());
  auto f = worker::GgufFile::Open(Path("a.gguf"));
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->version(), 2u);
  EXPECT_EQ((*f)->alignment(), 64u);
  EXPECT_EQ((*f)->tensors()[1].offset, 64u);
  const auto b = (*f)->TensorData((*f)->tensors()[1]);
  const std::vector<uint8_t> written = Bytes(24, 9);
  EXPECT_EQ(std::vector<uint8_t>(b.begin(), b.end()),
            std::vector<uint8_t>(written.begin() + 12, written.end()));
}

TEST_F(GgufWriterTest, RefusesBadTensors) {
  GgufStreamWriter w;
  EXPECT_THAT(w.AddTensor("", {32}, GgmlType::kF32).message(), HasSubstr("empty tensor name"));
  EXPECT_THAT(w.AddTensor("a", {}, GgmlType::kF32).message(), HasSubstr("0 dimensions"));
  EXPECT_THAT(w.AddTensor("a", {1, 1, 1, 1, 1}, GgmlType::kF32).message(),
              HasSubstr("5 dimensions"));
  EXPECT_THAT(w.AddTensor("a", {32, 0}, GgmlType::kF32).message(), HasSubstr("dimension 0 < 1"));
  const Status s = w.AddTensor("a", {48, 2}, GgmlType::kQ4_0);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("rows of 48 values"));
  ASSERT_TRUE(w.AddTensor("a", {32}, GgmlType::kF32).ok());
  EXPECT_THAT(w.AddTensor("a", {32}, GgmlType::kF32).message(), HasSubstr("declared twice"));
  GgufStreamWriter bad({.alignment = 48});
  EXPECT_THAT(bad.AddTensor("a", {32}, GgmlType::kF32).message(), HasSubstr("power of two"));
}

TEST_F(GgufWriterTest, RefusesDuplicateKeysAndMisuse) {
  GgufStreamWriter w;
  w.SetUint32("k", 1);
  w.SetString("k", "again");
  const Status s = w.Open(Path("d.gguf"));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'k' set twice"));
  EXPECT_TRUE(Files().empty());

  GgufStreamWriter v;
  EXPECT_EQ(v.Write(Bytes(4, 0)).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(v.Finish().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(v.Open(Path("v.gguf")).ok());
  EXPECT_EQ(v.Open(Path("v.gguf")).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(v.AddTensor("late", {32}, GgmlType::kF32).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(GgufWriterTest, TooMuchOrTooLittleDataIsAnErrorAndLeavesNoFile) {
  {
    GgufStreamWriter w;
    ASSERT_TRUE(w.AddTensor("a", {8}, GgmlType::kF32).ok());
    ASSERT_TRUE(w.Open(Path("x.gguf")).ok());
    const Status s = w.Write(Bytes(33, 0));
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("32 bytes left"));
    ASSERT_TRUE(w.Write(Bytes(16, 0)).ok());
    const Status f = w.Finish();
    EXPECT_EQ(f.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(f.message(), HasSubstr("tensor 'a' has 16 of its 32 bytes"));
  }
  EXPECT_TRUE(Files().empty());
  {
    GgufStreamWriter w;  // abandoned after Open: the destructor removes the temporary file
    ASSERT_TRUE(w.AddTensor("a", {8}, GgmlType::kF32).ok());
    ASSERT_TRUE(w.Open(Path("y.gguf")).ok());
    EXPECT_EQ(Files().size(), 1u);
  }
  EXPECT_TRUE(Files().empty());
}

TEST_F(GgufWriterTest, MissingDirectoryIsNotFound) {
  GgufStreamWriter w;
  const Status s = w.Open(Path("no/such/dir/m.gguf"));
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_THAT(s.message(), HasSubstr("no/such/dir/m.gguf"));
}

}  // namespace
}  // namespace ripplekv::bench
