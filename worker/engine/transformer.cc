#include "worker/engine/transformer.h"

#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "base/strings.h"
#include "kernels/ops/activation.h"
#include "kernels/ops/attention.h"
#include "kernels/ops/gather.h"
#include "kernels/ops/linear.h"
#include "kernels/ops/norm.h"
#include "worker/engine/device_model.h"

namespace ripplekv::worker {

using kernels::ConstTensorView;
using kernels::Tensor;
using kernels::TensorView;

namespace {

ConstTensorView OptionalView(const Tensor& t) { return t.empty() ? ConstTensorView() : t.view(); }

}  // namespace

StatusOr<Transformer> Transformer::Create(const Model& model, const TransformerOptions& options) {
  const ModelConfig& c = model.config;
  const auto pairing = c.rope_style == RopeStyle::kInterleaved ? kernels::RopePairing::kInterleaved
                                                               : kernels::RopePairing::kHalfSplit;
  kernels::Llama3Scaling llama3{c.rope_scaling.factor, c.rope_scaling.low_freq_factor,
                                c.rope_scaling.high_freq_factor,
                                c.rope_scaling.original_max_positions};
  ASSIGN_OR_RETURN(kernels::RopeTable rope,
                   kernels::MakeRopeTable(c.head_dim, c.rope_theta, pairing,
                                          model.rope_freq_factors.span(), llama3));
  if (options.num_threads < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_threads must be >= 1, got ", options.num_threads));
  }
  const int ranks = options.communicator != nullptr ? options.communicator->size() : 1;
  if (model.shard.size != ranks ||
      (options.communicator != nullptr && options.communicator->rank() != model.shard.rank)) {
    return absl::InvalidArgumentError(Cat("the model is shard ", model.shard.rank, " of ",
                                          model.shard.size, ", the communicator has ", ranks,
                                          " ranks"));
  }
  std::shared_ptr<const Model> device_weights;
  if (options.device != nullptr && options.device->context().device != kernels::Device::kCpu) {
    ASSIGN_OR_RETURN(Model uploaded, UploadModel(model, *options.device, options.device_weights));
    device_weights = std::make_shared<const Model>(std::move(uploaded));
  }
  return Transformer(model, options, std::move(rope), std::move(device_weights));
}

Transformer::Transformer(const Model& model, const TransformerOptions& options,
                         kernels::RopeTable rope, std::shared_ptr<const Model> device_weights)
    : model_(&model),
      options_(options),
      allocator_(&kernels::HostAllocator()),
      rope_(std::move(rope)),
      device_weights_(std::move(device_weights)) {
  if (device_weights_ != nullptr) {
    ctx_ = options.device->context();
    allocator_ = &options.device->allocator();
  }
  ctx_.num_threads = options.num_threads;
  ctx_.communicator = options.communicator;
}

KvCache Transformer::NewCache(int capacity) const {
  return KvCache(model_->config, capacity, device_weights_ != nullptr ? options_.device : nullptr);
}

Tensor Transformer::NewTensor(kernels::Shape shape) const {
  return Tensor(std::move(shape), kernels::DType::kF32, *allocator_);
}

StatusOr<ForwardResult> Transformer::Forward(const ForwardRequest& request, KvCache& cache) const {
  const ModelConfig& c = model_->config;
  const int start = request.start_layer;
  if (start < 0 || start >= c.n_layers) {
    return absl::InvalidArgumentError(
        absl::StrCat("start_layer ", start, " outside [0, ", c.n_layers, ")"));
  }
  const int64_t d = c.d_model;

  // The residual stream x: [n, d_model].
  Tensor x;
  if (request.layer_input != nullptr) {
    if (request.layer_input->rank() != 2 || request.layer_input->dim(1) != d) {
      return absl::InvalidArgumentError(
          absl::StrCat("layer_input must be [n, ", d, "], got ",
                       kernels::ShapeString(request.layer_input->shape())));
    }
    x = request.layer_input->CopyTo(*allocator_);
  } else {
    if (start != 0) return absl::InvalidArgumentError("start_layer > 0 needs layer_input");
    ASSIGN_OR_RETURN(x, Embed(request.tokens));
  }
  const int64_t n = x.dim(0);
  if (n == 0) return absl::InvalidArgumentError("Forward: no tokens");

  std::vector<int32_t> positions(request.positions.begin(), request.positions.end());
  if (positions.empty()) {
    const int len = cache.length(start);
    const int32_t first = len == 0 ? 0 : cache.Position(start, 0, len - 1) + 1;
    positions.resize(n);
    std::iota(positions.begin(), positions.end(), first);
  } else if (static_cast<int64_t>(positions.size()) != n) {
    return absl::InvalidArgumentError(
        absl::StrCat(positions.size(), " positions for ", n, " tokens"));
  }
  if (request.first_logit_row < 0 || request.first_logit_row >= n) {
    return absl::InvalidArgumentError(
        absl::StrCat("first_logit_row ", request.first_logit_row, " outside [0, ", n, ")"));
  }
  for (int32_t r : request.record_rows) {
    if (r < 0 || r >= n) {
      return absl::InvalidArgumentError(absl::StrCat("record row ", r, " outside [0, ", n, ")"));
    }
  }

  ForwardResult result;
  result.layer_inputs.resize(c.n_layers);
  auto attend = [&cache, &request, this](int layer, const TensorView& q3, Tensor& k, Tensor& v,
                                         std::span<const int32_t> pos,
                                         const TensorView& out) -> Status {
    RETURN_IF_ERROR(AttendCached(layer, q3, k, v, pos, out, cache));
    if (request.observer == nullptr) return absl::OkStatus();
    return (*request.observer)(layer, q3, cache.View(layer));
  };
  RETURN_IF_ERROR(RunLayers(x,
                            {.first = start,
                             .positions = positions,
                             .record_rows = request.record_rows,
                             .layer_inputs = &result.layer_inputs},
                            attend));

  if (request.logits != LogitRows::kNone) {
    Tensor rows;
    if (request.logits == LogitRows::kAll && request.first_logit_row == 0) {
      rows = std::move(x);
    } else {
      const int64_t first = request.logits == LogitRows::kAll ? request.first_logit_row : n - 1;
      rows = NewTensor({n - first, d});
      RETURN_IF_ERROR(kernels::CopyRows(ctx_, x.view(), first, rows.view()));
    }
    ASSIGN_OR_RETURN(result.logits, Logits(rows));
  }
  return result;
}

Status Transformer::AttendCached(int layer, const TensorView& q, const Tensor& k, const Tensor& v,
                                 std::span<const int32_t> positions, const TensorView& out,
                                 KvCache& cache) const {
  RETURN_IF_ERROR(cache.Append(layer, k.view(), v.view(), positions));
  const float scale = 1.0f / std::sqrt(static_cast<float>(model_->config.head_dim));
  const Tensor q_positions = kernels::Int32Tensor(positions, *allocator_);
  return kernels::CausalAttention(ctx_, q, q_positions.int32_view(), cache.View(layer), scale, out);
}

StatusOr<Tensor> Transformer::Embed(std::span<const int32_t> tokens) const {
  Tensor x({static_cast<int64_t>(tokens.size()), model_->config.d_model});
  const kernels::OpContext host{.num_threads = options_.num_threads};
  RETURN_IF_ERROR(kernels::EmbeddingLookup(host, model_->tok_embeddings, tokens, x.view()));
  return device_weights_ != nullptr ? x.CopyTo(*allocator_) : std::move(x);
}

Status Transformer::RunLayers(Tensor& x, const LayerRange& range,
                              const LayerAttention& attend) const {
  const ModelConfig& c = model_->config;
  const int end = range.end < 0 ? c.n_layers : range.end;
  if (range.first < 0 || range.first > end || end > c.n_layers) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer range [", range.first, ", ", end, ") outside [0, ", c.n_layers, "]"));
  }
  const int64_t n = x.dim(0);
  const int64_t d = c.d_model;
  if (x.rank() != 2 || x.dim(1) != d || static_cast<int64_t>(range.positions.size()) != n) {
    return absl::InvalidArgumentError(absl::StrCat("RunLayers: x ", kernels::ShapeString(x.shape()),
                                                   " with ", range.positions.size(), " positions"));
  }
  const int64_t hd = c.head_dim;
  const int64_t q_width = static_cast<int64_t>(c.n_heads) * hd;
  const int64_t kv_width = static_cast<int64_t>(c.n_kv_heads) * hd;
  if (x.device() != ctx_.device) {
    return absl::InvalidArgumentError(Cat("RunLayers: x is on ", kernels::DeviceName(x.device()),
                                          ", the Transformer runs on ",
                                          kernels::DeviceName(ctx_.device)));
  }
  Tensor xn = NewTensor({n, d});
  Tensor q = NewTensor({n, q_width}), k = NewTensor({n, kv_width}), v = NewTensor({n, kv_width});
  Tensor attn = NewTensor({n, q_width});
  Tensor gate = NewTensor({n, c.d_ff}), up = NewTensor({n, c.d_ff});
  Tensor partial = ctx_.communicator != nullptr ? NewTensor({n, d}) : Tensor();
  const Tensor positions = kernels::Int32Tensor(range.positions, *allocator_);
  const Tensor record_rows = kernels::Int32Tensor(range.record_rows, *allocator_);

