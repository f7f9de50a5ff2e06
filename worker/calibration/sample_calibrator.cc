#include "worker/calibration/sample_calibrator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/ops/attention.h"
#include "kernels/ops/gather.h"
#include "kernels/ops/kv_cache.h"
#include "kernels/ops/noise.h"
#include "kernels/ops/softmax.h"

namespace ripplekv::worker {

namespace {

SelectionKind SelectionKindOf(method::ResponseSelector selector) {
  switch (selector) {
    case method::ResponseSelector::kH2o:
      return SelectionKind::kH2o;
    case method::ResponseSelector::kStreaming:
      return SelectionKind::kStreaming;
    case method::ResponseSelector::kSnapKv:
      break;
  }
  return SelectionKind::kSnapKv;
}

}  // namespace

TrialOptions TrialOptionsOf(const method::CalibrationParams& params) {
  TrialOptions options{.alpha = static_cast<float>(params.alpha),
                       .trials = static_cast<int>(params.trials),
                       .seed = params.seed};
  if (params.objective == method::Objective::kResponse) {
    ResponseTrials response{.selector = SelectionKindOf(params.selector),
                            .window = static_cast<int>(method::kResponseWindow)};
    response.selection.sinks = static_cast<int>(method::kResponseSinks);
    response.budgets.assign(params.budgets.begin(), params.budgets.end());
    response.kv_heads = static_cast<int>(params.kv_heads);
    options.response = std::move(response);
  }
  return options;
}

std::optional<ObserverOptions> ObserverOptionsFor(const TrialOptions& options) {
  if (!options.response) return std::nullopt;
  const SelectionKind kind = options.response->selector;
  return ObserverOptions{.window = options.response->window,
                         .window_stats = kind == SelectionKind::kSnapKv,
                         .accumulated = kind == SelectionKind::kH2o};
}

using kernels::ConstTensorView;
using kernels::KvCacheView;
using kernels::NoiseKey;
using kernels::Tensor;
using kernels::TensorView;

namespace {

std::vector<int32_t> Iota(int n, int32_t first = 0) {
  std::vector<int32_t> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

}  // namespace

SampleCalibrator::SampleCalibrator(const Transformer& model, int sample_index,
                                   std::span<const int32_t> context, std::span<const int32_t> probe,
                                   PerturbMode mode)
    : model_(&model),
      sample_index_(sample_index),
      context_(context.begin(), context.end()),
      probe_(probe.begin(), probe.end()),
      mode_(mode) {
  tokens_ = context_;
  tokens_.insert(tokens_.end(), probe_.begin(), probe_.end());
  positions_ = Iota(static_cast<int>(tokens_.size()));
}

StatusOr<std::unique_ptr<SampleCalibrator>> SampleCalibrator::Prepare(
    const Transformer& model, int sample_index, std::span<const int32_t> context,
    std::span<const int32_t> probe, PerturbMode mode,
    const std::optional<ObserverOptions>& observe) {
  if (context.empty() || probe.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("sample ", sample_index, ": context (",
                                                   context.size(), " tokens) and probe (",
                                                   probe.size(), " tokens) must not be empty"));
  }
  if (sample_index < 0) return absl::InvalidArgumentError("sample index must be >= 0");
  if (observe && mode != PerturbMode::kCache) {
    return absl::InvalidArgumentError("attention statistics are recorded in cache mode only");
  }
  std::unique_ptr<SampleCalibrator> s(
      new SampleCalibrator(model, sample_index, context, probe, mode));
  const int c = s->context_len(), w = s->probe_len();
  s->cache_ = std::make_unique<KvCache>(model.NewCache(c + w));
  if (mode == PerturbMode::kCache) {
    if (observe) {
      // The same prefill (Forward with an observer), recording what the selectors read.
      ASSIGN_OR_RETURN(ObservedPrefill pre,
                       PrefillObserved(model, s->context_, *observe, *s->cache_));
      s->stats_ = std::move(pre.layers);
      s->observed_ = observe;
    } else {
      ASSIGN_OR_RETURN(
          ForwardResult pre,
          model.Forward({.tokens = s->context_, .logits = LogitRows::kNone}, *s->cache_));
    }
    const std::vector<int32_t> rows = Iota(w);
    ASSIGN_OR_RETURN(
        ForwardResult out,
        model.Forward({.tokens = s->probe_, .logits = LogitRows::kAll, .record_rows = rows},
                      *s->cache_));
    s->clean_logits_ = std::move(out.logits);
    s->layer_inputs_ = std::move(out.layer_inputs);
  } else {
    const std::vector<int32_t> rows = Iota(c + w);
    ASSIGN_OR_RETURN(ForwardResult out, model.Forward({.tokens = s->tokens_,
                                                       .logits = LogitRows::kAll,
                                                       .first_logit_row = c,
                                                       .record_rows = rows},
                                                      *s->cache_));
    s->clean_logits_ = std::move(out.logits);
    s->layer_inputs_ = std::move(out.layer_inputs);
  }
  return s;
}

int64_t SampleCalibrator::memory_bytes() const {
  const ModelConfig& c = model_->config();
  int64_t floats = 2LL * c.n_layers * c.n_kv_heads * cache_->capacity() * c.head_dim;
  int64_t ints = static_cast<int64_t>(c.n_layers) * c.n_kv_heads * cache_->capacity();
  floats += clean_logits_.numel();
  for (const kernels::Tensor& t : layer_inputs_) floats += t.numel();
  ints +=
      static_cast<int64_t>(tokens_.size() + positions_.size() + context_.size() + probe_.size());
  int64_t doubles = 0;
  for (const LayerStats& l : stats_) {
    doubles +=
        static_cast<int64_t>(l.window_sum.size() + l.window_sumsq.size() + l.accumulated.size());
  }
  return floats * static_cast<int64_t>(sizeof(float)) +
         ints * static_cast<int64_t>(sizeof(int32_t)) +
         doubles * static_cast<int64_t>(sizeof(double));
}

Status SampleCalibrator::CheckArgs(int layer, const TrialOptions& options) const {
  const int n_layers = model_->config().n_layers;
  if (layer < 0 || layer >= n_layers) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer ", layer, " outside [0, ", n_layers, ")"));
  }
  // The engine's precondition, not the method's rule (method/calibration_params.h, alpha > 0, is
  // checked where parameters enter): alpha 0 is the noise-free reference, KL 0 up to rounding.
  if (!(options.alpha >= 0.0f) || !std::isfinite(options.alpha)) {
    return absl::InvalidArgumentError(
        absl::StrCat("alpha must be a finite number >= 0, got ", options.alpha));
  }
  if (options.trials < 1) {
    return absl::InvalidArgumentError(absl::StrCat("trials must be >= 1, got ", options.trials));
  }
  if (options.response) {
    const ResponseTrials& response = *options.response;
    const size_t per_grid = static_cast<size_t>(std::max(1, response.kv_heads));
    if (static_cast<size_t>(options.trials) != per_grid * response.budgets.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("response trials: ", options.trials, " trials for a grid of ",
                       response.budgets.size(), " budgets",
                       response.kv_heads > 0 ? absl::StrCat(" x ", response.kv_heads, " KV heads")
                                             : std::string()));
    }
    if (response.kv_heads != 0) {
      const ModelShard& shard = model_->model().shard;
      const int hkv = model_->config().n_kv_heads;
      if (shard.size != 1) {
        return absl::FailedPreconditionError(absl::StrCat(
            "a per-head response needs a worker that holds every KV head (tensor parallel size 1); "
            "this rank holds ",
            hkv, " of them from head ", shard.first_kv_head));
      }
      if (response.kv_heads != hkv) {
        return absl::InvalidArgumentError(absl::StrCat("params.kv_heads: ", response.kv_heads,
                                                       ", but the model has ", hkv, " KV heads"));
      }
    }
    if (mode_ != PerturbMode::kCache) {
      return absl::InvalidArgumentError("response trials run in cache mode");
    }
    const ObserverOptions needed = *ObserverOptionsFor(options);
    if (!observed_ || observed_->window != needed.window ||
        (needed.window_stats && !observed_->window_stats) ||
        (needed.accumulated && !observed_->accumulated)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "response trials with ", std::string(SelectionName(options.response->selector)),
          ": the sample was prepared without the attention statistics the selector reads"));
    }
  }
  return absl::OkStatus();
}

