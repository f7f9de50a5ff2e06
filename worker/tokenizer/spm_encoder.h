#pragma once
// SentencePiece-style BPE (Llama 2, Mistral GGUFs, tokenizer.ggml.model "llama"), as llama.cpp's
// llm_tokenizer_spm_session: spaces become U+2581 ("▁"), a space is put first when the text
// starts the input or follows a special token (add_space_prefix), the text is cut into UTF-8
// characters, and the adjacent pair whose concatenation is the token with the highest score is
// merged first (leftmost on ties) while any such pair exists. A final symbol that is not a token
// is written as byte tokens <0xNN> (byte fallback); a byte without a token becomes the unknown
// token, or nothing when there is none (llama.cpp throws there).

#include <cstdint>
#include <string_view>
#include <vector>

#include "worker/tokenizer/text_encoder.h"
#include "worker/tokenizer/vocab.h"

namespace ripplekv::worker {

class SpmEncoder final : public TextEncoder {
 public:
  // `vocab` must outlive the encoder.
  SpmEncoder(const Vocab* vocab, bool add_space_prefix, int32_t unk_id)
      : vocab_(vocab), add_space_prefix_(add_space_prefix), unk_id_(unk_id) {}

  void Encode(std::string_view text, bool after_special, std::vector<int32_t>* out) const override;

 private:
  const Vocab* vocab_;
  bool add_space_prefix_;
  int32_t unk_id_;
};

}  // namespace ripplekv::worker
