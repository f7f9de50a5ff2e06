#include "kernels/base/tensor.h"

#include <gtest/gtest.h>

#include <cstdint>

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

}  // namespace
}  // namespace ripplekv::kernels