StatusOr<std::vector<double>> SampleCalibrator::RunLayer(int layer,
                                                         const TrialOptions& options) const {
  RETURN_IF_ERROR(CheckArgs(layer, options));
  if (options.response) {
    if (options.response->kv_heads > 0) {
      return RunLayerHeadResponses(layer, *options.response, /*naive=*/false);
    }
    return RunLayerResponse(layer, *options.response);
  }
  if (mode_ == PerturbMode::kCache) return RunLayerCache(layer, options);
  return RunLayerPrefill(layer, options, /*from_embeddings=*/false);
}

StatusOr<std::vector<double>> SampleCalibrator::RunLayerNaive(int layer,
                                                              const TrialOptions& options) const {
  RETURN_IF_ERROR(CheckArgs(layer, options));
  if (options.response) {
    if (options.response->kv_heads > 0) {
      return RunLayerHeadResponses(layer, *options.response, /*naive=*/true);
    }
    return RunLayerResponseNaive(layer, *options.response);
  }
  if (mode_ == PerturbMode::kCache) return RunLayerCacheNaive(layer, options);
  return RunLayerPrefill(layer, options, /*from_embeddings=*/true);
}

StatusOr<double> SampleCalibrator::MeanKl(const Tensor& logits, int64_t first_row) const {
  const int64_t w = probe_len();
  const int64_t vocab = clean_logits_.dim(1);
  std::vector<float> kl(w);
  RETURN_IF_ERROR(kernels::KlDivergenceRows(
      model_->op_context(), clean_logits_.view(),
      ConstTensorView(logits.view().data + first_row * vocab, {w, vocab}, logits.device()), kl));
  double sum = 0.0;
  for (float v : kl) sum += v;
  return sum / static_cast<double>(w);
}

