// libFuzzer target for Hugging Face tokenizer files (worker/tokenizer/tokenizer.h,
// TokenizerFromHfJson): any bytes must give a Status or a tokenizer, never a crash, a sanitizer
// report or an uncaught exception. A tokenizer that loads must encode a few fixed strings to ids
// in range, decode them, and give back any alphanumeric ASCII string whose bytes all have tokens.
// A broken property traps.
//
// Input: tokenizer.json, optionally followed by a NUL byte and tokenizer_config.json (a NUL never
// appears in valid JSON text, so the split loses nothing). Both are written to one pair of
// scratch files per process, rewritten every run.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tests/fuzz/scratch_file.h"
#include "worker/tokenizer/tokenizer.h"

namespace {

using ripplekv::worker::EncodeOptions;
using ripplekv::worker::Tokenizer;

// Token ids probed one by one with TokenToPiece / IsEog (keeps each run fast).
constexpr int32_t kMaxProbedIds = 512;

void Require(bool property) {
  if (!property) __builtin_trap();
}

bool IsAlnumAscii(std::string_view s) {
  for (char c : s) {
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (!alnum) return false;
  }
  return true;
}

// Whether Encode keeps `c`: a lone byte whose token decodes back to it.
bool HasByteToken(const Tokenizer& tokenizer, char c) {
  const std::string one(1, c);
  const std::vector<int32_t> ids = tokenizer.Encode(one, {.add_special = false});
  return ids.size() == 1 && tokenizer.Decode(ids) == one;
}

void Exercise(const Tokenizer& tokenizer) {
  static constexpr std::string_view kTexts[] = {
      "Hello world",
      "abc123",
      "  leading and trailing spaces  \n\n",
      "<|im_start|>user\nHi<|im_end|>\n",
      "caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x98\x80",
      "\xFF\xFE invalid \xC3 utf-8 \xED\xA0\x80",
      "12345678901234567890",
      "don't we'll I'M",
  };
  const int vocab = tokenizer.vocab_size();
  Require(vocab > 0);
  for (std::string_view text : kTexts) {
    for (const EncodeOptions& options :
         {EncodeOptions{.add_special = false, .parse_special = false},
          EncodeOptions{.add_special = true, .parse_special = true}}) {
      const std::vector<int32_t> ids = tokenizer.Encode(text, options);
      for (int32_t id : ids) Require(id >= 0 && id < vocab);
      (void)tokenizer.Decode(ids);
      (void)tokenizer.Decode(ids, {.skip_special = true});
    }
    // Round trip of plain alphanumeric text, when every byte has its token.
    if (IsAlnumAscii(text)) {
      bool all_bytes = true;
      for (char c : text) all_bytes = all_bytes && HasByteToken(tokenizer, c);
      if (all_bytes) {
        Require(tokenizer.Decode(tokenizer.Encode(text, {.add_special = false})) == text);
      }
    }
  }
  for (int32_t id = -1; id < vocab && id < kMaxProbedIds; ++id) {
    (void)tokenizer.TokenToPiece(id);
    (void)tokenizer.IsEog(id);
  }
  (void)tokenizer.TokenToPiece(vocab);
  const int32_t odd_ids[] = {-5, vocab, vocab + 100, 0, tokenizer.bos_id(), tokenizer.eos_id()};
  (void)tokenizer.Decode(odd_ids);
  if (!tokenizer.chat_template().empty()) {
    (void)ripplekv::worker::DetectChatTemplate(tokenizer.chat_template());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  static ripplekv::fuzz::ScratchFile* const tokenizer_file = new ripplekv::fuzz::ScratchFile();
  static ripplekv::fuzz::ScratchFile* const config_file = new ripplekv::fuzz::ScratchFile();
  const size_t nul = input.find('\0');
  tokenizer_file->Write(input.substr(0, nul));
  // No NUL: no tokenizer_config.json (an empty path means none).
  std::string config_path;
  if (nul != std::string_view::npos) {
    config_file->Write(input.substr(nul + 1));
    config_path = config_file->path();
  }
  auto tokenizer = ripplekv::worker::TokenizerFromHfJson(tokenizer_file->path(), config_path);
  if (!tokenizer.ok()) return 0;
  Exercise(**tokenizer);
  return 0;
}
