// libFuzzer target for the safetensors reader: any byte string must give a Status or a valid
// file whose tensors all load (small ones) without a crash or a sanitizer report.

#include <cstddef>
#include <cstdint>
#include <span>

#include "worker/model/safetensors_reader.h"

namespace {
constexpr int64_t kMaxLoadElements = int64_t{1} << 16;  // keeps each run fast
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = ripplekv::worker::SafetensorsFile::FromBuffer(std::span<const uint8_t>(data, size),
                                                            "fuzz.safetensors");
  if (!file.ok()) return 0;
  for (const auto& info : (*file)->tensors()) {
    int64_t n = 1;
    for (int64_t d : info.shape) n *= d;
    if (n > kMaxLoadElements) continue;
    auto t = (*file)->LoadTensor(info);
    (void)t;
  }
  return 0;
}