StatusOr<std::vector<double>> SampleCalibrator::RunLayerCache(int layer,
                                                              const TrialOptions& options) const {
  const ModelConfig& cfg = model_->config();
  const kernels::OpContext& ctx = model_->op_context();
  const int c = context_len();
  const int hkv = cfg.n_kv_heads, hd = cfg.head_dim;
  const int cap = cache_->capacity();
  kernels::Allocator& memory = model_->allocator();
  const kernels::Device device = ctx.device;
  // Noise is keyed by the model's KV-head index, so a tensor-parallel shard draws what the whole
  // model would for the heads it holds.
  const int first_kv_head = model_->model().shard.first_kv_head;

  // Each trial's perturbed copy of layer `layer`'s context values: [n_kv_heads, cap, head_dim]
  // (only the first C entries per head are used). One layer per trial, never a full cache.
  const KvCacheView clean = cache_->View(layer);
  const ConstTensorView clean_values{clean.v, {static_cast<int64_t>(hkv) * cap, hd}, device};
  std::vector<Tensor> perturbed;
  std::vector<KvCacheView> contexts;
  for (int t = 0; t < options.trials; ++t) {
    perturbed.emplace_back(kernels::Shape{static_cast<int64_t>(hkv) * cap, hd},
                           kernels::DType::kF32, memory);
    for (int h = 0; h < hkv; ++h) {
      const TensorView head{
          perturbed[t].view().data + static_cast<int64_t>(h) * cap * hd, {c, hd}, device};
      RETURN_IF_ERROR(kernels::CopyRows(ctx, clean_values, static_cast<int64_t>(h) * cap, head));
      // The head's cached positions, where the cache keeps them.
      const kernels::Int32View positions(clean.positions + static_cast<int64_t>(h) * cap, c,
                                         device);
      RETURN_IF_ERROR(kernels::AddNormAdaptiveNoise(ctx, {options.seed, sample_index_, layer, t},
                                                    positions, first_kv_head + h, options.alpha,
                                                    head));
    }
    KvCacheView context = clean;
    context.length = c;  // the clean cache also holds the clean probe entries after C
    context.v = perturbed[t].view().data;
    contexts.push_back(context);
  }
  return ResumeProbe(layer, contexts);
}

StatusOr<std::vector<std::vector<int32_t>>> SampleCalibrator::Selection(
    int layer, const ResponseTrials& response, int budget) const {
  return SelectTokens(response.selector, stats_[layer], budget, response.selection);
}

