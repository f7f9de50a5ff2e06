#pragma once
// The forward pass of a LLaMA-family decoder over a KvCache, in fp32.
//
// A call processes n new tokens (prefill when n > 1, decode when n == 1) at given positions,
// appends their keys/values to the cache of every layer it runs, and returns the logits of the
// rows asked for. It can also start at any layer from given layer inputs (the residual stream
// entering that layer) and record the residual-stream input of every layer for chosen rows:
// calibration resumes the probe pass at the perturbed layer this way.
//
// Devices: by default the Transformer runs on the CPU over the model's own weights. Given a device
// session it uploads the weights once (device_model.h) and runs every op on the session's
// stream; tensors it returns (logits, recorded layer inputs) then live on that device, and its
// caches must be made by NewCache.
//
// Thread-safety: a CPU Transformer is immutable after construction and may be shared; each call
// needs its own KvCache. A device Transformer queues on its session's one stream: one thread at a
// time. Results do not depend on options.num_threads.

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "base/status.h"
#include "kernels/tensor/tensor.h"
#include "kernels/ops/communicator.h"
#include "kernels/ops/devices.h"
#include "kernels/ops/op_context.h"
#include "kernels/ops/rope.h"
#include "worker/engine/kv_cache.h"
#include "worker/model/model.h"

namespace ripplekv::worker {

struct TransformerOptions {
  int num_threads = 1;  // CPU threads for GEMMs and kernels
  // Where the ops run: null for the CPU, else a device session that outlives the Transformer.
  const kernels::DeviceSession* device = nullptr;
  // The type of the weights on a device: bf16 (GEMMs in bf16 with fp32 accumulation) or f32 (the
  // exactness mode). Ignored on the CPU.
  kernels::DType device_weights = kernels::DType::kBF16;
  // The ranks of a tensor-parallel model (model.shard of size > 1; worker/model/model_shard.h):
  // each rank runs its Transformer over its shard with every other rank in step, and the
  // row-parallel projections all-reduce their outputs before the residual add. Null for a whole
  // model. Must outlive the Transformer.
  kernels::Communicator* communicator = nullptr;
};

enum class LogitRows {
  kNone,  // no logits (prefill whose output is not needed)
  kLast,  // the last new token only (generation)
  kAll,   // every new token (perplexity, probes)
};

// Called by Forward after each layer's attention with the layer, its queries q
// ([n, n_heads, head_dim], RoPE applied) and the layer's cache, which now holds this call's keys
// and values. Read-only; an error stops the forward pass and is returned. (Compression policies
// compute their attention statistics here, worker/compress/prefill_observer.h.)
using LayerObserver = std::function<Status(int layer, const kernels::ConstTensorView& q,
                                           const kernels::KvCacheView& cache)>;

struct ForwardRequest {
  std::span<const int32_t> tokens;  // [n] token ids; ignored when `layer_input` is given
  // [n] positions; empty means consecutive, starting after the last cached position of
  // `start_layer` (or 0 on an empty cache).
  std::span<const int32_t> positions;
  int start_layer = 0;  // first layer to run; layers below are neither run nor touched
  // [n, d_model] residual-stream input of `start_layer` (on the host or the Transformer's
  // device); required when start_layer > 0.
  const kernels::Tensor* layer_input = nullptr;
  LogitRows logits = LogitRows::kLast;
  // With LogitRows::kAll: logits only for rows [first_logit_row, n) (perplexity scores only the
  // second half of a chunk; the LM head is a large share of the cost).
  int first_logit_row = 0;
  // Rows (indices into this call's tokens, increasing) whose input to every layer run is recorded.
  std::span<const int32_t> record_rows;
  // Optional: sees every layer's queries and cache after its attention.
  const LayerObserver* observer = nullptr;
};

// On the Transformer's device (kernels::OnHost brings them to the host).
struct ForwardResult {
  kernels::Tensor logits;  // [rows, vocab_size], rows per ForwardRequest::logits and first_logit_row
  // layer_inputs[l]: [record_rows.size(), d_model] for l in [start_layer, n_layers); empty below.
  std::vector<kernels::Tensor> layer_inputs;
};

// Attention of one layer, pluggable so callers can supply their own key/value sources.
// q: [n, n_heads, head_dim] (RoPE applied); k, v: [n, n_kv_heads * head_dim] projections of the
// same rows (k RoPE'd), mutable so a caller may perturb them; out: [n, n_heads, head_dim].
using LayerAttention =
    std::function<Status(int layer, const kernels::TensorView& q, kernels::Tensor& k,
                         kernels::Tensor& v, std::span<const int32_t> positions,
                         const kernels::TensorView& out)>;

struct LayerRange {
  int first = 0;  // first layer to run
  int end = -1;   // one past the last layer; -1 means n_layers
  std::span<const int32_t> positions;  // [n] positions of the rows
  // Rows whose input to each layer run is copied into (*layer_inputs)[l] ([rows, d_model]).
  std::span<const int32_t> record_rows;
  std::vector<kernels::Tensor>* layer_inputs = nullptr;
};

class Transformer {
 public:
  // `model` (host weights) must outlive the Transformer. Errors: InvalidArgument when the model's
  // rope settings are unusable (odd head_dim, wrong rope factor count); UploadModel's on a device.
  static StatusOr<Transformer> Create(const Model& model, const TransformerOptions& options);

