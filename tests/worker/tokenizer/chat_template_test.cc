// ChatML formatting and chat-template detection.

#include "worker/tokenizer/chat_template.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ripplekv::worker {
namespace {

using ::testing::HasSubstr;

// SmolLM2-135M-Instruct's tokenizer.chat_template, as stored in its GGUF.
constexpr std::string_view kSmolLm2Template =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}";

TEST(ChatTemplateTest, FormatsMessagesAsChatMl) {
  const std::vector<ChatMessage> messages = {{"system", "Be brief."}, {"user", "Hi!"}};
  EXPECT_EQ(ApplyChatML(messages, /*add_generation_prompt=*/false),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n");
  EXPECT_EQ(ApplyChatML(messages, /*add_generation_prompt=*/true),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(ApplyChatML({}, true), "<|im_start|>assistant\n");
}

TEST(ChatTemplateTest, DefaultSystemPromptOnlyWhenTheConversationHasNone) {
  const std::vector<ChatMessage> user_only = {{"user", "Hi"}};
  EXPECT_EQ(ApplyChatML(user_only, true, "Sys"),
            "<|im_start|>system\nSys<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\n");
  const std::vector<ChatMessage> with_system = {{"system", "Own"}, {"user", "Hi"}};
  EXPECT_EQ(ApplyChatML(with_system, false, "Sys"),
            "<|im_start|>system\nOwn<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
}

TEST(ChatTemplateTest, DetectsSmolLm2TemplateAsChatMlWithItsDefaultSystemPrompt) {
  auto info = DetectChatTemplate(kSmolLm2Template);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->kind, ChatTemplateKind::kChatML);
  EXPECT_EQ(info->default_system_prompt,
            "You are a helpful AI assistant named SmolLM, trained by Hugging Face");
}

TEST(ChatTemplateTest, PlainChatMlHasNoDefaultSystemPrompt) {
  auto info = DetectChatTemplate(
      "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
      "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->default_system_prompt, "");
}

TEST(ChatTemplateTest, OtherTemplatesAreRefusedByName) {
  auto llama3 = DetectChatTemplate("{{ '<|start_header_id|>' + message['role'] }}");
  ASSERT_FALSE(llama3.ok());
  EXPECT_EQ(llama3.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(llama3.status().message()), HasSubstr("llama3"));
  auto mistral = DetectChatTemplate("{{ '[INST] ' + message['content'] + ' [/INST]' }}");
  EXPECT_THAT(std::string(mistral.status().message()), HasSubstr("[INST]"));
  EXPECT_EQ(DetectChatTemplate("").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace ripplekv::worker
