// GGML weights expanded on the device for UploadWeight (cuda/upload.h DequantizeRows): the CPU's
// block decoders (kernels/dequant/dequant_cpu.cc) value by value, with the same float operations in
// the same order, each rounded on its own (__fmul_rn, __fadd_rn, __fsub_rn: nvcc never fuses them into an
// FMA the CPU does not do), so the fp32 values equal the CPU's bit for bit. (Every product here is
// exact, an fp16 scale times small integers, so a fused one would round alike; the intrinsics keep
// the contract from resting on that.) The one exception is a NaN made by the arithmetic (from a
// non-finite fp16 scale): the device writes the canonical NaN where x86 keeps an operand's
// payload; NaNs stored as F32, F16 or BF16 keep their bits. The bf16 output rounds those fp32
// values as fp16.h FloatToBf16 does (to nearest even, NaN kept quiet and its top payload bits
// kept), so it equals the CPU's rounding of the CPU's values.
//
// Rows are whole numbers of blocks and both the blocks and out are dense, so the tensor is one run
// of blocks: one thread per output value (consecutive threads write consecutive values, one warp
// reads one q*_0/q*_1 block or 32 values of a K-quant block). The source may have any alignment:
// GGML blocks of 18, 22 or 210 bytes leave most of them unaligned, so it is read byte by byte.

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/ops/cuda/launch.cuh"
#include "kernels/ops/cuda/upload.h"

