#pragma once
// Text <-> token ids, identical to llama.cpp (llama-vocab.cpp) on the same GGUF:
//   * byte-level BPE ("gpt2" vocabularies: GPT-2, Llama 3, Qwen2, SmolLM2) with llama.cpp's
//     per-type pre-tokenizer regexes (pre_tokenizer.h) and merges applied by rank;
//   * SentencePiece-style BPE ("llama" vocabularies: Llama 2, Mistral) over token scores, with a
//     space prefix and <0xNN> byte fallback.
// Special tokens are cut out of the raw text first, longest first (llama.cpp's
// tokenizer_st_partition): user-defined tokens always, control tokens only with parse_special.
//
// Known differences from llama.cpp, all outside normal text: model-specific lstrip/rstrip
// attributes (phi-3, jina) are not applied; PCRE2's Unicode tables may differ from llama.cpp's for
// recently assigned code points; a 4-byte UTF-8 form above U+10FFFF becomes U+FFFD (llama.cpp
// throws).
//
// A Tokenizer is immutable once built; all methods are const and safe to call from several
// threads at once.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "worker/model/gguf_reader.h"
#include "worker/tokenizer/chat_template.h"
#include "worker/tokenizer/tokenizer_spec.h"

namespace ripplekv::worker {

struct EncodeOptions {
  bool add_special = true;     // add BOS / EOS where the vocabulary says (add_bos() / add_eos())
  bool parse_special = false;  // recognise control tokens (<|im_start|>, <s>, ...) in the text
};

struct DecodeOptions {
  bool skip_special = false;  // drop control and unknown tokens instead of rendering their text
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Token ids of `text`, as llama_tokenize(text, add_special, parse_special). Any bytes are
  // accepted: invalid UTF-8 is read as U+FFFD (llama.cpp does the same).
  std::vector<int32_t> Encode(std::string_view text, const EncodeOptions& options = {}) const {
    return DoEncode(text, options);
  }

  // The bytes the ids stand for: the concatenation of TokenToPiece, except that "llama"
  // vocabularies drop the space Encode put before raw text (at the start and after a special
  // token). The result may be invalid UTF-8 when the ids end inside a character; callers that
  // stream should hold such a tail back. Ids out of range contribute nothing.
  // Decode(Encode(s, {.add_special = false})) == s for any valid UTF-8 `s` without special tokens
  // whose bytes all have tokens (byte-level vocabularies may lack some: SmolLM2 has none for 0x04
  // or 0xF1, and Encode drops such bytes as llama.cpp does), and, for "llama" vocabularies,
  // without U+2581, which SentencePiece reads as a space.
  std::string Decode(std::span<const int32_t> ids, const DecodeOptions& options = {}) const {
    return DoDecode(ids, options);
  }

  // Bytes of one token as llama.cpp's token_to_piece(special = true) renders them: byte-level
  // decoded ("gpt2"), U+2581 as space and <0xNN> as its byte ("llama"), the text of control and
  // user-defined tokens as is. Empty for ids out of range and unused/undefined tokens.
  virtual std::string TokenToPiece(int32_t id) const = 0;

  virtual int32_t bos_id() const = 0;  // -1 when none
  virtual int32_t eos_id() const = 0;  // -1 when none
  virtual bool add_bos() const = 0;
  virtual bool add_eos() const = 0;
  virtual int vocab_size() const = 0;
  // End of generation: eos, eot (<|im_end|>, <|eot_id|>, ...), eom and the other tokens llama.cpp
  // lists as EOG (llama_vocab_is_eog).
  virtual bool IsEog(int32_t id) const = 0;
  // The model's Jinja chat template (tokenizer.chat_template), or empty; see chat_template.h.
  virtual const std::string& chat_template() const = 0;

 private:
  virtual std::vector<int32_t> DoEncode(std::string_view text,
                                        const EncodeOptions& options) const = 0;
  virtual std::string DoDecode(std::span<const int32_t> ids,
                               const DecodeOptions& options) const = 0;
};

// Validates `spec` and builds its tokenizer. Errors (InvalidArgument, naming the field and index):
// empty vocabulary, duplicate token text, scores/token_types of the wrong length, special id out
// of range, add_bos/add_eos without the id, a merge whose side or result is not a token, unknown
// model or pre-tokenizer type, a regex that does not compile.
[[nodiscard]] StatusOr<std::unique_ptr<Tokenizer>> CreateTokenizer(TokenizerSpec spec);

// Reads the tokenizer.ggml.* keys (model, pre, tokens, scores, token_type, merges, bos/eos/eot/
// unknown/padding ids, add_bos/add_eos/add_space_prefix) and tokenizer.chat_template, with
// llama.cpp's defaults for absent keys (see tokenizer_gguf.cc). Errors name the file and key:
// InvalidArgument for missing or malformed keys, Unimplemented for other tokenizer models (bert,
// t5, rwkv, ...).
[[nodiscard]] StatusOr<std::unique_ptr<Tokenizer>> TokenizerFromGguf(const GgufFile& file);

// Reads a Hugging Face byte-level BPE tokenizer: tokenizer.json (model.type "BPE", merges as
// "a b" strings or [a, b] pairs, added_tokens as specials, a pre-tokenizer made of ByteLevel,
// Split(regex, Isolated) and Digits steps) and, when `tokenizer_config_json` names an existing
// file, its bos_token / eos_token / add_bos_token / add_eos_token / chat_template.
// Each file is read whole, at most 1 GiB. Errors: those of ReadFileBounded (docs/ERRORS.md:
// NotFound for no tokenizer.json, ResourceExhausted over the cap, ...), InvalidArgument
// (malformed, naming the file and field), Unimplemented (another model or pre-tokenizer type,
// named).
[[nodiscard]] StatusOr<std::unique_ptr<Tokenizer>> TokenizerFromHfJson(
    const std::string& tokenizer_json, const std::string& tokenizer_config_json);

}  // namespace ripplekv::worker
