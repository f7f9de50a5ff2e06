#include "worker/engine/kv_cache.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"

namespace ripplekv::worker {

namespace {

// KvRetain's index checks and its compaction of the positions, for the host copy of a device
// cache's positions ([n_kv_heads, capacity]). InvalidArgument naming the head and entry (nothing
// changed).
Status CompactHostPositions(std::span<const int32_t> keep, int count, int length, int n_kv_heads,
                            int capacity, int32_t* positions) {
  for (int h = 0; h < n_kv_heads; ++h) {
    for (int j = 0; j < count; ++j) {
      const int32_t i = keep[static_cast<size_t>(h) * count + j];
      const int32_t previous = j == 0 ? -1 : keep[static_cast<size_t>(h) * count + j - 1];
      if (i < 0 || i >= length || i <= previous) {
        return absl::InvalidArgumentError(absl::StrCat(
            "head ", h, " entry ", j, ": index ", i, " is not increasing in [0, ", length, ")"));
      }
    }
  }
  for (int h = 0; h < n_kv_heads; ++h) {
    int32_t* head = positions + static_cast<size_t>(h) * capacity;
    for (int j = 0; j < count; ++j) head[j] = head[keep[static_cast<size_t>(h) * count + j]];
  }
  return absl::OkStatus();
}

}  // namespace

KvCache::KvCache(const ModelConfig& config, int capacity, const kernels::DeviceSession* device)
    : ctx_(device != nullptr ? device->context() : kernels::OpContext()),
      allocator_(device != nullptr ? &device->allocator() : &kernels::HostAllocator()),
      n_layers_(config.n_layers),
      n_kv_heads_(config.n_kv_heads),
      head_dim_(config.head_dim),
      capacity_(capacity),
      layers_(config.n_layers) {
  const int64_t heads = n_kv_heads_, cap = capacity_, d = head_dim_;
  for (Layer& layer : layers_) {
    layer.k = kernels::Tensor({heads, cap, d}, kernels::DType::kF32, *allocator_);
    layer.v = kernels::Tensor({heads, cap, d}, kernels::DType::kF32, *allocator_);
    layer.positions = kernels::Tensor({heads, cap}, kernels::DType::kI32, *allocator_);
    if (ctx_.device != kernels::Device::kCpu) {
      layer.host_positions = kernels::Tensor({heads, cap}, kernels::DType::kI32);
    }
  }
}

int32_t* KvCache::HostPositions(int layer) {
  Layer& ly = layers_[layer];
  return ly.host_positions.empty() ? ly.positions.host_data<int32_t>()
                                   : ly.host_positions.host_data<int32_t>();
}

const int32_t* KvCache::HostPositions(int layer) const {
  const Layer& ly = layers_[layer];
  return ly.host_positions.empty() ? ly.positions.host_data<int32_t>()
                                   : ly.host_positions.host_data<int32_t>();
}



void KvCache::Clear() {
  for (Layer& layer : layers_) layer.length = 0;
}

kernels::KvLayerRef KvCache::Ref(int layer) {
  Layer& ly = layers_[layer];
  return {ly.k.view().data, ly.v.view().data, ly.positions.int32_data(),
          n_kv_heads_, capacity_, ly.length, head_dim_, ctx_.device};
}

Status KvCache::Append(int layer, std::span<const float> k_rows, std::span<const float> v_rows,
                       std::span<const int32_t> positions) {
  const int64_t n = static_cast<int64_t>(positions.size());
  const int64_t row = static_cast<int64_t>(n_kv_heads_) * head_dim_;
  if (static_cast<int64_t>(k_rows.size()) != n * row ||
      static_cast<int64_t>(v_rows.size()) != n * row) {
    return absl::InvalidArgumentError(absl::StrCat("KvCache::Append: layer ", layer, ": ", n,
                                                   " positions but ", k_rows.size() / row,
                                                   " key rows and ", v_rows.size() / row, " value rows"));
  }
  return Append(layer, kernels::ConstTensorView(k_rows.data(), {n, row}),
                kernels::ConstTensorView(v_rows.data(), {n, row}), positions);
}

Status KvCache::Append(int layer, const kernels::ConstTensorView& k_rows,
                       const kernels::ConstTensorView& v_rows, std::span<const int32_t> positions) {
  Layer& ly = layers_[layer];
  const int64_t n = static_cast<int64_t>(positions.size());
  int32_t last = ly.length > 0 ? Position(layer, 0, ly.length - 1) : -1;
  for (int64_t i = 0; i < n; ++i) {
    if (positions[i] <= last) {
      return absl::InvalidArgumentError(absl::StrCat("KvCache::Append: layer ", layer,
                                                     ": position ", positions[i], " after ", last,
                                                     " (positions must increase)"));
    }
    last = positions[i];
  }
  const kernels::Tensor device_positions = kernels::Int32Tensor(positions, *allocator_);
  const Status appended =
      kernels::KvAppend(ctx_, k_rows, v_rows, device_positions.int32_view(), Ref(layer));
  if (!appended.ok()) {
    return Status(appended.code(), absl::StrCat("layer ", layer, ": ", appended.message()));
  }
  if (!ly.host_positions.empty()) {  // the host copy follows (KvAppend checked the capacity)
    int32_t* host = HostPositions(layer);
    for (int h = 0; h < n_kv_heads_; ++h) {
      std::copy(positions.begin(), positions.end(),
                host + static_cast<size_t>(h) * capacity_ + ly.length);
    }
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
kernels::TensorView KvCache::Values(int layer, int head, int count) {
  return {layers_[layer].v.view().data + Offset(head, 0), {count, head_dim_}, ctx_.device};
}

int32_t KvCache::Position(int layer, int head, int i) const {
  return HostPositions(layer)[static_cast<size_t>(head) * capacity_ + i];
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
  Status retained;
  if (ly.host_positions.empty()) {
    retained = kernels::KvRetain(ctx_, flat, static_cast<int>(count), Ref(layer));
  } else {
    // A device's KvRetain trusts its indices: check them here, compact the host positions the
    // same way, then move the device entries.
    retained = CompactHostPositions(flat, static_cast<int>(count), ly.length, n_kv_heads_,
                                    capacity_, HostPositions(layer));
    if (retained.ok()) {
      const kernels::Tensor device_keep = kernels::Int32Tensor(flat, *allocator_);
      retained =
          kernels::KvRetain(ctx_, device_keep.int32_view(), static_cast<int>(count), Ref(layer));
    }
  }
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
      const int32_t* pos = HostPositions(static_cast<int>(&ly - layers_.data())) +
                           static_cast<size_t>(h) * capacity_;
      keep = std::min<int>(keep, std::lower_bound(pos, pos + ly.length, position) - pos);
    }
    ly.length = keep;
  }
}

kernels::KvCacheView KvCache::View(int layer) const {
  const Layer& ly = layers_[layer];
  return {ly.k.view().data, ly.v.view().data, ly.positions.int32_view().ptr, n_kv_heads_,
          capacity_,         ly.length,         head_dim_,                   ctx_.device};
}

}  // namespace ripplekv::worker
