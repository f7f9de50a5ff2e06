#pragma once
// The error measure of the device cross-checks: NMSE = sum (got - want)^2 / sum want^2 over two
// host fp32 tensors of equal size (the plain squared error when want is all zeros).

#include "kernels/tensor/tensor.h"

namespace ripplekv::kernels {

inline double Nmse(const Tensor& got, const Tensor& want) {
  double err = 0.0, ref = 0.0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double d = static_cast<double>(got.data()[i]) - want.data()[i];
    err += d * d;
    ref += static_cast<double>(want.data()[i]) * want.data()[i];
  }
  return ref == 0.0 ? err : err / ref;
}

}  // namespace ripplekv::kernels
