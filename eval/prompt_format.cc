#include "eval/prompt_format.h"

#include <string>

#include "worker/tokenizer/chat_template.h"

namespace ripplekv::eval {
namespace {

constexpr worker::EncodeOptions kRaw{.add_special = false, .parse_special = false};
constexpr worker::EncodeOptions kMarkup{.add_special = false, .parse_special = true};

void Append(std::vector<int32_t>* out, const std::vector<int32_t>& ids) {
  out->insert(out->end(), ids.begin(), ids.end());
}

}  // namespace

std::vector<int32_t> PromptFrame::Wrap(const std::vector<int32_t>& body) const {
  std::vector<int32_t> out;
  out.reserve(head.size() + body.size() + tail.size());
  Append(&out, head);
  Append(&out, body);
  Append(&out, tail);
  return out;
}

StatusOr<PromptFrame> BuildPromptFrame(const worker::Tokenizer& tokenizer, bool chat,
                                       const PromptText& text) {
  PromptFrame frame;
  if (tokenizer.add_bos() && tokenizer.bos_id() >= 0) frame.head.push_back(tokenizer.bos_id());
  if (!chat) {
    Append(&frame.head, tokenizer.Encode(text.instruction, kRaw));
    std::string tail(text.question);
    if (!text.answer_prefix.empty()) {
      tail += '\n';
      tail += text.answer_prefix;
    }
    Append(&frame.tail, tokenizer.Encode(tail, kRaw));
    return frame;
  }
  ASSIGN_OR_RETURN(const worker::ChatTemplateInfo info,
                   worker::DetectChatTemplate(tokenizer.chat_template()));
  // The user message's content is a single marker byte; the markup is what surrounds it.
  constexpr char kMarker = '\x01';
  const worker::ChatMessage message{.role = "user", .content = std::string(1, kMarker)};
  const std::string rendered =
      ApplyChatML(std::span<const worker::ChatMessage>(&message, 1), /*add_generation_prompt=*/true,
                  info.default_system_prompt);
  const size_t at = rendered.find(kMarker);
  const std::string_view before = std::string_view(rendered).substr(0, at);
  const std::string_view after = std::string_view(rendered).substr(at + 1);
  Append(&frame.head, tokenizer.Encode(before, kMarkup));
  Append(&frame.head, tokenizer.Encode(text.instruction, kRaw));
  Append(&frame.tail, tokenizer.Encode(text.question, kRaw));
  Append(&frame.tail, tokenizer.Encode(after, kMarkup));
  Append(&frame.tail, tokenizer.Encode(text.answer_prefix, kRaw));
  return frame;
}

}  // namespace ripplekv::eval
