// Loading cuBLAS and NCCL at run time: the loader names every library it tried and why each
// failed, and picks only the cuBLAS of the CUDA runtime's major version. No GPU needed.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "base/dynamic_library.h"

#if RIPPLEKV_TEST_HAVE_CUDA
#include "kernels/ops/cuda/cublas_api.h"
#endif

namespace ripplekv::kernels {
namespace {

using ::testing::HasSubstr;

TEST(LibraryLoaderTest, AFailedLoadNamesEachLibraryTriedWithItsReason) {
  std::string why;
  EXPECT_EQ(OpenFirstLibrary({"libripplekv-absent-a.so.1", "libripplekv-absent-b.so"}, "Absent",
                             &why),
            nullptr);
  EXPECT_THAT(why, HasSubstr("cannot load Absent: "));
  EXPECT_THAT(why, HasSubstr("libripplekv-absent-a.so.1: cannot open shared object file"));
  EXPECT_THAT(why, HasSubstr("; libripplekv-absent-b.so: cannot open shared object file"));
}

TEST(LibraryLoaderTest, TheFirstLibraryThatLoadsIsTaken) {
  std::string why;
  void* library = OpenFirstLibrary({"libripplekv-absent.so.1", "libm.so.6"}, "libm", &why);
  EXPECT_NE(library, nullptr) << why;
}

#if RIPPLEKV_TEST_HAVE_CUDA
TEST(LibraryLoaderTest, CublasIsTheRuntimesMajorVersionOnly) {
  EXPECT_EQ(cuda::CublasLibraryFor(13000), "libcublas.so.13");
  EXPECT_EQ(cuda::CublasLibraryFor(13020), "libcublas.so.13");
  EXPECT_EQ(cuda::CublasLibraryFor(12080), "libcublas.so.12");
}
#endif

}  // namespace
}  // namespace ripplekv::kernels