  // An empty cache of `capacity` tokens on this Transformer's device.
  KvCache NewCache(int capacity) const;

  const ModelConfig& config() const { return model_->config; }
  const Model& model() const { return *model_; }
  // The device and thread settings this Transformer's ops run with.
  const kernels::OpContext& op_context() const { return ctx_; }
  // The allocator of that device (for tensors passed to RunLayers and the ops).
  kernels::Allocator& allocator() const { return *allocator_; }

  // Runs the layers [start_layer, n_layers) over the request's tokens. Errors: InvalidArgument
  // (token id out of range, bad positions, missing layer_input), ResourceExhausted (cache full).
  [[nodiscard]] StatusOr<ForwardResult> Forward(const ForwardRequest& request, KvCache& cache) const;

  // Building blocks of Forward for callers that batch their own sequences (calibration):
  // runs layers [range.first, range.end) over the residual stream x ([n, d_model], updated in
  // place) with `attend` doing each layer's attention.
  [[nodiscard]] Status RunLayers(kernels::Tensor& x, const LayerRange& range,
                                 const LayerAttention& attend) const;
  // The standard attention step of `layer` over `cache`: appends k and v ([n, n_kv_heads *
  // head_dim]) at `positions`, then causal attention of q over the layer's cache at the scale
  // 1/sqrt(head_dim) into out. Forward runs exactly this; a LayerAttention that alters k or v
  // first (calibration's perturbation) calls it to stay identical otherwise. Errors: Append's and
  // CausalAttention's.
  [[nodiscard]] Status AttendCached(int layer, const kernels::TensorView& q, const kernels::Tensor& k,
                                    const kernels::Tensor& v, std::span<const int32_t> positions,
                                    const kernels::TensorView& out, KvCache& cache) const;
  // Token embeddings: [n, d_model], gathered on the host and sent to the Transformer's device.
  // InvalidArgument for an id outside the vocabulary.
  [[nodiscard]] StatusOr<kernels::Tensor> Embed(std::span<const int32_t> tokens) const;
  // Final norm and LM head: rows [r, d_model] of the residual stream (on this Transformer's
  // device) → logits [r, vocab_size] there.
  [[nodiscard]] StatusOr<kernels::Tensor> Logits(const kernels::Tensor& rows) const;

 private:
  Transformer(const Model& model, const TransformerOptions& options, kernels::RopeTable rope,
              std::shared_ptr<const Model> device_weights);

  // The weights the ops read: the device copy, or the model itself on the CPU.
  const Model& weights() const { return device_weights_ ? *device_weights_ : *model_; }
  // A new fp32 tensor on this Transformer's device.
  kernels::Tensor NewTensor(kernels::Shape shape) const;
  // x += in * w^T: fused into the GEMM for a whole model; for a shard, the partial product goes
  // to `partial` ([n, d_model]), is all-reduced over the ranks, then added.
  [[nodiscard]] Status ResidualLinear(const kernels::ConstTensorView& in, const kernels::Weight& w,
                                      kernels::Tensor& partial, kernels::Tensor& x) const;

  // Immutable after construction.
  const Model* model_;
  TransformerOptions options_;
  kernels::OpContext ctx_;
  kernels::Allocator* allocator_;
  kernels::RopeTable rope_;
  std::shared_ptr<const Model> device_weights_;  // null on the CPU
};

}  // namespace ripplekv::worker
