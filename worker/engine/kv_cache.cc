#include "worker/engine/kv_cache.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace ripplekv::worker {

KvCache::KvCache(const ModelConfig& config, int capacity)
    : n_layers_(config.n_layers),
      n_kv_heads_(config.n_kv_heads),
      head_dim_(config.head_dim),
      capacity_(capacity),
      layers_(config.n_layers) {
  const size_t per_layer = static_cast<size_t>(n_kv_heads_) * capacity_ * head_dim_;
  for (Layer& layer : layers_) {
    layer.k.assign(per_layer, 0.0f);
    layer.v.assign(per_layer, 0.0f);
    layer.positions.assign(static_cast<size_t>(n_kv_heads_) * capacity_, 0);
  }
}

void KvCache::Clear() {
  for (Layer& layer : layers_) layer.length = 0;
}

Status KvCache::Append(int layer, std::span<const float> k_rows, std::span<const float> v_rows,
                       std::span<const int32_t> positions) {
  Layer& ly = layers_[layer];
  const int n = static_cast<int>(positions.size());
  const size_t row = static_cast<size_t>(n_kv_heads_) * head_dim_;
  if (k_rows.size() != n * row || v_rows.size() != n * row) {
    return absl::InvalidArgumentError(absl::StrCat("KvCache::Append: layer ", layer, ": ", n,
                                                   " positions but ", k_rows.size() / row,
                                                   " key rows and ", v_rows.size() / row, " value rows"));
  }
  if (ly.length + n > capacity_) {
    return absl::ResourceExhaustedError(absl::StrCat("KV cache full: layer ", layer, " holds ",
                                                     ly.length, " of ", capacity_, " tokens, ", n,
                                                     " more requested"));
  }
  int32_t last = ly.length > 0 ? ly.positions[ly.length - 1] : -1;
  for (int i = 0; i < n; ++i) {
    if (positions[i] <= last) {
      return absl::InvalidArgumentError(absl::StrCat("KvCache::Append: layer ", layer,
                                                     ": position ", positions[i], " after ", last,
                                                     " (positions must increase)"));
    }
    last = positions[i];
  }
  for (int h = 0; h < n_kv_heads_; ++h) {
    for (int i = 0; i < n; ++i) {
      const size_t src = i * row + static_cast<size_t>(h) * head_dim_;
      const size_t dst = Offset(h, ly.length + i);
      std::memcpy(&ly.k[dst], &k_rows[src], head_dim_ * sizeof(float));
      std::memcpy(&ly.v[dst], &v_rows[src], head_dim_ * sizeof(float));
      ly.positions[static_cast<size_t>(h) * capacity_ + ly.length + i] = positions[i];
    }
  }
  ly.length += n;
  return absl::OkStatus();
}

std::span<float> KvCache::Key(int layer, int head, int i) {
  return {&layers_[layer].k[Offset(head, i)], static_cast<size_t>(head_dim_)};
}
std::span<float> KvCache::Value(int layer, int head, int i) {
  return {&layers_[layer].v[Offset(head, i)], static_cast<size_t>(head_dim_)};
}
std::span<const float> KvCache::Key(int layer, int head, int i) const {
  return {&layers_[layer].k[Offset(head, i)], static_cast<size_t>(head_dim_)};
}
std::span<const float> KvCache::Value(int layer, int head, int i) const {
  return {&layers_[layer].v[Offset(head, i)], static_cast<size_t>(head_dim_)};
}
int32_t KvCache::Position(int layer, int head, int i) const {
  return layers_[layer].positions[static_cast<size_t>(head) * capacity_ + i];
}

Status KvCache::Retain(int layer, std::span<const std::vector<int32_t>> keep) {
  Layer& ly = layers_[layer];
  if (static_cast<int>(keep.size()) != n_kv_heads_) {
    return absl::InvalidArgumentError(absl::StrCat("KvCache::Retain: layer ", layer, ": ",
                                                   keep.size(), " index lists for ", n_kv_heads_,
                                                   " heads"));
  }
  const size_t count = keep[0].size();
  for (int h = 0; h < n_kv_heads_; ++h) {
    if (keep[h].size() != count) {
      return absl::InvalidArgumentError(absl::StrCat("KvCache::Retain: layer ", layer, " head ", h,
                                                     " keeps ", keep[h].size(), ", head 0 keeps ",
                                                     count));
    }
    for (size_t j = 0; j < count; ++j) {
      if (keep[h][j] < 0 || keep[h][j] >= ly.length || (j > 0 && keep[h][j] <= keep[h][j - 1])) {
        return absl::InvalidArgumentError(absl::StrCat(
            "KvCache::Retain: layer ", layer, " head ", h, ": indices must be strictly increasing "
            "in [0, ", ly.length, "), entry ", j, " is ", keep[h][j]));
      }
    }
  }
  for (int h = 0; h < n_kv_heads_; ++h) {
    int32_t* pos = &ly.positions[static_cast<size_t>(h) * capacity_];
    for (size_t j = 0; j < count; ++j) {
      const int src = keep[h][j];  // src >= j, so moving forward never overwrites unread entries
      std::memmove(&ly.k[Offset(h, j)], &ly.k[Offset(h, src)], head_dim_ * sizeof(float));
      std::memmove(&ly.v[Offset(h, j)], &ly.v[Offset(h, src)], head_dim_ * sizeof(float));
      pos[j] = pos[src];
    }
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
      const int32_t* pos = &ly.positions[static_cast<size_t>(h) * capacity_];
      keep = std::min<int>(keep, std::lower_bound(pos, pos + ly.length, position) - pos);
    }
    ly.length = keep;
  }
}

kernels::KvCacheView KvCache::View(int layer) const {
  const Layer& ly = layers_[layer];
  return {ly.k.data(), ly.v.data(), ly.positions.data(), n_kv_heads_, capacity_, ly.length,
          head_dim_};
}

}  // namespace ripplekv::worker