StatusOr<std::vector<double>> SampleCalibrator::RunLayerResponse(
    int layer, const ResponseTrials& response) const {
  const ModelConfig& cfg = model_->config();
  const kernels::OpContext& ctx = model_->op_context();
  const int c = context_len();
  const int hkv = cfg.n_kv_heads, hd = cfg.head_dim;
  const int cap = cache_->capacity();
  kernels::Allocator& memory = model_->allocator();
  const kernels::Device device = ctx.device;
  const KvCacheView clean = cache_->View(layer);
  const ConstTensorView clean_k{clean.k, {static_cast<int64_t>(hkv) * cap, hd}, device};
  const ConstTensorView clean_v{clean.v, {static_cast<int64_t>(hkv) * cap, hd}, device};

  // Each compressed trial's copy of the kept entries: [n_kv_heads, b, head_dim] keys and values
  // and [n_kv_heads, b] positions. Entry i of the clean prefill holds position i.
  std::vector<Tensor> keys, values, positions;
  std::vector<KvCacheView> contexts;
  std::vector<size_t> compressed;  // the trials that keep fewer than C entries
  for (size_t t = 0; t < response.budgets.size(); ++t) {
    const int b = response.budgets[t];
    if (b >= c) continue;  // the clean cache: KL 0 by definition
    ASSIGN_OR_RETURN(std::vector<std::vector<int32_t>> keep, Selection(layer, response, b));
    std::vector<int32_t> rows, kept_positions;
    for (int h = 0; h < hkv; ++h) {
      for (int32_t i : keep[h]) {
        rows.push_back(h * cap + i);
        kept_positions.push_back(i);
      }
    }
    const Tensor device_rows = kernels::Int32Tensor(rows, memory);
    const int64_t n_rows = static_cast<int64_t>(rows.size());
    keys.emplace_back(kernels::Shape{n_rows, hd}, kernels::DType::kF32, memory);
    values.emplace_back(kernels::Shape{n_rows, hd}, kernels::DType::kF32, memory);
    positions.push_back(kernels::Int32Tensor(kept_positions, memory));
    RETURN_IF_ERROR(
        kernels::GatherRows(ctx, clean_k, device_rows.int32_view(), keys.back().view()));
    RETURN_IF_ERROR(
        kernels::GatherRows(ctx, clean_v, device_rows.int32_view(), values.back().view()));
    contexts.push_back({keys.back().view().data, values.back().view().data,
                        positions.back().int32_view().ptr, hkv, b, b, hd, device});
    compressed.push_back(t);
  }
  std::vector<double> kl(response.budgets.size(), 0.0);
  if (contexts.empty()) return kl;
  ASSIGN_OR_RETURN(std::vector<double> measured, ResumeProbe(layer, contexts));
  for (size_t i = 0; i < compressed.size(); ++i) kl[compressed[i]] = measured[i];
  return kl;
}

StatusOr<SampleCalibrator::MaskedLayer> SampleCalibrator::MaskLayer(
    int layer, std::span<const std::vector<int32_t>> keep) const {
  const ModelConfig& cfg = model_->config();
  const kernels::OpContext& ctx = model_->op_context();
  const int c = context_len();
  const int hkv = cfg.n_kv_heads, hd = cfg.head_dim;
  const int cap = cache_->capacity();
  kernels::Allocator& memory = model_->allocator();
  const kernels::Device device = ctx.device;
  size_t n = 0;
  for (const std::vector<int32_t>& k : keep) n = std::max(n, k.size());
  // Head h's rows: its kept entries, then the first dropped ones up to n. Entry i of the clean
  // prefill holds position i.
  std::vector<int32_t> rows, positions;
  rows.reserve(static_cast<size_t>(hkv) * n);
  positions.reserve(rows.capacity());
  std::vector<bool> kept(c);
  for (int h = 0; h < hkv; ++h) {
    std::fill(kept.begin(), kept.end(), false);
    for (int32_t i : keep[h]) {
      rows.push_back(h * cap + i);
      positions.push_back(i);
      kept[i] = true;
    }
    for (int32_t i = 0; positions.size() < (h + 1) * n; ++i) {
      if (kept[i]) continue;
      rows.push_back(h * cap + i);
      positions.push_back(std::numeric_limits<int32_t>::max());
    }
  }
  const KvCacheView clean = cache_->View(layer);
  const ConstTensorView clean_k{clean.k, {static_cast<int64_t>(hkv) * cap, hd}, device};
  const ConstTensorView clean_v{clean.v, {static_cast<int64_t>(hkv) * cap, hd}, device};
  const Tensor device_rows = kernels::Int32Tensor(rows, memory);
  const int64_t n_rows = static_cast<int64_t>(rows.size());
  MaskedLayer masked{.keys = Tensor({n_rows, hd}, kernels::DType::kF32, memory),
                     .values = Tensor({n_rows, hd}, kernels::DType::kF32, memory),
                     .positions = kernels::Int32Tensor(positions, memory)};
  RETURN_IF_ERROR(kernels::GatherRows(ctx, clean_k, device_rows.int32_view(), masked.keys.view()));
  RETURN_IF_ERROR(
      kernels::GatherRows(ctx, clean_v, device_rows.int32_view(), masked.values.view()));
  const int length = static_cast<int>(n);
  masked.view = {masked.keys.view().data,
                 masked.values.view().data,
                 masked.positions.int32_view().ptr,
                 hkv,
                 length,
                 length,
                 hd,
                 device};
  return masked;
}

