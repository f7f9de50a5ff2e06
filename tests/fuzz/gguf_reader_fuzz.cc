// libFuzzer target for the GGUF reader and the GGUF model loader: any byte string must give a
// Status or a valid file, never a crash, a sanitizer report or an unbounded allocation.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <variant>

#include "worker/model/gguf_model_loader.h"
#include "worker/model/gguf_reader.h"

namespace {

using ripplekv::worker::GgufArray;
using ripplekv::worker::GgufFile;
using ripplekv::worker::GgufValue;

// Tensors up to this many values are dequantized (keeps each run fast and small).
constexpr int64_t kMaxLoadElements = int64_t{1} << 16;
// Whole models are loaded when all their tensors together stay under this.
constexpr int64_t kMaxModelElements = int64_t{1} << 18;

// Reads every byte of a value so ASan sees any dangling or out-of-range storage.
size_t Touch(const GgufValue& v) {
  size_t sum = static_cast<size_t>(v.type);
  if (const auto* s = std::get_if<std::string>(&v.value)) {
    for (char c : *s) sum += static_cast<unsigned char>(c);
  } else if (const auto* a = std::get_if<std::shared_ptr<GgufArray>>(&v.value)) {
    if (*a != nullptr) {
      sum += static_cast<size_t>((*a)->element_type);
      for (const GgufValue& e : (*a)->elements) sum += Touch(e);
    }
  } else if (const auto* u = std::get_if<uint64_t>(&v.value)) {
    sum += static_cast<size_t>(*u);
  } else if (const auto* i = std::get_if<int64_t>(&v.value)) {
    sum += static_cast<size_t>(*i);
  } else if (const auto* d = std::get_if<double>(&v.value)) {
    sum += static_cast<size_t>(*d == *d);
  } else if (const auto* b = std::get_if<bool>(&v.value)) {
    sum += *b ? 1 : 0;
  }
  return sum;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = GgufFile::FromBuffer(std::span<const uint8_t>(data, size), "fuzz.gguf");
  if (!file.ok()) return 0;
  const GgufFile& f = **file;

  volatile size_t sink = 0;
  for (const auto& [key, value] : f.metadata()) {
    sink = sink + Touch(value);
    // Every typed getter on every key: each either converts or returns a Status.
    sink = sink + f.GetString(key).ok() + f.GetInt(key).ok() + f.GetFloat(key).ok() +
           f.GetBool(key).ok() + f.GetStringArray(key).ok() + f.GetFloatArray(key).ok() +
           f.GetIntArray(key).ok();
  }

  int64_t total_elements = 0;
  for (const auto& info : f.tensors()) {
    std::span<const uint8_t> bytes = f.TensorData(info);
    if (!bytes.empty()) sink = sink + bytes.front() + bytes.back();
    int64_t elements = 1;
    for (int64_t d : info.dims) elements *= d;  // the reader checked this cannot overflow
    // Saturating sum: anything past the cap just means "too big to load as a model".
    total_elements =
        std::min(total_elements + std::min(elements, kMaxModelElements + 1), kMaxModelElements + 1);
    if (elements <= kMaxLoadElements) {
      auto tensor = f.LoadTensor(info);
      if (tensor.ok() && tensor->numel() > 0) sink = sink + (tensor->data()[0] == 0.0f);
    }
  }

  sink = sink + ripplekv::worker::ReadGgufConfig(f).ok();
  if (total_elements <= kMaxModelElements) {
    sink = sink + ripplekv::worker::LoadGgufModel(f).ok();
  }
  (void)sink;
  return 0;
}
