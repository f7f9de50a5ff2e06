#pragma once
// A model's weights on a device, uploaded once per worker for the device's forward pass
// (transformer.h runs on it when given a device session).

#include "kernels/tensor/dtype.h"
#include "base/status.h"
#include "kernels/ops/devices.h"
#include "worker/model/model.h"

namespace ripplekv::worker {

// The matrices of `host` on `session`'s device as `dtype` (kBF16, the default compute type, or
// kF32, the exactness mode; kernels/ops/upload.h), norms, biases and RoPE factors as fp32. The
// token embeddings stay on the host (a forward pass gathers its rows there and sends only those)
// unless they are tied to the LM head, which needs them on the device. Errors: UploadWeight's,
// ResourceExhausted when the device runs out of memory (naming the tensor).
[[nodiscard]] StatusOr<Model> UploadModel(const Model& host, const kernels::DeviceSession& session,
                                          kernels::DType dtype);

// Parses "bf16" / "f32" (the `--device-weights` flag). InvalidArgument naming the text otherwise.
[[nodiscard]] StatusOr<kernels::DType> ParseDeviceWeights(std::string_view text);

}  // namespace ripplekv::worker
