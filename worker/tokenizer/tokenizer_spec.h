#pragma once
// A tokenizer vocabulary as plain data: what a GGUF file stores under tokenizer.ggml.*, or what
// TokenizerFromHfJson reads from tokenizer.json. CreateTokenizer() (tokenizer.h) validates it.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ripplekv::worker {

// Token types, numbered as GGUF's tokenizer.ggml.token_type (llama.cpp's llama_token_type).
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,      // <|im_start|>, <s>, ...: matched in text only with parse_special
  kUserDefined = 4,  // added tokens: always matched in text before the model runs
  kUnused = 5,
  kByte = 6,  // SentencePiece byte fallback <0xNN>
};

struct TokenizerSpec {
  // "gpt2": byte-level BPE over merge ranks (GPT-2, Llama 3, Qwen2, SmolLM).
  // "llama": SentencePiece-style BPE over token scores with <0xNN> byte fallback (Llama 2,
  // Mistral).
  std::string model = "gpt2";
  // "gpt2" only: pre-tokenizer type, as GGUF's tokenizer.ggml.pre (see LookupPreTokenizer in
  // pre_tokenizer.h). Types that imply ignore_merges (llama3) set it on their own.
  std::string pre = "default";
  // "gpt2" only: when not empty, these regexes (applied in order, llama.cpp semantics) are used
  // instead of the list `pre` names. TokenizerFromHfJson fills them from tokenizer.json.
  std::vector<std::string> pre_regexes;

  // Token id -> text. "gpt2": byte-level encoded (a space is "Ġ"); "llama": spaces as U+2581.
  std::vector<std::string> tokens;
  std::vector<float> scores;         // empty, or one per token ("llama": merge priority)
  std::vector<int32_t> token_types;  // empty (all kNormal), or one TokenType value per token
  // "gpt2": merges in rank order (first = applied first). Both sides and their concatenation
  // must be tokens.
  std::vector<std::pair<std::string, std::string>> merges;

  // Special token ids; -1 when the vocabulary has none.
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  int32_t eot_id = -1;  // end of turn; found by text (<|im_end|>, <|eot_id|>, ...) when -1
  int32_t eom_id = -1;  // end of message (<|eom_id|>); found by text when -1
  int32_t unk_id = -1;
  int32_t pad_id = -1;
  bool add_bos = false;  // Encode(add_special) prepends bos_id
  bool add_eos = false;  // Encode(add_special) appends eos_id
  // "llama" only: a space is put before raw text at the start and after every special token.
  bool add_space_prefix = true;
  // "gpt2" only: a pre-token that is itself a token is emitted whole, without merging.
  bool ignore_merges = false;

  std::string chat_template;  // Jinja source (tokenizer.chat_template), or empty
};

}  // namespace ripplekv::worker