StatusOr<std::vector<double>> SampleCalibrator::RunHeadResponse(
    int layer, int kv_head, const ResponseTrials& response) const {
  const int trials = static_cast<int>(response.budgets.size());
  RETURN_IF_ERROR(CheckArgs(layer, {.trials = trials, .response = response}));
  const int hkv = model_->config().n_kv_heads;
  if (kv_head < 0 || kv_head >= hkv) {
    return absl::InvalidArgumentError(absl::StrCat("KV head ", kv_head, " outside [0, ", hkv, ")"));
  }
  const int c = context_len();
  // Every head but kv_head keeps the whole context.
  std::vector<std::vector<int32_t>> keep(hkv, Iota(c));
  std::vector<MaskedLayer> masked;
  std::vector<KvCacheView> contexts;
  std::vector<size_t> compressed;  // the trials that keep fewer than C entries
  masked.reserve(response.budgets.size());
  for (size_t t = 0; t < response.budgets.size(); ++t) {
    const int b = response.budgets[t];
    if (b >= c) continue;  // the clean cache: KL 0 by definition
    ASSIGN_OR_RETURN(std::vector<std::vector<int32_t>> selected, Selection(layer, response, b));
    keep[kv_head] = std::move(selected[kv_head]);
    ASSIGN_OR_RETURN(MaskedLayer m, MaskLayer(layer, keep));
    masked.push_back(std::move(m));
    contexts.push_back(masked.back().view);
    compressed.push_back(t);
  }
  std::vector<double> kl(response.budgets.size(), 0.0);
  if (contexts.empty()) return kl;
  ASSIGN_OR_RETURN(std::vector<double> measured, ResumeProbe(layer, contexts));
  for (size_t i = 0; i < compressed.size(); ++i) kl[compressed[i]] = measured[i];
  return kl;
}

StatusOr<std::vector<double>> SampleCalibrator::RunLayerHeadResponses(
    int layer, const ResponseTrials& response, bool naive) const {
  ResponseTrials per_head = response;
  per_head.kv_heads = 0;  // RunHeadResponse's grid: one trial per budget
  const int hkv = model_->config().n_kv_heads, c = context_len();
  std::vector<double> kl;
  kl.reserve(static_cast<size_t>(hkv) * response.budgets.size());
  for (int h = 0; h < hkv; ++h) {
    if (!naive) {
      ASSIGN_OR_RETURN(std::vector<double> head, RunHeadResponse(layer, h, per_head));
      kl.insert(kl.end(), head.begin(), head.end());
      continue;
    }
    // One joint map per trial: every head and layer whole but head h of `layer`.
    std::vector<std::vector<int>> budgets(model_->config().n_layers, std::vector<int>(hkv, c));
    for (int b : response.budgets) {
      budgets[layer][h] = b;
      ASSIGN_OR_RETURN(double value, RunHeadMap(budgets, per_head));
      kl.push_back(value);
    }
  }
  return kl;
}