namespace ripplekv::kernels::cuda {

namespace {

constexpr int kThreads = 256;
// Enough blocks to fill the largest GPU several times over; larger tensors loop (grid stride).
constexpr int64_t kMaxBlocks = int64_t{1} << 16;

// The GgmlType numbers (kernels/dequant/ggml_types.h, which nvcc does not compile: it includes
// Abseil through status.h).
enum : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kBF16 = 30,
};

// Single-rounding float operations: the intrinsics on the device; on the host (where the decoders
// are also compiled) the plain operators, which g++ in ISO mode does not contract.
__host__ __device__ inline float Mul(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
__host__ __device__ inline float Add(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
__host__ __device__ inline float Sub(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}

__host__ __device__ inline float FloatFromBits(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float f;
  memcpy(&f, &bits, sizeof(f));
  return f;
#endif
}
__host__ __device__ inline uint32_t BitsOfFloat(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t bits;
  memcpy(&bits, &f, sizeof(bits));
  return bits;
#endif
}

// fp16.h HalfToFloat: exact, NaN payloads kept (the conversion instruction would not promise that).
__host__ __device__ inline float HalfBitsToFloat(uint32_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) return FloatFromBits(sign | 0x7f800000u | (mantissa << 13));
  if (exponent != 0) return FloatFromBits(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  const float magnitude = Mul(static_cast<float>(mantissa), 5.9604644775390625e-8f);  // exact
  return sign ? -magnitude : magnitude;
}

// fp16.h FloatToBf16, as bits.
__host__ __device__ inline uint16_t FloatToBf16Bits(float f) {
  const uint32_t bits = BitsOfFloat(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

// Little-endian loads at any alignment.
__host__ __device__ inline uint32_t LoadU16(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8);
}
__host__ __device__ inline uint32_t LoadU32(const uint8_t* p) {
  return LoadU16(p) | (LoadU16(p + 2) << 16);
}
__host__ __device__ inline float LoadHalf(const uint8_t* p) { return HalfBitsToFloat(LoadU16(p)); }

// One decoder per type: kElements values in kBytes bytes; Value(block, i) is value i of the block,
// computed as dequant_cpu.cc computes it (its comments describe the layouts).
struct F32 {
  static constexpr int kElements = 1, kBytes = 4;
  __host__ __device__ static float Value(const uint8_t* b, int) {
    return FloatFromBits(LoadU32(b));
  }
};

struct F16 {
  static constexpr int kElements = 1, kBytes = 2;
  __host__ __device__ static float Value(const uint8_t* b, int) { return LoadHalf(b); }
};

struct BF16 {
  static constexpr int kElements = 1, kBytes = 2;
  __host__ __device__ static float Value(const uint8_t* b, int) {
    return FloatFromBits(LoadU16(b) << 16);
  }
};

// x = d * q, q a signed byte.
struct Q8_0 {
  static constexpr int kElements = 32, kBytes = 34;
  __host__ __device__ static float Value(const uint8_t* b, int i) {
    return Mul(LoadHalf(b), static_cast<float>(static_cast<int8_t>(b[2 + i])));
  }
};

// The 4-bit quant of value i of a q4/q5 block of 32: byte i % 16, low nibble for the first half.
__host__ __device__ inline int Nibble32(const uint8_t* qs, int i) {
  return i < 16 ? qs[i] & 0x0f : qs[i - 16] >> 4;
}

// x = d * (q - 8).
struct Q4_0 {
  static constexpr int kElements = 32, kBytes = 18;
  __host__ __device__ static float Value(const uint8_t* b, int i) {
    return Mul(LoadHalf(b), static_cast<float>(Nibble32(b + 2, i) - 8));
  }
};

// x = d * q + m.
struct Q4_1 {
  static constexpr int kElements = 32, kBytes = 20;
  __host__ __device__ static float Value(const uint8_t* b, int i) {
    return Add(Mul(LoadHalf(b), static_cast<float>(Nibble32(b + 4, i))), LoadHalf(b + 2));
  }
};

// The fifth bit of value i is bit i of the 32-bit qh.
__host__ __device__ inline int Quant5(const uint8_t* qh, const uint8_t* qs, int i) {
  return Nibble32(qs, i) | static_cast<int>(((LoadU32(qh) >> i) & 1u) << 4);
}

// x = d * (q - 16).
struct Q5_0 {
  static constexpr int kElements = 32, kBytes = 22;
  __host__ __device__ static float Value(const uint8_t* b, int i) {
    return Mul(LoadHalf(b), static_cast<float>(Quant5(b + 2, b + 6, i) - 16));
  }
};

// x = d * q + m.
struct Q5_1 {
  static constexpr int kElements = 32, kBytes = 24;
  __host__ __device__ static float Value(const uint8_t* b, int i) {
    return Add(Mul(LoadHalf(b), static_cast<float>(Quant5(b + 4, b + 8, i))), LoadHalf(b + 2));
  }
};

// dequant_cpu.cc KQuantScaleMin: the 6-bit scale and min of sub-block j of q4_k/q5_k.
__host__ __device__ inline void KQuantScaleMin(const uint8_t* scales, int j, int* scale, int* min) {
  if (j < 4) {
    *scale = scales[j] & 63;
    *min = scales[j + 4] & 63;
  } else {
    *scale = (scales[j + 4] & 0x0f) | ((scales[j - 4] >> 6) << 4);
    *min = (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4);
  }
}

// Value i of a q4_k/q5_k super-block: sub-block s = i / 32, l = i % 32, its 4 low bits the low
// (even s) or high (odd s) nibble of qs[32 * (s / 2) + l], its fifth bit (q5_k) bit s of qh[l];
// x = (d * scale) * q - (dmin * min).
__host__ __device__ inline float KQuant(const uint8_t* b, const uint8_t* qh, const uint8_t* qs,
                                        int i) {
  const int s = i / 32, l = i % 32;
  int scale, min;
  KQuantScaleMin(b + 4, s, &scale, &min);
  const float ds = Mul(LoadHalf(b), static_cast<float>(scale));
  const float ms = Mul(LoadHalf(b + 2), static_cast<float>(min));
  const uint8_t byte = qs[32 * (s / 2) + l];
  int q = (s % 2 == 0) ? byte & 0x0f : byte >> 4;
  if (qh != nullptr) q |= ((qh[l] >> s) & 1) << 4;
  return Sub(Mul(ds, static_cast<float>(q)), ms);
}

struct Q4_K {
  static constexpr int kElements = 256, kBytes = 144;
  __host__ __device__ static float Value(const uint8_t* b, int i) {
    return KQuant(b, nullptr, b + 16, i);
  }
};

struct Q5_K {
  static constexpr int kElements = 256, kBytes = 176;
  __host__ __device__ static float Value(const uint8_t* b, int i) {
    return KQuant(b, b + 16, b + 48, i);
  }
};

// Value i of a q6_k super-block: half h = i / 128, quarter k = (i % 128) / 32, l = i % 32; the
// low nibble (k < 2) or high nibble of ql[64h + l + 32 * (k % 2)], bits 2k, 2k + 1 of qh[32h + l]
// on top, minus 32; x = (d * scale) * q with the int8 scale 8h + l / 16 + 2k.
struct Q6_K {
  static constexpr int kElements = 256, kBytes = 210;
  __host__ __device__ static float Value(const uint8_t* b, int i) {
    const int h = i / 128, k = (i % 128) / 32, l = i % 32;
    const uint8_t low = b[64 * h + l + 32 * (k % 2)];
    const int nibble = k < 2 ? low & 0x0f : low >> 4;
    const int q = (nibble | (((b[128 + 32 * h + l] >> (2 * k)) & 3) << 4)) - 32;
    const int8_t scale = static_cast<int8_t>(b[192 + 8 * h + l / 16 + 2 * k]);
    return Mul(Mul(LoadHalf(b + 208), static_cast<float>(scale)), static_cast<float>(q));
  }
};

__device__ inline void Store(float* out, float v) { *out = v; }
__device__ inline void Store(uint16_t* out, float v) { *out = FloatToBf16Bits(v); }

// out[i] = value i of the run of blocks, for i < n.
template <class Format, class Out>
__global__ void DequantizeKernel(const uint8_t* blocks, uint64_t n, Out* out) {
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  for (uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const uint64_t block = i / Format::kElements;
    const int within = static_cast<int>(i % Format::kElements);
    Store(out + i, Format::Value(blocks + block * Format::kBytes, within));
  }
}

template <class Format>
void Launch(cudaStream_t stream, const void* blocks, int64_t n, bool to_bf16, void* out) {
  const auto grid = static_cast<unsigned>(std::min((n + kThreads - 1) / kThreads, kMaxBlocks));
  const auto* src = static_cast<const uint8_t*>(blocks);
  const auto count = static_cast<uint64_t>(n);
  if (to_bf16) {
    DequantizeKernel<Format>
        <<<grid, kThreads, 0, stream>>>(src, count, static_cast<uint16_t*>(out));
  } else {
    DequantizeKernel<Format><<<grid, kThreads, 0, stream>>>(src, count, static_cast<float*>(out));
  }
}

using LaunchFn = void (*)(cudaStream_t, const void*, int64_t, bool, void*);

// The launcher of a type's decoder; null for a type without one.
LaunchFn LauncherFor(uint32_t ggml_type) {
  switch (ggml_type) {
    case kF32:
      return Launch<F32>;
    case kF16:
      return Launch<F16>;
    case kBF16:
      return Launch<BF16>;
    case kQ8_0:
      return Launch<Q8_0>;
    case kQ4_0:
      return Launch<Q4_0>;
    case kQ4_1:
      return Launch<Q4_1>;
    case kQ5_0:
      return Launch<Q5_0>;
    case kQ5_1:
      return Launch<Q5_1>;
    case kQ4_K:
      return Launch<Q4_K>;
    case kQ5_K:
      return Launch<Q5_K>;
    case kQ6_K:
      return Launch<Q6_K>;
    default:
      return nullptr;
  }
}

}  // namespace

bool HasDecoder(uint32_t ggml_type) { return LauncherFor(ggml_type) != nullptr; }

int DequantizeRows(const OpContext& ctx, uint32_t ggml_type, const void* blocks, int64_t rows,
                   int64_t cols, bool to_bf16, void* out) {
  const LaunchFn launch = LauncherFor(ggml_type);
  const int64_t n = rows * cols;
  if (launch == nullptr || n == 0) return 0;
  cudaStream_t stream = StreamOf(ctx);
  if (ggml_type == kF32 && !to_bf16) {  // the stored floats are the values: a copy
    CheckCuda(cudaMemcpyAsync(out, blocks, static_cast<size_t>(n) * sizeof(float),
                              cudaMemcpyDeviceToDevice, stream),
              "DequantizeRows (f32)");
  } else {
    launch(stream, blocks, n, to_bf16, out);
  }
  return LaunchResult(ctx, "DequantizeRows");
}

}  // namespace ripplekv::kernels::cuda
