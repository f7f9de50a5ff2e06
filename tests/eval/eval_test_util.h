#pragma once
// Shared fixtures of the evaluation tests: tiny byte-level tokenizers (the id of a byte is the
// byte, so token counts are byte counts) and generated prose.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "tests/worker/tokenizer/test_vocab.h"
#include "worker/tokenizer/tokenizer.h"

namespace ripplekv::eval::testing {

// 256 byte tokens, no merges, no BOS, no chat template.
inline std::unique_ptr<worker::Tokenizer> ByteTokenizer() {
  auto created = worker::CreateTokenizer(worker::testing::ByteLevelSpec({}));
  return created.ok() ? *std::move(created) : nullptr;
}

// Byte tokens plus ChatML control tokens, a ChatML template with a default system prompt, and
// (with `bos`) BOS = <|endoftext|> added by Encode.
struct ChatVocab {
  std::unique_ptr<worker::Tokenizer> tokenizer;
  int32_t bos = -1;
  int32_t im_start = -1;
  int32_t im_end = -1;
};
inline ChatVocab ChatByteTokenizer(bool bos) {
  worker::TokenizerSpec spec = worker::testing::ByteLevelSpec({});
  ChatVocab v;
  v.bos = worker::testing::AddToken(&spec, "<|endoftext|>", worker::TokenType::kControl);
  v.im_start = worker::testing::AddToken(&spec, "<|im_start|>", worker::TokenType::kControl);
  v.im_end = worker::testing::AddToken(&spec, "<|im_end|>", worker::TokenType::kControl);
  spec.bos_id = v.bos;
  spec.eos_id = v.im_end;
  spec.add_bos = bos;
  spec.chat_template =
      "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
      "{{ '<|im_start|>system\nBe brief.<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + "
      "message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
      "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";
  auto created = worker::CreateTokenizer(std::move(spec));
  if (created.ok()) v.tokenizer = *std::move(created);
  return v;
}

// `paragraphs` paragraphs of 6 sentences each, separated by blank lines, without digits, so that
// drawn numbers never occur in it. Sentences are 30..60 bytes.
inline std::string Prose(int paragraphs) {
  constexpr std::string_view kSubjects[] = {"The old sailor", "A quiet girl", "The tall clerk",
                                            "Her brother", "The village doctor"};
  constexpr std::string_view kVerbs[] = {"walked slowly to", "looked across", "thought about",
                                         "painted", "remembered"};
  constexpr std::string_view kObjects[] = {"the grey harbour", "a small garden by the road",
                                           "the church on the hill", "the long winter",
                                           "an empty house"};
  constexpr std::string_view kEnds[] = {".", "!", "?", ".", "."};
  std::string out;
  int k = 0;
  for (int p = 0; p < paragraphs; ++p) {
    if (p > 0) out += "\n\n";
    for (int s = 0; s < 6; ++s, ++k) {
      if (s > 0) out += ' ';
      out += kSubjects[k % 5];
      out += ' ';
      out += kVerbs[(k / 5) % 5];
      out += ' ';
      out += kObjects[(k / 3) % 5];
      out += kEnds[(k / 7) % 5];
    }
  }
  return out;
}

}  // namespace ripplekv::eval::testing
