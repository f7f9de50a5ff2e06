#pragma once
// What a GGUF file's tokenizer is, read from its metadata without building it.
// TokenizerFromGguf (tokenizer.h) builds the whole tokenizer; both read these fields through the
// same code (tokenizer_gguf.cc), so the defaults and checks below are those of TokenizerFromGguf.

#include <cstdint>

#include "base/status.h"
#include "worker/model/gguf_reader.h"

namespace ripplekv::worker {

// The tokenizer facts a model description needs (`ripplekv info`).
struct TokenizerFacts {
  int32_t vocab_size = 0;  // length of tokenizer.ggml.tokens
  int32_t bos_id = -1;     // -1 when none
  int32_t eos_id = -1;     // -1 when none
  bool add_bos = false;

  bool operator==(const TokenizerFacts&) const = default;
};

// Reads tokenizer.ggml.model ("gpt2" or "llama"), the length of tokenizer.ggml.tokens (its strings
// are not copied), tokenizer.ggml.pre for "gpt2" (its add_bos default),
// tokenizer.ggml.bos_token_id, eos_token_id and add_bos_token, with llama.cpp's defaults for absent
// keys (tokenizer_gguf.cc). Whenever TokenizerFromGguf(file) succeeds, the result equals its
// tokenizer's vocab_size(), bos_id(), eos_id() and add_bos(). Errors, naming the file and key, are
// TokenizerFromGguf's for these keys: InvalidArgument (no tokenizer.ggml.model, tokens not an array
// of strings, unknown pre-tokenizer, an id out of range, a key of the wrong type), NotFound (no
// tokenizer.ggml.tokens), Unimplemented (another tokenizer model). Keys it does not read (scores,
// token types, merges, other ids) and the vocabulary itself (e.g. duplicate tokens) are not
// checked: TokenizerFromGguf may still fail where this succeeds.
[[nodiscard]] StatusOr<TokenizerFacts> TokenizerFactsFromGguf(const GgufFile& file);

}  // namespace ripplekv::worker
