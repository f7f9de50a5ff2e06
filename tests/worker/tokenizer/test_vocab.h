#pragma once
// Hand-made vocabularies for the tokenizer unit tests.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "worker/tokenizer/tokenizer_spec.h"
#include "worker/tokenizer/utf8.h"

namespace ripplekv::worker::testing {

// Byte-level encoding of raw text ("a b" -> "aĠb"), as vocabulary entries spell it.
inline std::string ByteLevel(std::string_view raw) {
  std::string out;
  for (char c : raw) out += ByteToUnicode(static_cast<uint8_t>(c));
  return out;
}

// A byte-level ("gpt2") vocabulary: ids 0..255 are the 256 byte characters in byte order (so the
// id of a single byte b is b), then one token per merge result, in merge order. `merges` are
// given as raw text pairs.
inline TokenizerSpec ByteLevelSpec(const std::vector<std::pair<std::string, std::string>>& merges,
                                   std::string pre = "gpt-2") {
  TokenizerSpec spec;
  spec.model = "gpt2";
  spec.pre = std::move(pre);
  for (int b = 0; b < 256; ++b) spec.tokens.push_back(ByteToUnicode(static_cast<uint8_t>(b)));
  for (const auto& [left, right] : merges) {
    spec.merges.emplace_back(ByteLevel(left), ByteLevel(right));
    const std::string merged = ByteLevel(left + right);
    bool present = false;
    for (const std::string& t : spec.tokens) present |= t == merged;
    if (!present) spec.tokens.push_back(merged);
  }
  return spec;
}

// Id of the token with text `text` in `spec`, or -1.
inline int32_t IdOf(const TokenizerSpec& spec, std::string_view text) {
  for (size_t i = 0; i < spec.tokens.size(); ++i) {
    if (spec.tokens[i] == text) return static_cast<int32_t>(i);
  }
  return -1;
}

// Adds a token of the given type and returns its id.
inline int32_t AddToken(TokenizerSpec* spec, std::string text, TokenType type) {
  if (spec->token_types.empty()) {
    spec->token_types.assign(spec->tokens.size(), static_cast<int32_t>(TokenType::kNormal));
  }
  spec->tokens.push_back(std::move(text));
  spec->token_types.push_back(static_cast<int32_t>(type));
  if (!spec->scores.empty()) spec->scores.push_back(0.0f);
  return static_cast<int32_t>(spec->tokens.size() - 1);
}

}  // namespace ripplekv::worker::testing