StatusOr<double> SampleCalibrator::RunHeadMap(std::span<const std::vector<int>> budgets,
                                              const ResponseTrials& response) const {
  const int n_layers = model_->config().n_layers, hkv = model_->config().n_kv_heads;
  if (static_cast<int>(budgets.size()) != n_layers) {
    return absl::InvalidArgumentError(absl::StrCat("a per-head budget map of ", budgets.size(),
                                                   " layers for a model of ", n_layers));
  }
  for (int l = 0; l < n_layers; ++l) {
    if (static_cast<int>(budgets[l].size()) != hkv) {
      return absl::InvalidArgumentError(absl::StrCat("layer ", l, " of a per-head budget map has ",
                                                     budgets[l].size(), " budgets for ", hkv,
                                                     " KV heads"));
    }
    for (int h = 0; h < hkv; ++h) {
      if (budgets[l][h] < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("layer ", l, " KV head ", h, ": negative budget ", budgets[l][h]));
      }
    }
  }
  // The selector and its statistics are checked; the grid is not read.
  ResponseTrials selector = response;
  selector.budgets = {context_len()};
  RETURN_IF_ERROR(CheckArgs(0, {.trials = 1, .response = selector}));

  const int c = context_len();
  std::vector<std::optional<MaskedLayer>> masked(n_layers);
  int first = n_layers;
  for (int l = 0; l < n_layers; ++l) {
    if (*std::min_element(budgets[l].begin(), budgets[l].end()) >= c) continue;
    std::vector<std::vector<int32_t>> keep(hkv);
    // One selection per distinct budget of the layer, each head taking its own row.
    std::vector<int> distinct(budgets[l].begin(), budgets[l].end());
    std::sort(distinct.begin(), distinct.end());
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    for (int b : distinct) {
      if (b >= c) {
        for (int h = 0; h < hkv; ++h) {
          if (budgets[l][h] == b) keep[h] = Iota(c);
        }
        continue;
      }
      ASSIGN_OR_RETURN(std::vector<std::vector<int32_t>> selected, Selection(l, response, b));
      for (int h = 0; h < hkv; ++h) {
        if (budgets[l][h] == b) keep[h] = std::move(selected[h]);
      }
    }
    ASSIGN_OR_RETURN(MaskedLayer m, MaskLayer(l, keep));
    masked[l] = std::move(m);
    first = std::min(first, l);
  }
  if (first == n_layers) return 0.0;
  ASSIGN_OR_RETURN(std::vector<double> kl,
                   ResumeProbe(first, 1, [&](int /*trial*/, int j) -> const KvCacheView* {
                     return masked[j] ? &masked[j]->view : nullptr;
                   }));
  return kl[0];
}

StatusOr<std::vector<double>> SampleCalibrator::ResumeProbe(
    int layer, std::span<const KvCacheView> layer_context) const {
  return ResumeProbe(layer, static_cast<int>(layer_context.size()),
                     [&](int t, int j) { return j == layer ? &layer_context[t] : nullptr; });
}

