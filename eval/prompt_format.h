#pragma once
// The token ids around an example's body (haystack, JSON data, LongBench context): a head (BOS,
// chat opening, instruction) and a tail (question, chat closing, answer prefix), so the body can
// be sized in tokens and spliced in without re-tokenizing it.
//
//   plain:  [BOS] instruction | body | question "\n" answer_prefix
//   chat:   [BOS] <|im_start|>system ... (the template's default system prompt, if any)
//           <|im_start|>user\n instruction | body | question <|im_end|>\n<|im_start|>assistant\n
//           answer_prefix
//
// BOS is present when the vocabulary adds one (Tokenizer::add_bos). Chat markup is encoded with
// parse_special; the instruction, question, answer prefix and body never are, so text that looks
// like a control token stays text. The answer prefix (RULER appends one after the chat template
// too) makes small models answer directly; empty means none.

#include <cstdint>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "worker/tokenizer/tokenizer.h"

namespace ripplekv::eval {

struct PromptFrame {
  std::vector<int32_t> head;
  std::vector<int32_t> tail;

  int64_t size() const { return static_cast<int64_t>(head.size() + tail.size()); }
  // head + body + tail.
  std::vector<int32_t> Wrap(const std::vector<int32_t>& body) const;
};

struct PromptText {
  std::string_view instruction;    // before the body
  std::string_view question;       // after the body
  std::string_view answer_prefix;  // start of the answer; may be empty
};

// Errors (chat only): those of DetectChatTemplate on the tokenizer's chat template (NotFound
// when the model has none, Unimplemented when it is not ChatML).
[[nodiscard]] StatusOr<PromptFrame> BuildPromptFrame(const worker::Tokenizer& tokenizer, bool chat,
                                                     const PromptText& text);

}  // namespace ripplekv::eval