  for (int l = range.first; l < end; ++l) {
    const LayerWeights& w = weights().layers[l];
    if (range.layer_inputs != nullptr && !range.record_rows.empty()) {
      Tensor& recorded = (*range.layer_inputs)[l];
      recorded = NewTensor({static_cast<int64_t>(range.record_rows.size()), d});
      RETURN_IF_ERROR(
          kernels::GatherRows(ctx_, x.view(), record_rows.int32_view(), recorded.view()));
    }

    // Attention block.
    RETURN_IF_ERROR(kernels::RmsNorm(ctx_, x.view(), w.attn_norm.view(), c.rms_eps, xn.view()));
    RETURN_IF_ERROR(kernels::Linear(ctx_, xn.view(), w.wq, OptionalView(w.bq), q.view()));
    RETURN_IF_ERROR(kernels::Linear(ctx_, xn.view(), w.wk, OptionalView(w.bk), k.view()));
    RETURN_IF_ERROR(kernels::Linear(ctx_, xn.view(), w.wv, OptionalView(w.bv), v.view()));
    TensorView q3{q.view().data, {n, c.n_heads, hd}, ctx_.device};     // [n, n_heads, head_dim]
    TensorView k3{k.view().data, {n, c.n_kv_heads, hd}, ctx_.device};  // [n, n_kv_heads, head_dim]
    RETURN_IF_ERROR(kernels::ApplyRope(ctx_, rope_, positions.int32_view(), q3));
    RETURN_IF_ERROR(kernels::ApplyRope(ctx_, rope_, positions.int32_view(), k3));
    TensorView attn3{attn.view().data, {n, c.n_heads, hd}, ctx_.device};
    RETURN_IF_ERROR(attend(l, q3, k, v, range.positions, attn3));
    RETURN_IF_ERROR(ResidualLinear(attn.view(), w.wo, partial, x));

    // Feed-forward block (SwiGLU).
    RETURN_IF_ERROR(kernels::RmsNorm(ctx_, x.view(), w.ffn_norm.view(), c.rms_eps, xn.view()));
    RETURN_IF_ERROR(kernels::Linear(ctx_, xn.view(), w.w_gate, {}, gate.view()));
    RETURN_IF_ERROR(kernels::Linear(ctx_, xn.view(), w.w_up, {}, up.view()));
    RETURN_IF_ERROR(kernels::SwiGlu(ctx_, gate.view(), up.view(), gate.view()));
    RETURN_IF_ERROR(ResidualLinear(gate.view(), w.w_down, partial, x));
  }
  return absl::OkStatus();
}

Status Transformer::ResidualLinear(const ConstTensorView& in, const kernels::Weight& w,
                                   Tensor& partial, Tensor& x) const {
  if (ctx_.communicator == nullptr) {
    return kernels::Linear(ctx_, in, w, {}, x.view(), {.accumulate = true});
  }
  RETURN_IF_ERROR(kernels::Linear(ctx_, in, w, {}, partial.view()));
  RETURN_IF_ERROR(ctx_.communicator->AllReduceSum(ctx_, partial.view()));
  return kernels::AddTo(ctx_, partial.view(), x.view());
}

StatusOr<Tensor> Transformer::Logits(const Tensor& rows) const {
  const ModelConfig& c = model_->config;
  Tensor normed = NewTensor({rows.dim(0), c.d_model});
  RETURN_IF_ERROR(
      kernels::RmsNorm(ctx_, rows.view(), weights().output_norm.view(), c.rms_eps, normed.view()));
  Tensor logits = NewTensor({rows.dim(0), c.vocab_size});
  RETURN_IF_ERROR(kernels::Linear(ctx_, normed.view(), weights().lm_head(), {}, logits.view()));
  return logits;
}

}  // namespace ripplekv::worker
