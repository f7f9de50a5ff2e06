#include "worker/tokenizer/bpe_encoder.h"

#include <algorithm>
#include <string>
#include <utility>

#include "worker/tokenizer/strings.h"
#include "worker/tokenizer/utf8.h"

namespace ripplekv::worker {

using tokenizer_internal::Cat;

namespace {

// One byte of a piece, or several merged ones; a doubly linked list over the piece.
struct Symbol {
  int32_t id;    // token id; -1 for a byte whose character is not in the vocabulary
  int32_t prev;  // index of the previous live symbol, -1 at the start
  int32_t next;  // index of the next live symbol, -1 at the end
  bool dead;     // merged into its left neighbour
};

struct Bigram {
  int32_t rank;
  int32_t left;  // symbol indices
  int32_t right;
  int32_t left_id;  // ids when queued: a changed symbol makes the entry stale
  int32_t right_id;
  int32_t result;
};

// Heap order: lowest rank first, then leftmost (llama.cpp's llm_bigram_bpe::comparator).
bool LowerPriority(const Bigram& a, const Bigram& b) {
  return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
}

}  // namespace

StatusOr<std::unique_ptr<BpeEncoder>> BpeEncoder::Create(const Vocab* vocab,
                                                         const TokenizerSpec& spec) {
  std::vector<std::string> regexes = spec.pre_regexes;
  bool ignore_merges = spec.ignore_merges;
  if (regexes.empty()) {
    ASSIGN_OR_RETURN(PreTokenizerType type, LookupPreTokenizer(spec.pre));
    regexes = std::move(type.regexes);
    ignore_merges |= type.ignore_merges;
  }
  ASSIGN_OR_RETURN(RegexSplitter splitter, RegexSplitter::Create(regexes));
  std::unique_ptr<BpeEncoder> encoder(new BpeEncoder(vocab, std::move(splitter), ignore_merges));

  encoder->merges_.reserve(spec.merges.size());
  for (size_t i = 0; i < spec.merges.size(); ++i) {
    const auto& [left, right] = spec.merges[i];
    const int32_t left_id = vocab->Find(left);
    const int32_t right_id = vocab->Find(right);
    const int32_t result = vocab->Find(Cat(left, right));
    if (left_id < 0 || right_id < 0 || result < 0) {
      const std::string_view missing = left_id < 0    ? "left side"
                                       : right_id < 0 ? "right side"
                                                      : "merged result";
      return absl::InvalidArgumentError(Cat("tokenizer merges[", i, "] '", left, " ", right,
                                            "': its ", missing, " is not a token"));
    }
    // The first occurrence of a pair keeps its rank, as llama.cpp's bpe_ranks.emplace.
    encoder->merges_.try_emplace(PairKey(left_id, right_id),
                                 Merge{static_cast<int32_t>(i), result});
  }
  return encoder;
}

void BpeEncoder::Encode(std::string_view text, bool /*after_special*/,
                        std::vector<int32_t>* out) const {
  const PreTokenized pre = splitter_.Split(text);
  // Piece text -> [offset, offset + count) in *out where its ids were first written.
  absl::flat_hash_map<absl::string_view, std::pair<size_t, size_t>> cache;
  for (const auto& [begin, end] : pre.pieces) {
    const std::string_view word = std::string_view(pre.text).substr(begin, end - begin);
    const auto it = cache.find(tokenizer_internal::ToAbsl(word));
    if (it != cache.end()) {
      const auto [offset, count] = it->second;
      for (size_t k = 0; k < count; ++k) {
        const int32_t id = (*out)[offset + k];
        out->push_back(id);
      }
      continue;
    }
    const size_t offset = out->size();
    EncodeWord(word, out);
    cache.emplace(tokenizer_internal::ToAbsl(word), std::make_pair(offset, out->size() - offset));
  }
}

void BpeEncoder::EncodeWord(std::string_view word, std::vector<int32_t>* out) const {
  if (ignore_merges_) {
    std::string encoded;
    for (char c : word) encoded += ByteToUnicode(static_cast<uint8_t>(c));
    const int32_t id = vocab_->Find(encoded);
    if (id >= 0) {
      out->push_back(id);
      return;
    }
  }

  const int32_t n = static_cast<int32_t>(word.size());
  std::vector<Symbol> symbols(n);
  for (int32_t i = 0; i < n; ++i) {
    symbols[i] = {vocab_->ByteToken(static_cast<uint8_t>(word[i])), i - 1, i + 1 < n ? i + 1 : -1,
                  false};
  }

  std::vector<Bigram> heap;
  auto add_bigram = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const int32_t left_id = symbols[left].id;
    const int32_t right_id = symbols[right].id;
    if (left_id < 0 || right_id < 0) return;
    const auto it = merges_.find(PairKey(left_id, right_id));
    if (it == merges_.end()) return;
    heap.push_back({it->second.rank, left, right, left_id, right_id, it->second.result});
    std::push_heap(heap.begin(), heap.end(), LowerPriority);
  };
  for (int32_t i = 1; i < n; ++i) add_bigram(i - 1, i);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), LowerPriority);
    const Bigram b = heap.back();
    heap.pop_back();
    Symbol& left = symbols[b.left];
    Symbol& right = symbols[b.right];
    if (left.dead || right.dead || left.next != b.right || left.id != b.left_id ||
        right.id != b.right_id) {
      continue;  // stale: one side has been merged since
    }
    left.id = b.result;
    right.dead = true;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = b.left;
    add_bigram(left.prev, b.left);
    add_bigram(b.left, left.next);
  }

  for (int32_t i = n > 0 ? 0 : -1; i >= 0; i = symbols[i].next) {
    if (symbols[i].id >= 0) {
      out->push_back(symbols[i].id);
      continue;
    }
    // llama.cpp then looks each byte of the symbol's text up as a one-byte token.
    for (char c : ByteToUnicode(static_cast<uint8_t>(word[i]))) {
      const int32_t id = vocab_->Find(std::string_view(&c, 1));
      if (id >= 0) out->push_back(id);
    }
  }
}

}  // namespace ripplekv::worker
