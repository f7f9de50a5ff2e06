#include "worker/engine/device_model.h"

#include <new>
#include <string>

#include "base/strings.h"
#include "kernels/ops/upload.h"

namespace ripplekv::worker {

namespace {


// Host tensor `t` (fp32 norms, biases) on the device; empty stays empty.
kernels::Tensor Upload(const kernels::Tensor& t, const kernels::DeviceSession& session) {
  return t.empty() ? kernels::Tensor() : t.CopyTo(session.allocator());
}

}  // namespace

StatusOr<kernels::DType> ParseDeviceWeights(std::string_view text) {
  if (text == "bf16") return kernels::DType::kBF16;
  if (text == "f32") return kernels::DType::kF32;
  return absl::InvalidArgumentError(Cat("device weights '", text, "' are not bf16 or f32"));
}

StatusOr<Model> UploadModel(const Model& host, const kernels::DeviceSession& session,
                            kernels::DType dtype) {
  Model device;
  device.config = host.config;
  std::string tensor_name;
  auto weight = [&](const kernels::Weight& w, std::string name) -> StatusOr<kernels::Weight> {
    tensor_name = std::move(name);
    return kernels::UploadWeight(session, w, dtype);
  };
  try {
    if (host.config.tied_embeddings) {
      ASSIGN_OR_RETURN(device.tok_embeddings, weight(host.tok_embeddings, "token_embd"));
    }
    ASSIGN_OR_RETURN(device.output, weight(host.output, "output"));
    tensor_name = "output_norm";
    device.output_norm = Upload(host.output_norm, session);
    device.rope_freq_factors = Upload(host.rope_freq_factors, session);
    device.layers.resize(host.layers.size());
    for (size_t l = 0; l < host.layers.size(); ++l) {
      const LayerWeights& h = host.layers[l];
      LayerWeights& d = device.layers[l];
      const std::string layer = Cat("blk.", l, ".");
      ASSIGN_OR_RETURN(d.wq, weight(h.wq, layer + "attn_q"));
      ASSIGN_OR_RETURN(d.wk, weight(h.wk, layer + "attn_k"));
      ASSIGN_OR_RETURN(d.wv, weight(h.wv, layer + "attn_v"));
      ASSIGN_OR_RETURN(d.wo, weight(h.wo, layer + "attn_output"));
      ASSIGN_OR_RETURN(d.w_gate, weight(h.w_gate, layer + "ffn_gate"));
      ASSIGN_OR_RETURN(d.w_up, weight(h.w_up, layer + "ffn_up"));
      ASSIGN_OR_RETURN(d.w_down, weight(h.w_down, layer + "ffn_down"));
      tensor_name = layer + "norms and biases";
      d.attn_norm = Upload(h.attn_norm, session);
      d.ffn_norm = Upload(h.ffn_norm, session);
      d.bq = Upload(h.bq, session);
      d.bk = Upload(h.bk, session);
      d.bv = Upload(h.bv, session);
    }
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(
        Cat(kernels::DeviceSpecName(session.spec()), ": out of device memory uploading ",
            tensor_name, " (", WeightBytes(host), " bytes of weights on the host)"));
  }
  return device;
}

}  // namespace ripplekv::worker
