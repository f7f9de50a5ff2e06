#include "worker/tokenizer/spm_encoder.h"

#include <algorithm>
#include <string>

#include "worker/tokenizer/utf8.h"

namespace ripplekv::worker {

namespace {

constexpr std::string_view kSpmSpace = "\xE2\x96\x81";  // U+2581

struct Symbol {
  size_t offset;  // bytes [offset, offset + size) of the escaped text
  size_t size;    // 0 once merged into the left neighbour
  int32_t prev;
  int32_t next;
};

struct Bigram {
  float score;
  int32_t left;
  int32_t right;
  size_t size;  // bytes of the pair when queued: a different size means the entry is stale
};

// Heap order: highest score first, then leftmost (llama.cpp's llm_bigram_spm::comparator).
bool LowerPriority(const Bigram& a, const Bigram& b) {
  return a.score < b.score || (a.score == b.score && a.left > b.left);
}

}  // namespace

void SpmEncoder::Encode(std::string_view text, bool after_special,
                        std::vector<int32_t>* out) const {
  std::string escaped;
  escaped.reserve(text.size() + 8);
  if (add_space_prefix_ && after_special) escaped.append(kSpmSpace);
  for (char c : text) {
    if (c == ' ') {
      escaped.append(kSpmSpace);
    } else {
      escaped.push_back(c);
    }
  }
  const std::string_view s = escaped;

  std::vector<Symbol> symbols;
  for (size_t offset = 0; offset < s.size();) {
    const size_t size =
        std::min(Utf8SequenceLength(static_cast<uint8_t>(s[offset])), s.size() - offset);
    const int32_t index = static_cast<int32_t>(symbols.size());
    symbols.push_back({offset, size, index - 1, offset + size == s.size() ? -1 : index + 1});
    offset += size;
  }

  std::vector<Bigram> heap;
  auto add_bigram = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const size_t size = symbols[left].size + symbols[right].size;
    const int32_t id = vocab_->Find(s.substr(symbols[left].offset, size));
    if (id < 0) return;
    heap.push_back({vocab_->score(id), left, right, size});
    std::push_heap(heap.begin(), heap.end(), LowerPriority);
  };
  for (int32_t i = 1; i < static_cast<int32_t>(symbols.size()); ++i) add_bigram(i - 1, i);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), LowerPriority);
    const Bigram b = heap.back();
    heap.pop_back();
    Symbol& left = symbols[b.left];
    Symbol& right = symbols[b.right];
    if (left.size == 0 || right.size == 0 || left.size + right.size != b.size) continue;
    left.size += right.size;
    right.size = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = b.left;
    add_bigram(left.prev, b.left);
    add_bigram(b.left, left.next);
  }

  for (int32_t i = symbols.empty() ? -1 : 0; i >= 0; i = symbols[i].next) {
    const std::string_view piece = s.substr(symbols[i].offset, symbols[i].size);
    const int32_t id = vocab_->Find(piece);
    if (id >= 0) {
      out->push_back(id);
      continue;
    }
    // Merged symbols are always tokens, so only a single character ends up here.
    for (char c : piece) {
      const int32_t byte_id = vocab_->ByteToken(static_cast<uint8_t>(c));
      if (byte_id >= 0) {
        out->push_back(byte_id);
      } else if (unk_id_ >= 0) {
        out->push_back(unk_id_);
      }
    }
  }
}

}  // namespace ripplekv::worker
