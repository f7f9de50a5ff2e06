#pragma once
// Byte-level BPE (GPT-2 family), as llama.cpp's llm_tokenizer_bpe_session: the text is cut by the
// pre-tokenizer regexes, every piece becomes one symbol per byte (the byte's GPT-2 character), and
// the adjacent pair with the lowest merge rank is merged first (leftmost on ties) until no pair
// has a merge. A final symbol that is not a token (a byte without its character in the
// vocabulary) is dropped, as llama.cpp does.
//
// Cost: one hash lookup per candidate pair, a binary heap per piece, and a per-call cache so a
// repeated piece is merged once.

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "base/status.h"
#include "worker/tokenizer/pre_tokenizer.h"
#include "worker/tokenizer/text_encoder.h"
#include "worker/tokenizer/tokenizer_spec.h"
#include "worker/tokenizer/vocab.h"

namespace ripplekv::worker {

class BpeEncoder final : public TextEncoder {
 public:
  // `vocab` must outlive the encoder. Uses spec.merges, spec.pre / spec.pre_regexes and
  // spec.ignore_merges. Errors: InvalidArgument for a merge whose side or result is not a token
  // (naming the merge index), an unknown pre-tokenizer type or a regex that does not compile.
  [[nodiscard]] static StatusOr<std::unique_ptr<BpeEncoder>> Create(const Vocab* vocab,
                                                                    const TokenizerSpec& spec);

  void Encode(std::string_view text, bool after_special, std::vector<int32_t>* out) const override;

 private:
  struct Merge {
    int32_t rank;
    int32_t result;  // token id of the merged pair
  };

  BpeEncoder(const Vocab* vocab, RegexSplitter splitter, bool ignore_merges)
      : vocab_(vocab), splitter_(std::move(splitter)), ignore_merges_(ignore_merges) {}

  static uint64_t PairKey(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }

  // Appends the ids of one pre-tokenized piece (raw bytes).
  void EncodeWord(std::string_view word, std::vector<int32_t>* out) const;

  const Vocab* vocab_;
  RegexSplitter splitter_;
  bool ignore_merges_;
  absl::flat_hash_map<uint64_t, Merge> merges_;  // (left id, right id) -> rank and result
};

}  // namespace ripplekv::worker
