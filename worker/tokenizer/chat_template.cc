#include "worker/tokenizer/chat_template.h"

#include "worker/tokenizer/strings.h"

namespace ripplekv::worker {

using tokenizer_internal::Append;
using tokenizer_internal::Cat;

namespace {

constexpr std::string_view kImStart = "<|im_start|>";
constexpr std::string_view kImEnd = "<|im_end|>";

bool Contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

// The literal system message a template inserts when the first message is not a system one:
// text between "<|im_start|>system" + newline (real, or escaped in a Jinja string) and the next
// <|im_end|>. Only looked for when the template tests the first message's role.
std::string ExtractDefaultSystemPrompt(std::string_view jinja) {
  if (!Contains(jinja, "!= 'system'") && !Contains(jinja, "!= \"system\"")) return {};
  for (std::string_view head :
       {std::string_view("<|im_start|>system\n"), std::string_view("<|im_start|>system\\n")}) {
    const size_t at = jinja.find(head);
    if (at == std::string_view::npos) continue;
    const size_t begin = at + head.size();
    const size_t end = jinja.find(kImEnd, begin);
    if (end == std::string_view::npos) continue;
    const std::string_view text = jinja.substr(begin, end - begin);
    // A Jinja expression (e.g. "' + message['content'] + '") is not a literal prompt.
    if (Contains(text, "{{") || Contains(text, "' +") || Contains(text, "+ '")) continue;
    return std::string(text);
  }
  return {};
}

}  // namespace

std::string ApplyChatML(std::span<const ChatMessage> messages, bool add_generation_prompt,
                        std::string_view default_system_prompt) {
  std::string out;
  if (!default_system_prompt.empty() && (messages.empty() || messages[0].role != "system")) {
    Append(&out, kImStart, "system\n", default_system_prompt, kImEnd, "\n");
  }
  for (const ChatMessage& m : messages) {
    Append(&out, kImStart, m.role, "\n", m.content, kImEnd, "\n");
  }
  if (add_generation_prompt) Append(&out, kImStart, "assistant\n");
  return out;
}

StatusOr<ChatTemplateInfo> DetectChatTemplate(std::string_view jinja) {
  if (jinja.empty()) return absl::NotFoundError("the model has no chat template");
  if (Contains(jinja, kImStart) && Contains(jinja, kImEnd)) {
    ChatTemplateInfo info;
    info.default_system_prompt = ExtractDefaultSystemPrompt(jinja);
    return info;
  }
  std::string_view kind = "unrecognised";
  if (Contains(jinja, "<|start_header_id|>")) {
    kind = "llama3";
  } else if (Contains(jinja, "[INST]")) {
    kind = "llama2/mistral ([INST])";
  } else if (Contains(jinja, "<start_of_turn>")) {
    kind = "gemma";
  } else if (Contains(jinja, "<|user|>") || Contains(jinja, "<|assistant|>")) {
    kind = "zephyr/phi3 (<|user|>)";
  } else if (Contains(jinja, "<|User|>")) {
    kind = "deepseek";
  }
  return absl::UnimplementedError(
      Cat("chat template of kind ", kind, " is not supported; only ChatML is"));
}

}  // namespace ripplekv::worker
