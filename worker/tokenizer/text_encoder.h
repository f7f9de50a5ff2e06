#pragma once
// The algorithm-specific half of a tokenizer: raw text (already free of special tokens) to ids.

#include <cstdint>
#include <string_view>
#include <vector>

namespace ripplekv::worker {

class TextEncoder {
 public:
  virtual ~TextEncoder() = default;

  // Appends the ids of `text` to `out`. `after_special` is true when `text` starts the input or
  // follows a special token (SentencePiece puts its space prefix there). Thread-safe; any bytes.
  virtual void Encode(std::string_view text, bool after_special,
                      std::vector<int32_t>* out) const = 0;
};

}  // namespace ripplekv::worker
