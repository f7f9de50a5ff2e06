#include "worker/engine/kv_cache.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"

namespace ripplekv::worker {

KvCache::KvCache(const ModelConfig& config, int capacity)
    : n_layers_(config.n_layers),
      n_kv_heads_(config.n_kv_heads),
      head_dim_(config.head_dim),
      capacity_(capacity),
      layers_(config.n_layers) {
  const int64_t heads = n_kv_heads_, cap = capacity_, d = head_dim_;
  for (Layer& layer : layers_) {
    layer.k = kernels::Tensor({heads, cap, d});
    layer.v = kernels::Tensor({heads, cap, d});
    layer.positions = kernels::Tensor({heads, cap}, kernels::DType::kI32);
  }
}

void KvCache::Clear() {
  for (Layer& layer : layers_) layer.length = 0;
}

kernels::KvLayerRef KvCache::Ref(int layer) {
  Layer& ly = layers_[layer];
  return {ly.k.data(), ly.v.data(), ly.positions.host_data<int32_t>(), n_kv_heads_, capacity_,
          ly.length, head_dim_, ctx_.device};
}

Status KvCache::Append(int layer, std::span<const float> k_rows, std::span<const float> v_rows,
                       std::span<const int32_t> positions) {
  Layer& ly = layers_[layer];
  const int64_t n = static_cast<int64_t>(positions.size());
  const int64_t row = static_cast<int64_t>(n_kv_heads_) * head_dim_;
  if (static_cast<int64_t>(k_rows.size()) != n * row ||
      static_cast<int64_t>(v_rows.size()) != n * row) {
    return absl::InvalidArgumentError(absl::StrCat("KvCache::Append: layer ", layer, ": ", n,
                                                   " positions but ", k_rows.size() / row,
                                                   " key rows and ", v_rows.size() / row, " value rows"));
  }
  int32_t last = ly.length > 0 ? Position(layer, 0, ly.length - 1) : -1;
  for (int64_t i = 0; i < n; ++i) {
    if (positions[i] <= last) {
      return absl::InvalidArgumentError(absl::StrCat("KvCache::Append: layer ", layer,
                                                     ": position ", positions[i], " after ", last,
                                                     " (positions must increase)"));
    }
    last = positions[i];
  }
  const Status appended =
      kernels::KvAppend(ctx_, {k_rows.data(), {n, row}}, {v_rows.data(), {n, row}}, positions,
                        Ref(layer));
  if (!appended.ok()) {
    return Status(appended.code(), absl::StrCat("layer ", layer, ": ", appended.message()));
  }
  ly.length += static_cast<int>(n);
  return absl::OkStatus();
}

std::span<float> KvCache::Key(int layer, int head, int i) {
  return {layers_[layer].k.data() + Offset(head, i), static_cast<size_t>(head_dim_)};
}
std::span<float> KvCache::Value(int layer, int head, int i) {
  return {layers_[layer].v.data() + Offset(head, i), static_cast<size_t>(head_dim_)};
}
std::span<const float> KvCache::Key(int layer, int head, int i) const {
  return {layers_[layer].k.data() + Offset(head, i), static_cast<size_t>(head_dim_)};
}
std::span<const float> KvCache::Value(int layer, int head, int i) const {
  return {layers_[layer].v.data() + Offset(head, i), static_cast<size_t>(head_dim_)};
}
int32_t KvCache::Position(int layer, int head, int i) const {
  return layers_[layer].positions.host_data<int32_t>()[static_cast<size_t>(head) * capacity_ + i];
}

Status KvCache::Retain(int layer, std::span<const std::vector<int32_t>> keep) {
  Layer& ly = layers_[layer];
  if (static_cast<int>(keep.size()) != n_kv_heads_) {
    return absl::InvalidArgumentError(absl::StrCat("KvCache::Retain: layer ", layer, ": ",
                                                   keep.size(), " index lists for ", n_kv_heads_,
                                                   " heads"));
  }
  const size_t count = keep[0].size();
  std::vector<int32_t> flat;
  flat.reserve(count * keep.size());
  for (int h = 0; h < n_kv_heads_; ++h) {
    if (keep[h].size() != count) {
      return absl::InvalidArgumentError(absl::StrCat("KvCache::Retain: layer ", layer, " head ", h,
                                                     " keeps ", keep[h].size(), ", head 0 keeps ",
                                                     count));
    }
    flat.insert(flat.end(), keep[h].begin(), keep[h].end());
  }
  const Status retained =
      kernels::KvRetain(ctx_, flat, static_cast<int>(count), Ref(layer));
  if (!retained.ok()) {
    return Status(retained.code(), absl::StrCat("KvCache::Retain: layer ", layer, ": ",
                                                retained.message()));
  }
  ly.length = static_cast<int>(count);
  return absl::OkStatus();
}

void KvCache::TruncateFrom(int32_t position) {
  for (Layer& ly : layers_) {
    // All heads share a length; positions are sorted per head, so cutting head 0 at the first
    // entry >= position cuts all heads when they hold the same tokens (the uncompressed case).
    int keep = ly.length;
    for (int h = 0; h < n_kv_heads_; ++h) {
      const int32_t* pos = ly.positions.host_data<int32_t>() + static_cast<size_t>(h) * capacity_;
      keep = std::min<int>(keep, std::lower_bound(pos, pos + ly.length, position) - pos);
    }
    ly.length = keep;
  }
}

kernels::KvCacheView KvCache::View(int layer) const {
  const Layer& ly = layers_[layer];
  return {ly.k.data(), ly.v.data(), ly.positions.host_data<int32_t>(), n_kv_heads_,
          capacity_,   ly.length,   head_dim_,                         ctx_.device};
}

}  // namespace ripplekv::worker
