#include "kernels/tensor/tensor.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace ripplekv::kernels {
namespace {

TEST(TensorTest, ZeroInitializedAndAligned) {
  Tensor t({3, 5});
  EXPECT_EQ(t.numel(), 15);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data()) % 64, 0u);
  for (float v : t.span()) EXPECT_EQ(v, 0.0f);
}

TEST(TensorTest, DefaultTensorIsEmptyWithNoElements) {
  Tensor t;
  EXPECT_TRUE(t.empty());
  EXPECT_EQ(t.numel(), 0);
  EXPECT_TRUE(t.span().empty());
}

TEST(TensorTest, CloneCopiesAndReshapeKeepsData) {
  const float values[] = {1, 2, 3, 4, 5, 6};
  Tensor t({2, 3}, values);
  Tensor c = t.Clone();
  c.data()[0] = 9;
  EXPECT_EQ(t.data()[0], 1);
  c.Reshape({3, 2});
  EXPECT_EQ(c.dim(0), 3);
  EXPECT_EQ(c.data()[5], 6);
  EXPECT_EQ(ShapeString(c.shape()), "[3, 2]");
}

TEST(TensorTest, DTypesSizeTheirBuffersAndHostDataIsTyped) {
  Tensor ids({4}, DType::kI32);
  EXPECT_EQ(ids.dtype(), DType::kI32);
  EXPECT_EQ(ids.bytes(), 16u);
  ids.host_data<int32_t>()[3] = 7;
  EXPECT_EQ(ids.host_data<int32_t>()[0], 0);
  EXPECT_EQ(ids.host_data<int32_t>()[3], 7);
  EXPECT_EQ(Tensor({3, 2}, DType::kBF16).bytes(), 12u);
  EXPECT_EQ(DTypeName(DType::kF16), "f16");
}

TEST(TensorDeathTest, HostAccessWithTheWrongTypeIsAProgrammerError) {
  Tensor ids({4}, DType::kI32);
  EXPECT_DEATH(ids.data(), "wrong element type");
  Tensor values({4});
  EXPECT_DEATH(values.host_data<int32_t>(), "wrong element type");
}

// Memory that stands for a device's: host memory behind an allocator that reports kCuda and
// counts its copies, so the Tensor's device rules can be tested without a GPU.
class FakeDeviceAllocator final : public Allocator {
 public:
  Device device() const override { return Device::kCuda; }
  void* Allocate(size_t bytes) override {
    ++allocations;
    return std::calloc(bytes, 1);
  }
  void Free(void* block) noexcept override { std::free(block); }
  void CopyFromHost(void* dst, const void* src, size_t bytes) const override {
    ++uploads;
    std::memcpy(dst, src, bytes);
  }
  void CopyToHost(void* dst, const void* src, size_t bytes) const override {
    ++downloads;
    std::memcpy(dst, src, bytes);
  }
  void Copy(void* dst, const void* src, size_t bytes) const override {
    ++device_copies;
    std::memcpy(dst, src, bytes);
  }
  int allocations = 0;
  mutable int uploads = 0, downloads = 0, device_copies = 0;
};

TEST(TensorTest, CopiesMoveBetweenAllocatorsAndKeepTheValues) {
  FakeDeviceAllocator a, b;
  const float values[] = {1, 2, 3, 4, 5, 6};
  const Tensor host({2, 3}, values);
  const Tensor on_a = host.CopyTo(a);
  EXPECT_EQ(on_a.device(), Device::kCuda);
  EXPECT_EQ(on_a.shape(), host.shape());
  EXPECT_EQ(a.uploads, 1);
  const Tensor clone = on_a.Clone();  // stays on a, one device-side copy
  EXPECT_EQ(a.device_copies, 1);
  const Tensor on_b = clone.CopyTo(b);  // device to device: through the host
  EXPECT_EQ(a.downloads, 1);
  EXPECT_EQ(b.uploads, 1);
  const Tensor back = on_b.ToHost();
  EXPECT_EQ(back.device(), Device::kCpu);
  EXPECT_EQ(std::vector<float>(back.span().begin(), back.span().end()),
            std::vector<float>(std::begin(values), std::end(values)));
  EXPECT_TRUE(Tensor().CopyTo(a).empty());
}

TEST(TensorDeathTest, HostAccessToADeviceTensorIsAProgrammerError) {
  FakeDeviceAllocator device;
  Tensor t({2}, DType::kF32, device);
  EXPECT_NE(t.raw(), nullptr);
  EXPECT_DEATH(t.data(), "host access to a device tensor");
}

}  // namespace
}  // namespace ripplekv::kernels
