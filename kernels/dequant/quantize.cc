#include "kernels/dequant/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/strings.h"
#include "kernels/dequant/dequant.h"
#include "kernels/dequant/fp16.h"

namespace ripplekv::kernels {

namespace {

// Little-endian stores, any alignment.
inline void StoreHalf(uint8_t* p, uint16_t h) {
  p[0] = static_cast<uint8_t>(h & 0xff);
  p[1] = static_cast<uint8_t>(h >> 8);
}

// max |x[j]| over 32 values, in 8 independent lanes so that the compiler vectorizes it (a single
// running maximum is a serial chain it may not reorder). Exact: max is order-independent for
// non-NaN input.
inline float AbsMax32(const float* x) {
  float lane[8] = {};
  for (int j = 0; j < 32; j += 8) {
    for (int k = 0; k < 8; ++k) {
      const float a = std::fabs(x[j + k]);
      lane[k] = lane[k] > a ? lane[k] : a;
    }
  }
  float amax = 0.0f;
  for (float v : lane) amax = amax > v ? amax : v;
  return amax;
}

void EncodeQ8_0(const float* x, int64_t n_blocks, uint8_t* y) {
  for (int64_t b = 0; b < n_blocks; ++b, x += 32, y += 34) {
    const float amax = AbsMax32(x);
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    StoreHalf(y, FloatToHalf(d));
    for (int j = 0; j < 32; ++j) {
      y[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(std::roundf(x[j] * id)));
    }
  }
}

void EncodeQ4_0(const float* x, int64_t n_blocks, uint8_t* y) {
  for (int64_t b = 0; b < n_blocks; ++b, x += 32, y += 18) {
    // ggml keeps the first element of largest magnitude (a strict `amax < |v|` update): find
    // the magnitude first (a loop the compiler vectorizes), then its first occurrence.
    const float amax = AbsMax32(x);
    float max = 0.0f;
    for (int j = 31; j >= 0; --j) max = std::fabs(x[j]) == amax ? x[j] : max;  // no branch
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    StoreHalf(y, FloatToHalf(d));
    for (int j = 0; j < 16; ++j) {
      // ggml truncates toward zero: x * id + 8.5 lies in [0.5, 16.5] for finite input, where
      // its int8 cast and this int cast agree.
      const int lo = std::min(15, static_cast<int>(x[j] * id + 8.5f));
      const int hi = std::min(15, static_cast<int>(x[j + 16] * id + 8.5f));
      y[2 + j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

}  // namespace

bool CanQuantize(GgmlType type) {
  switch (type) {
    case GgmlType::kF32:
    case GgmlType::kF16:
    case GgmlType::kBF16:
    case GgmlType::kQ8_0:
    case GgmlType::kQ4_0:
      return true;
    default:
      return false;
  }
}

Status QuantizeRow(GgmlType type, std::span<const float> src, std::span<uint8_t> dst) {
  const GgmlTypeTraits traits = TraitsOf(type);
  if (!CanQuantize(type)) {
    return absl::UnimplementedError(
        Cat("quantizing to ", traits.name, " is not implemented (f32, f16, bf16, q8_0, q4_0 are)"));
  }
  const int64_t n = static_cast<int64_t>(src.size());
  ASSIGN_OR_RETURN(const int64_t bytes, GgmlBytes(type, n));
  if (static_cast<int64_t>(dst.size()) != bytes) {
    return absl::InvalidArgumentError(Cat("quantizing ", n, " values to ", traits.name, " needs ",
                                          bytes, " bytes, the destination has ", dst.size()));
  }
  const float* x = src.data();
  uint8_t* y = dst.data();
  switch (type) {
    case GgmlType::kF32:
      if (n > 0) std::memcpy(y, x, static_cast<size_t>(n) * sizeof(float));
      break;
    case GgmlType::kF16:
      for (int64_t i = 0; i < n; ++i) StoreHalf(y + 2 * i, FloatToHalf(x[i]));
      break;
    case GgmlType::kBF16:
      for (int64_t i = 0; i < n; ++i) StoreHalf(y + 2 * i, FloatToBf16(x[i]));
      break;
    case GgmlType::kQ8_0:
      EncodeQ8_0(x, n / 32, y);
      break;
    case GgmlType::kQ4_0:
      EncodeQ4_0(x, n / 32, y);
      break;
    default:
      break;  // refused above
  }
  return absl::OkStatus();
}

}  // namespace ripplekv::kernels
