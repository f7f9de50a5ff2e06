#pragma once
// Chat prompts. We implement one template, ChatML, the one SmolLM2-Instruct (and Qwen2, ...) use:
//   <|im_start|>{role}\n{content}<|im_end|>\n   for every message, then, with
//   add_generation_prompt, <|im_start|>assistant\n
// There is no Jinja interpreter: DetectChatTemplate() recognises ChatML in a model's
// tokenizer.chat_template and refuses anything else with an error that names what it looks like.
// The result of ApplyChatML must be encoded with EncodeOptions::parse_special = true so that the
// markers become their special tokens.

#include <span>
#include <string>
#include <string_view>

#include "base/status.h"

namespace ripplekv::worker {

struct ChatMessage {
  std::string role;  // "system", "user", "assistant", ...
  std::string content;
};

// Formats `messages` as ChatML. When `default_system_prompt` is not empty and the first message
// is not a system message, a system message with that text is put first (what SmolLM2's Jinja
// template does; llama.cpp's built-in ChatML formatter does not, hence empty by default).
std::string ApplyChatML(std::span<const ChatMessage> messages, bool add_generation_prompt,
                        std::string_view default_system_prompt = {});

enum class ChatTemplateKind { kChatML };

struct ChatTemplateInfo {
  ChatTemplateKind kind = ChatTemplateKind::kChatML;
  // The system message the template inserts when the conversation has none (SmolLM2: "You are a
  // helpful AI assistant named SmolLM, trained by Hugging Face"); empty when it inserts none.
  std::string default_system_prompt;
};

// Recognises the template of a model's tokenizer.chat_template (Jinja source).
// Errors: NotFound when `jinja` is empty; Unimplemented for a template that is not ChatML, naming
// the family it looks like (llama2/mistral [INST], llama3 header ids, gemma turns, ...).
[[nodiscard]] StatusOr<ChatTemplateInfo> DetectChatTemplate(std::string_view jinja);

}  // namespace ripplekv::worker