StatusOr<std::vector<double>> SampleCalibrator::ResumeProbe(int first_layer, int t_count,
                                                            TrialContext trial_context) const {
  const ModelConfig& cfg = model_->config();
  const kernels::OpContext& ctx = model_->op_context();
  const int c = context_len(), w = probe_len();
  const int hkv = cfg.n_kv_heads, hd = cfg.head_dim, hq = cfg.n_heads;
  const int64_t d = cfg.d_model;
  kernels::Allocator& memory = model_->allocator();
  const kernels::Device device = ctx.device;

  // Every trial starts from the recorded clean input of `first_layer` at the probe rows.
  Tensor x({static_cast<int64_t>(t_count) * w, d}, kernels::DType::kF32, memory);
  std::vector<int32_t> positions(static_cast<size_t>(t_count) * w);
  std::vector<int32_t> probe_rows(positions.size());  // 0..W-1 for every trial
  for (int t = 0; t < t_count; ++t) {
    std::iota(positions.begin() + static_cast<int64_t>(t) * w,
              positions.begin() + static_cast<int64_t>(t + 1) * w, c);
    std::iota(probe_rows.begin() + static_cast<int64_t>(t) * w,
              probe_rows.begin() + static_cast<int64_t>(t + 1) * w, 0);
  }
  const Tensor device_positions = kernels::Int32Tensor(positions, memory);
  // Trial t's positions, on the device.
  auto trial_positions = [&](int t) {
    return kernels::Int32View(device_positions.int32_view().ptr + static_cast<int64_t>(t) * w, w,
                              device);
  };
  RETURN_IF_ERROR(kernels::GatherRows(ctx, layer_inputs_[first_layer].view(),
                                      kernels::Int32Tensor(probe_rows, memory).int32_view(),
                                      x.view()));

  // Each trial's own probe keys/values per layer: [n_kv_heads, W, head_dim], positions C..C+W-1.
  const int64_t probe_floats = static_cast<int64_t>(hkv) * w * hd;
  Tensor probe_k({t_count * probe_floats}, kernels::DType::kF32, memory);
  Tensor probe_v({t_count * probe_floats}, kernels::DType::kF32, memory);
  // C..C+W-1 per head (written by KvAppend).
  Tensor probe_pos({static_cast<int64_t>(hkv) * w}, kernels::DType::kI32, memory);
  int32_t* probe_pos_data = probe_pos.int32_data();
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));

  auto attend = [&](int j, const TensorView& q3, Tensor& k, Tensor& v,
                    std::span<const int32_t> /*pos*/, const TensorView& out) -> Status {
    const int64_t row = static_cast<int64_t>(hkv) * hd;
    for (int t = 0; t < t_count; ++t) {
      float* pk = probe_k.view().data + t * probe_floats;
      float* pv = probe_v.view().data + t * probe_floats;
      // This trial's probe rows as a one-segment cache of W entries per head.
      const int64_t first = static_cast<int64_t>(t) * w * row;
      RETURN_IF_ERROR(kernels::KvAppend(
          ctx, {k.view().data + first, {w, row}, device}, {v.view().data + first, {w, row}, device},
          trial_positions(t), {pk, pv, probe_pos_data, hkv, w, 0, hd, device}));
      KvCacheView context = cache_->View(j);
      context.length = c;  // the clean cache also holds the clean probe entries after C
      if (const KvCacheView* other = trial_context(t, j)) context = *other;
      const KvCacheView segments[] = {context, {pk, pv, probe_pos_data, hkv, w, w, hd, device}};
      const int64_t q_off = static_cast<int64_t>(t) * w * hq * hd;
      RETURN_IF_ERROR(kernels::CausalAttention(
          ctx, TensorView{q3.data + q_off, {w, hq, hd}, device}, trial_positions(t), segments,
          scale, TensorView{out.data + q_off, {w, hq, hd}, device}));
    }
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(model_->RunLayers(x, {.first = first_layer, .positions = positions}, attend));
  ASSIGN_OR_RETURN(Tensor logits, model_->Logits(x));
  std::vector<double> kl(t_count);
  for (int t = 0; t < t_count; ++t) {
    ASSIGN_OR_RETURN(kl[t], MeanKl(logits, static_cast<int64_t>(t) * w));
  }
  return kl;
}

StatusOr<std::vector<double>> SampleCalibrator::RunLayerPrefill(int layer,
                                                                const TrialOptions& options,
                                                                bool from_embeddings) const {
  const ModelConfig& cfg = model_->config();
  const kernels::OpContext& ctx = model_->op_context();
  const int c = context_len(), w = probe_len();
  KvCache cache = model_->NewCache(c + w);
  const Tensor positions = kernels::Int32Tensor(positions_, model_->allocator());
  std::vector<double> kl(options.trials);
  for (int t = 0; t < options.trials; ++t) {
    cache.Clear();
    Tensor x;
    if (from_embeddings) {
      ASSIGN_OR_RETURN(x, model_->Embed(tokens_));
    } else {
      x = layer_inputs_[layer].Clone();
    }
    const NoiseKey key{options.seed, sample_index_, layer, t};
    auto attend = [&](int j, const TensorView& q3, Tensor& k, Tensor& v,
                      std::span<const int32_t> pos, const TensorView& out) -> Status {
      if (j == layer) {
        RETURN_IF_ERROR(kernels::AddNormAdaptiveNoiseToRows(ctx, key, positions.int32_view(),
                                                            cfg.n_kv_heads, options.alpha, v.view(),
                                                            model_->model().shard.first_kv_head));
      }
      return model_->AttendCached(j, q3, k, v, pos, out, cache);
    };
    RETURN_IF_ERROR(model_->RunLayers(
        x, {.first = from_embeddings ? 0 : layer, .positions = positions_}, attend));
    Tensor rows({w, cfg.d_model}, kernels::DType::kF32, model_->allocator());
    RETURN_IF_ERROR(kernels::CopyRows(ctx, x.view(), c, rows.view()));
    ASSIGN_OR_RETURN(Tensor logits, model_->Logits(rows));
    ASSIGN_OR_RETURN(kl[t], MeanKl(logits, 0));
  }
  return kl;
}

