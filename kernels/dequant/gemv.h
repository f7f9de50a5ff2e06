#pragma once
// Fused dequantize-dot GEMV: y = W x for one token, with W kept in its stored GGML type.
//
// Decode reads every weight once per token, so it is bound by memory traffic; expanding W to fp32
// first reads and writes 4-8x more bytes than the stored blocks. These kernels decode W block by
// block in registers and accumulate the dot with x directly; the fp32 row never exists in memory.
// x stays fp32 (unlike llama.cpp, activations are not quantized to Q8).
//
// Numerics. Each weight the kernels use is bit-identical to what Dequantize() (dequant.h) writes
// for it (every GGML scale-times-quant product is exact in fp32, and a minimum is added with one
// rounding exactly as the decoder does), so the only difference from "Dequantize, then an fp32
// dot" is the order of the sum. With w = the dequantized row i and ref = sum_k w[k] x[k] computed
// exactly:
//
//   |y[i] - ref| <= (cols + 16) * 2^-23 * sum_k |w[k] * x[k]|
//
// (the classic bound for a summation tree of depth <= cols + 16 in fp32; observed errors are far
// smaller, see tests/kernels/gemv_test.cc). The scalar and AVX2 implementations sum in different
// orders, so they agree within twice that bound, not bit for bit. For a given implementation the
// result is bit-identical for every thread count: each y[i] is computed by one thread in a fixed
// order. Non-finite weights or inputs give non-finite outputs (which ones is not specified).
//
// Types: every type Dequantize() decodes (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K,
// Q5_K, Q6_K), in both implementations.

#include <cstdint>
#include <span>
#include <string_view>

#include "base/status.h"
#include "kernels/dequant/ggml_types.h"

namespace ripplekv::kernels {

enum class GemvImpl {
  kAuto,    // AVX2 when this CPU has AVX2, FMA and F16C; otherwise the portable one
  kScalar,  // portable C++: the fallback, and the reference the AVX2 kernels are tested against;
            // decodes 256 values at a time into a stack buffer with Dequantize()'s block decoders
  kAvx2,    // x86-64 AVX2 + FMA + F16C; FailedPrecondition on a CPU without them
};

struct GemvOptions {
  int num_threads = 1;  // >= 1; rows are split across OpenMP threads when > 1
  GemvImpl impl = GemvImpl::kAuto;
};

// Whether `impl` can run on this CPU (kAuto and kScalar always can). Thread-safe.
bool GemvImplSupported(GemvImpl impl);
// "auto", "scalar", "avx2".
std::string_view GemvImplName(GemvImpl impl);
// The implementation kAuto resolves to on this CPU (kScalar or kAvx2).
GemvImpl ResolvedGemvImpl(GemvImpl impl);

// y[i] = sum_k W[i, k] * x[k] for i in [0, rows).
//   w: [rows, cols] in `type`, row-major, each row a whole number of blocks, so
//      w.size() == rows * GgmlBytes(type, cols); any alignment. To multiply by a slice of rows of a
//      larger matrix, pass the bytes of those rows (row r starts at r * GgmlBytes(type, cols)).
//   x: [cols] fp32; y: [rows] fp32, overwritten. y must not overlap x or w.
// Errors (nothing is written): InvalidArgument, naming the numbers, when rows or cols is negative,
// cols is not a whole number of blocks, w.size(), x.size() or y.size() does not match, or
// num_threads < 1; FailedPrecondition when kAvx2 is asked for on a CPU without AVX2/FMA/F16C.
// Thread-safe (reads w and x, writes only y).
[[nodiscard]] Status DequantGemv(const GemvOptions& options, GgmlType type,
                                 std::span<const uint8_t> w, int64_t rows, int64_t cols,
                                 std::span<const float> x, std::span<float> y);

}  // namespace ripplekv::kernels