StatusOr<std::vector<double>> SampleCalibrator::RunLayerCacheNaive(
    int layer, const TrialOptions& options) const {
  const ModelConfig& cfg = model_->config();
  const int c = context_len(), w = probe_len();
  std::vector<double> kl(options.trials);
  for (int t = 0; t < options.trials; ++t) {
    KvCache cache = model_->NewCache(c + w);
    ASSIGN_OR_RETURN(ForwardResult pre,
                     model_->Forward({.tokens = context_, .logits = LogitRows::kNone}, cache));
    const KvCacheView view = cache.View(layer);
    for (int h = 0; h < cfg.n_kv_heads; ++h) {
      const kernels::Int32View positions(view.positions + static_cast<int64_t>(h) * view.capacity,
                                         c, view.device);
      RETURN_IF_ERROR(kernels::AddNormAdaptiveNoise(
          model_->op_context(), {options.seed, sample_index_, layer, t}, positions,
          model_->model().shard.first_kv_head + h, options.alpha, cache.Values(layer, h, c)));
    }
    ASSIGN_OR_RETURN(ForwardResult out,
                     model_->Forward({.tokens = probe_, .logits = LogitRows::kAll}, cache));
    ASSIGN_OR_RETURN(kl[t], MeanKl(out.logits, 0));
  }
  return kl;
}

StatusOr<std::vector<double>> SampleCalibrator::RunLayerResponseNaive(
    int layer, const ResponseTrials& response) const {
  const int c = context_len();
  std::vector<double> kl(response.budgets.size(), 0.0);
  for (size_t t = 0; t < response.budgets.size(); ++t) {
    if (response.budgets[t] >= c) continue;
    // Layer `layer` alone compressed, every other layer whole.
    std::vector<int> budgets(model_->config().n_layers, c);
    budgets[layer] = response.budgets[t];
    ASSIGN_OR_RETURN(kl[t], CompressedProbeKl(budgets, response));
  }
  return kl;
}

StatusOr<double> SampleCalibrator::RunCompressedMap(std::span<const int> budgets,
                                                    const ResponseTrials& response) const {
  if (static_cast<int>(budgets.size()) != model_->config().n_layers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a budget map of ", budgets.size(), " layers for a model of ", model_->config().n_layers));
  }
  const int trials = static_cast<int>(response.budgets.size());
  RETURN_IF_ERROR(CheckArgs(0, {.trials = trials, .response = response}));
  return CompressedProbeKl(budgets, response);
}

StatusOr<double> SampleCalibrator::CompressedProbeKl(std::span<const int> budgets,
                                                     const ResponseTrials& response) const {
  const int c = context_len(), w = probe_len();
  // A fresh observed prefill, the layers compressed in place, the whole probe pass.
  KvCache cache = model_->NewCache(c + w);
  ASSIGN_OR_RETURN(ObservedPrefill pre, PrefillObserved(*model_, context_, *observed_, cache));
  for (size_t l = 0; l < budgets.size(); ++l) {
    if (budgets[l] >= c) continue;
    ASSIGN_OR_RETURN(
        std::vector<std::vector<int32_t>> keep,
        SelectTokens(response.selector, pre.layers[l], budgets[l], response.selection));
    RETURN_IF_ERROR(cache.Retain(static_cast<int>(l), keep));
  }
  const std::span<const int32_t> probe_positions(positions_.data() + c, w);
  ASSIGN_OR_RETURN(
      ForwardResult out,
      model_->Forward({.tokens = probe_, .positions = probe_positions, .logits = LogitRows::kAll},
                      cache));
  return MeanKl(out.logits, 0);
}

}  // namespace ripplekv::worker
